"""rlgym/SWE-v0's content splits: `train`, `val` and `test` share no issue, no buggy repository and no
gold fix, on both shipped tiers and on SWE-bench-style files (split by content, or by the rows' own
`split`); an instance named by option must belong to the env's split. Resets start no sandbox."""

from dataclasses import replace

import pytest

import rlgym_llm
from rlgym_envs.swe.env import SWEEnv
from rlgym_envs.swe.instances import Instance, builtin_instances
from rlgym_envs.swe.splits import instance_splits, tree_key
from rlgym_envs.swe.swebench import export_jsonl, load_instances
from rlgym_llm import ConfigError
from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.splits import SPLITS
from rlgym_llm.testing.splits import assert_disjoint, split_pools

# Instances per split (docs/swe_env.md). A change here moves instances between pools: a model trained
# before the change may have trained on instances that are now held out.
SHIPPED_SIZES = {"toy": {"train": 14, "val": 4, "test": 6}, "real": {"train": 60, "val": 23, "test": 18}}


def _contents(instances):
    """What must not cross splits: the issue, the buggy repository and the gold fix of each instance."""
    return [
        {i.problem_statement for i in instances},
        {tree_key(i) for i in instances},
        {i.gold_patch for i in instances},
    ]


@pytest.mark.parametrize(("tier", "seeds"), [("toy", 2000), ("real", 100)])  # a real reset takes ~6 ms
def test_the_shipped_tiers_split_into_disjoint_pools_of_the_documented_sizes(tier, seeds):
    pools = split_pools("rlgym/SWE-v0", seeds=range(seeds), tier=tier)
    assert_disjoint(pools)  # no opening, no content key in two splits
    envs = {s: SWEEnv(tier=tier, split=s) for s in SPLITS}
    assert {s: len(env.instances) for s, env in envs.items()} == SHIPPED_SIZES[tier]
    every = envs["train"].split_of_instance
    assert sum(SHIPPED_SIZES[tier].values()) == len(every)  # each instance in exactly one pool
    for split, env in envs.items():
        assert {i.id for i in env.instances} == {i for i, s in every.items() if s == split}
        assert pools[split].keys <= {env._keys[i.id] for i in env.instances}  # draws stay in the pool
        if tier == "toy":
            assert len(pools[split].keys) == len(env.instances)  # and 2,000 draws reach all of it
    for a, b in [("train", "val"), ("train", "test"), ("val", "test")]:
        for ours, theirs in zip(_contents(envs[a].instances), _contents(envs[b].instances), strict=True):
            assert not ours & theirs


def test_same_seed_same_instance_and_the_split_is_reported():
    for split in SPLITS:
        a = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=split)
        b = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=split)
        for seed in range(20):
            (opening_a, info_a), (opening_b, info_b) = a.reset(seed=seed), b.reset(seed=seed)
            assert opening_a == opening_b and info_a["task_id"] == info_b["task_id"]
            assert info_a["split"] == split and a.unwrapped.task.key == a.unwrapped._keys[info_a["task_id"]]


def test_bad_split_options_are_config_errors_at_make():
    for bad in ("validation", "", None):
        with pytest.raises(ConfigError, match="split must be one of"):
            rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=bad)
    with pytest.raises(ConfigError, match="split_by must be one of"):
        rlgym_llm.make("rlgym/SWE-v0", tier="toy", split_by="file")


def test_an_instance_of_another_split_is_refused_by_option_and_by_instance_ids():
    train = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split="train")
    every = train.unwrapped.split_of_instance
    for instance_id, split in every.items():
        if split != "train":
            with pytest.raises(ValueError, match=f"'{split}' split, not of this env's 'train' split"):
                train.reset(options={"instance_id": instance_id})
    val_id = next(i for i, s in every.items() if s == "val")
    with pytest.raises(ConfigError, match=f"instance '{val_id}' is in the 'val' split, not in 'train'"):
        SWEEnv(tier="toy", instance_ids=[val_id])
    env = SWEEnv(tier="toy", instance_ids=[val_id], split="val")
    assert [i.id for i in env.instances] == [val_id]
    assert env.reset(options={"instance_id": val_id})[1]["task_id"] == val_id
    with pytest.raises(ValueError, match=r"\[0, 1\) \(the 'val' split's instances\)"):
        env.reset(options={"task_index": 1})


def test_a_swebench_style_file_is_split_by_content_and_an_export_keeps_the_split(tmp_path):
    path = export_jsonl(builtin_instances(), tmp_path)
    for split in SPLITS:
        loaded = {i.id for i in SWEEnv(dataset=str(path), split=split).instances}
        assert loaded == {i.id for i in SWEEnv(tier="toy", split=split).instances}
    pools = split_pools("rlgym/SWE-v0", seeds=range(1000), dataset=str(path))
    assert_disjoint(pools)


def _instance(n, statement=None, source=None, split=None):
    files = {"pkg/mod.py": source or f"VALUE = {n}\n", "tests/test_mod.py": "def test_value():\n    assert True\n"}
    return Instance(
        id=f"inst-{n}",
        repo=f"repo{n % 4}",
        problem_statement=statement or f"VALUE is wrong in case {n}.",
        files=files,
        test_files={"tests/test_mod.py": files["tests/test_mod.py"]},
        fail_to_pass=("tests/test_mod.py::test_value",),
        pass_to_pass=(),
        split=split,
    )


def test_the_same_issue_or_the_same_buggy_tree_keeps_instances_together():
    base = [_instance(n) for n in range(40)]
    same_issue = _instance(100, statement=base[3].problem_statement)
    same_tree = _instance(101, source=base[5].files["pkg/mod.py"])
    splits = instance_splits([*base, same_issue, same_tree])
    assert splits[40] == splits[3] and splits[41] == splits[5]
    assert splits[40][1] == splits[3][1]  # one content key for the group
    assert {s for s, _ in splits} == set(SPLITS)
    envs = {s: SWEEnv(dataset=[*base, same_issue, same_tree], split=s) for s in SPLITS}
    assert sum(len(env.instances) for env in envs.values()) == 42
    by_repo = instance_splits(base, split_by="repo")
    for repo in {i.repo for i in base}:
        assert len({s for i, (s, _) in zip(base, by_repo) if i.repo == repo}) == 1  # whole repositories


def test_the_data_s_own_split_is_kept_and_checked(tmp_path):
    own = [_instance(n, split=SPLITS[n % 3]) for n in range(9)]
    for k, split in enumerate(SPLITS):
        assert [i.id for i in SWEEnv(dataset=own, split=split).instances] == [f"inst-{n}" for n in range(k, 9, 3)]
    with pytest.raises(ConfigError, match="some instances carry `split` and 1 do not"):
        SWEEnv(dataset=[*own, _instance(20)])
    torn = [_instance(1, split="train"), _instance(2, statement=own[1].problem_statement, split="test")]
    with pytest.raises(ConfigError, match=r"\['inst-1', 'inst-2'\] are the same task"):
        SWEEnv(dataset=torn)
    alone = [replace(own[0], split=None)]
    (split,) = {s for s, _ in instance_splits(alone)}
    other = next(s for s in SPLITS if s != split)
    with pytest.raises(ConfigError, match=f"no instance of the data set is in the '{other}' split"):
        SWEEnv(dataset=alone, split=other)
    # The field travels through SWE-bench-style JSONL, and a bad value names the line.
    path = export_jsonl([replace(i, split="test") for i in builtin_instances()[:2]], tmp_path)
    assert {i.split for i in load_instances(path)} == {"test"}
    assert len(SWEEnv(dataset=str(path), split="test").instances) == 2
    path.write_text(path.read_text().replace('"split": "test"', '"split": "dev"', 1))
    with pytest.raises(DataFileError, match=r"tasks\.jsonl:1: split must be one of"):
        load_instances(path)


def test_splitting_the_toy_tier_by_repository_leaves_a_split_empty():
    """Why `split_by="instance"` is the default: six repositories cannot fill three pools."""
    train = SWEEnv(tier="toy", split_by="repo")
    repos = {s: {i.repo for i in SWEEnv(tier="toy", split_by="repo", split=s).instances} for s in ("train", "test")}
    assert repos["train"] and repos["test"] and not repos["train"] & repos["test"]
    assert set(train.split_of_instance.values()) == {"train", "test"}
    with pytest.raises(ConfigError, match="no instance of the data set is in the 'val' split"):
        SWEEnv(tier="toy", split_by="repo", split="val")


def test_the_oracle_resolves_an_instance_of_every_split():
    from rlgym_agents.swe import SWEOracleAgent

    for split in SPLITS:
        env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=split, dense_signals=False)
        try:
            agent = SWEOracleAgent(env)
            messages, info = env.reset(seed=0)
            agent.reset(messages, info)
            while True:
                messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
                if terminated or truncated:
                    break
            assert reward == 1.0, (split, info["outcome"])
        finally:
            env.close()
