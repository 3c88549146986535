"""rlgym/Code-v0's content splits: `train`, `val` and `test` share no prompt, no statement and no hidden
test set, on the shipped tasks and on a user's task file (split by content, or by the file's own
`split` field); a task named by option must belong to the env's split."""

import json

import pytest

import rlgym_llm
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import TaskFileError, load_specs
from rlgym_llm import ConfigError
from rlgym_llm.core.splits import SPLITS, split_of
from rlgym_llm.testing.splits import assert_disjoint, split_pools

# The shipped 51 tasks per split (docs/code_env.md). A change here moves tasks between pools: a model
# trained before the change may have trained on tasks that are now held out.
SHIPPED_SIZES = {"train": 27, "val": 14, "test": 10}


def hidden_of(task):
    return json.dumps(dict(task.hidden), sort_keys=True)


def test_the_shipped_tasks_split_into_disjoint_pools_of_the_documented_sizes():
    pools = split_pools("rlgym/Code-v0", seeds=range(3000))
    assert_disjoint(pools)  # no prompt, no content key in two splits
    envs = {s: rlgym_llm.make("rlgym/Code-v0", split=s).unwrapped for s in SPLITS}
    assert {s: len(env.tasks) for s, env in envs.items()} == SHIPPED_SIZES
    ids = {s: {t.id for t in env.tasks} for s, env in envs.items()}
    assert set().union(*ids.values()) == {spec.id for spec in load_specs("builtin")}  # every task in one pool
    for split, env in envs.items():
        assert len(pools[split].prompts) == len(env.tasks)  # 3,000 draws reach the whole pool, and only it
        assert all(env.split_of_task[t] == split for t in ids[split])
    for other in ("val", "test"):
        hidden = {s: {hidden_of(t) for t in envs[s].tasks} for s in ("train", other)}
        statements = {s: {t.key for t in envs[s].tasks} for s in ("train", other)}
        assert not hidden["train"] & hidden[other] and not statements["train"] & statements[other]
        assert not pools["train"].answers & pools[other].answers  # nor a reference solution
    assert not {hidden_of(t) for t in envs["val"].tasks} & {hidden_of(t) for t in envs["test"].tasks}


def test_a_task_s_key_is_its_statement_and_filters_never_move_a_task():
    env = rlgym_llm.make("rlgym/Code-v0", split="val").unwrapped
    for spec, task in zip(env.specs, env.tasks, strict=True):
        assert task.key == " ".join(spec.prompt.split()) and split_of(task.key) == "val"
    for difficulty in (1, 2, 3):
        for kinds in ("function", "stdio"):
            for split in SPLITS:
                try:
                    sub = rlgym_llm.make("rlgym/Code-v0", split=split, difficulty=difficulty, kinds=kinds).unwrapped
                except ConfigError as e:  # a level and kind with no task in that split: said so
                    assert f"in split {split!r}" in str(e)
                    continue
                assert {t.id for t in sub.tasks} <= {i for i, s in env.split_of_task.items() if s == split}


def test_same_seed_same_task_and_the_split_is_reported():
    for split in SPLITS:
        a, b = rlgym_llm.make("rlgym/Code-v0", split=split), rlgym_llm.make("rlgym/Code-v0", split=split)
        for seed in range(20):
            (opening_a, info_a), (opening_b, _) = a.reset(seed=seed), b.reset(seed=seed)
            assert opening_a == opening_b and a.unwrapped.task.key == b.unwrapped.task.key
            assert info_a["split"] == split


def test_a_bad_split_is_a_config_error_at_make():
    for bad in ("validation", "dev", "", None, 1):
        with pytest.raises(ConfigError, match="split must be one of"):
            rlgym_llm.make("rlgym/Code-v0", split=bad)


def test_a_task_of_another_split_named_by_option_is_refused():
    train = rlgym_llm.make("rlgym/Code-v0", split="train")
    splits = train.unwrapped.split_of_task
    for task_id, split in splits.items():
        if split != "train":
            with pytest.raises(ValueError, match=f"'{split}' split, not of this env's 'train' split"):
                train.reset(options={"task_id": task_id})
    own = next(t for t, s in splits.items() if s == "test")
    test = rlgym_llm.make("rlgym/Code-v0", split="test")
    assert test.reset(options={"task_id": own})[1]["task_id"] == own
    with pytest.raises(ValueError, match=r"\[0, 10\) \(the 'test' split's tasks\)"):
        test.reset(options={"task_index": 10})  # task_index counts within the pool


def _task(i, statement=None, tests=None, split=None):
    row = {
        "id": f"t{i}",
        "kind": "function",
        "entry_point": "f",
        "prompt": statement or f"Return {i} plus x.",
        "examples": [{"args": [0], "expected": i}],
        "tests": tests or [{"args": [1], "expected": i + 1}, {"args": [i], "expected": 2 * i}],
        "solution": f"def f(x):\n    return x + {i}\n",
    }
    return {**row, "split": split} if split else row


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_user_task_file_is_split_by_content(tmp_path):
    rows = [_task(i) for i in range(60)]
    # the same statement under another id, and the same hidden tests under another statement
    rows.append(_task(100, statement="Return 7 plus x."))
    rows.append(_task(101, statement="Add 9 to x.", tests=_task(9)["tests"]))
    path = _write(tmp_path / "mine.jsonl", rows)
    pools = split_pools("rlgym/Code-v0", seeds=range(2000), tasks=path)
    assert_disjoint(pools)
    envs = {s: rlgym_llm.make("rlgym/Code-v0", tasks=path, split=s).unwrapped for s in SPLITS}
    ids = {s: {t.id for t in env.tasks} for s, env in envs.items()}
    assert all(len(ids[s]) >= 6 for s in SPLITS) and sum(map(len, ids.values())) == len(rows)
    split_of_task = envs["train"].split_of_task
    assert split_of_task["t100"] == split_of_task["t7"] and split_of_task["t101"] == split_of_task["t9"]
    for s in SPLITS:
        assert {hidden_of(t) for t in envs[s].tasks}.isdisjoint(
            hidden_of(t) for o in SPLITS if o != s for t in envs[o].tasks
        )


def test_a_user_task_file_s_own_split_field_is_kept(tmp_path):
    rows = [_task(i, split=SPLITS[i % 3]) for i in range(12)]
    path = _write(tmp_path / "own.jsonl", rows)
    for k, split in enumerate(SPLITS):
        env = rlgym_llm.make("rlgym/Code-v0", tasks=path, split=split).unwrapped
        assert [t.id for t in env.tasks] == [f"t{i}" for i in range(k, 12, 3)]
    mixed = _write(tmp_path / "mixed.jsonl", [*rows[:3], _task(50)])
    with pytest.raises(TaskFileError, match="some lines carry `split` and 1 do not"):
        rlgym_llm.make("rlgym/Code-v0", tasks=mixed)
    torn = _write(
        tmp_path / "torn.jsonl", [_task(1, split="train"), _task(2, statement="Return 1 plus x.", split="test")]
    )
    with pytest.raises(TaskFileError, match=r"\['t1', 't2'\] share a statement or hidden tests"):
        rlgym_llm.make("rlgym/Code-v0", tasks=torn)
    bad = _write(tmp_path / "bad.jsonl", [_task(1, split="validation")])
    with pytest.raises(TaskFileError, match=r"bad\.jsonl:1: .*split"):
        rlgym_llm.make("rlgym/Code-v0", tasks=bad)


def test_a_file_with_no_task_in_the_split_says_so(tmp_path):
    path = _write(tmp_path / "one.jsonl", [_task(3)])
    (split,) = {s for s, _ in task_splits(load_specs(path))}
    assert rlgym_llm.make("rlgym/Code-v0", tasks=path, split=split).unwrapped.tasks
    other = next(s for s in SPLITS if s != split)
    with pytest.raises(ConfigError, match=f"in split '{other}' \\(0 of its 1 tasks are in that split\\)"):
        rlgym_llm.make("rlgym/Code-v0", tasks=path, split=other)


def test_the_oracle_solves_a_task_of_every_split():
    from rlgym_agents.code import CodeOracleAgent

    for split in SPLITS:
        env = rlgym_llm.make("rlgym/Code-v0", split=split)
        try:
            agent = CodeOracleAgent(env, run_examples_first=False)
            messages, info = env.reset(seed=0)
            agent.reset(messages, info)
            _, reward, terminated, _, info = env.step(agent.act(messages, info))
            assert terminated and reward == 1.0, (split, info.get("test_results"))
        finally:
            env.close()
