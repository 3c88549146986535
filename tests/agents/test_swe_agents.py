"""Scripted agents on `rlgym/SWE-v0`: the oracle resolves every instance, idling and test editing earn 0."""

import pytest

import rlgym_llm
from rlgym_agents.swe import IdleAgent, RandomEditAgent, SWEOracleAgent, TestEditingAgent, _function_source
from rlgym_envs.swe.instances import builtin_instances
from rlgym_envs.swe.splits import instance_splits
from rlgym_envs.swe.swebench import export_jsonl
from rlgym_llm.core.splits import SPLITS
from rlgym_llm.core.types import signal_problems

ALL_IDS = [i.id for i in builtin_instances()]
ONE_PER_REPO = sorted({i.repo: i.id for i in builtin_instances()}.values())
# Each instance's content split: an env draws from (and takes options naming) its own split only.
SPLIT = {i.id: split for i, (split, _) in zip(builtin_instances(), instance_splits(builtin_instances()))}


def play(env, agent, **reset_kwargs):
    """Run one episode; returns the final reward, the last info and every step's info."""
    messages, info = env.reset(**reset_kwargs)
    agent.reset(messages, info)
    infos = []
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
        infos.append(info)
        if terminated or truncated:
            return reward, info, infos


@pytest.fixture(scope="module")
def envs():
    """One toy env per split; `envs[SPLIT[instance_id]]` is the env of an instance."""
    envs = {split: rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=split) for split in SPLITS}
    yield envs
    for env in envs.values():
        env.close()


def _check_oracle(envs, instance_id):
    env = envs[SPLIT[instance_id]]
    reward, info, infos = play(env, SWEOracleAgent(env), options={"instance_id": instance_id})
    assert reward == 1.0, info["outcome"]
    assert info["outcome"]["components"]["resolved"] == 1.0 and info["outcome"]["components"]["tool_ok"] == 1.0
    assert [i["signals"]["tool_ok"] for i in infos] == [True] * 4  # read, edit, run tests, submit
    assert [i["signals"]["progress"] for i in infos] == [0.0, 1.0, 1.0, 1.0]
    assert infos[1]["signals"]["reward_components"]["files_modified"] >= 1.0
    assert all(not signal_problems(i["signals"]) for i in infos)


@pytest.mark.parametrize("instance_id", ONE_PER_REPO)
def test_oracle_resolves_one_instance_per_repo(envs, instance_id):
    _check_oracle(envs, instance_id)


@pytest.mark.slow
def test_oracle_resolves_every_shipped_instance(envs):
    for instance_id in ALL_IDS:
        _check_oracle(envs, instance_id)


def test_idle_agent_gets_zero_and_is_truncated():
    for instance_id in ONE_PER_REPO:
        env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", max_turns=5, split=SPLIT[instance_id])
        try:
            reward, info, infos = play(env, IdleAgent(), options={"instance_id": instance_id})
            assert len(infos) == 5 and info["truncated_by"] == "turn_limit"
            assert reward == 0.0 and info["outcome"]["reward"] == 0.0
            assert info["outcome"]["components"]["submitted"] == 0.0
        finally:
            env.close()


@pytest.mark.parametrize("mode", ["rewrite", "delete"])
def test_editing_the_tests_earns_nothing_on_any_instance(envs, mode):
    for instance_id in ALL_IDS:
        env = envs[SPLIT[instance_id]]
        reward, info, infos = play(env, TestEditingAgent(env, mode), options={"instance_id": instance_id})
        assert infos[0]["signals"]["tool_ok"] is True, instance_id  # the hack itself went through
        assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 0.0, instance_id


def test_agents_on_instances_loaded_from_swebench_style_jsonl(tmp_path):
    path = export_jsonl([i for i in builtin_instances() if i.id in ONE_PER_REPO[:2]], tmp_path)
    (split,) = {SPLIT[i] for i in ONE_PER_REPO[:2]}  # an exported instance keeps its content split
    env = rlgym_llm.make("rlgym/SWE-v0", dataset=str(path), max_turns=4, split=split)
    try:
        for instance_id in ONE_PER_REPO[:2]:
            assert play(env, SWEOracleAgent(env), options={"instance_id": instance_id})[0] == 1.0
            assert play(env, IdleAgent(), options={"instance_id": instance_id})[1]["outcome"]["reward"] == 0.0
    finally:
        env.close()


def test_oracle_when_the_failing_tests_are_hidden():
    env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", hide_tests=True)
    try:
        env.reset(options={"instance_id": "pqueue-2"})
        report = env.step({"role": "assistant", "tool_calls": [{"name": "run_tests", "arguments": {}}]})[0]
        assert "failed" not in report[0]["content"]  # the buggy tree passes every test the agent can see
        assert "test_remove_keeps_the_heap_order" not in report[0]["content"]
        reward, info, _ = play(env, SWEOracleAgent(env), options={"instance_id": "pqueue-2"})
        assert reward == 1.0 and info["signals"]["tests"]["vector"][0] is True
        reward, info, _ = play(env, TestEditingAgent(env), options={"instance_id": "pqueue-2"})
        assert reward == 0.0
    finally:
        env.close()


def test_random_edits_earn_nothing(envs):
    for seed, instance_id in enumerate(ONE_PER_REPO):
        env = envs[SPLIT[instance_id]]
        reward, info, infos = play(env, RandomEditAgent(env, seed=seed), options={"instance_id": instance_id})
        assert infos[0]["signals"]["tool_ok"] is True and info["outcome"]["components"]["modified"] == 1.0
        assert reward == 0.0 and info["signals"]["outcome_level"] == 2


def test_the_test_editor_finds_pytest_functions_and_methods():
    source = "import pytest\n\n\n@pytest.mark.x\ndef test_a(tmp_path):\n    x = 1\n\n    assert x == 2\n\n\nclass T:\n    def test_b(self):\n        assert 0\n"
    assert _function_source(source, "test_a") == "def test_a(tmp_path):\n    x = 1\n\n    assert x == 2\n"
    assert _function_source(source, "test_b") == "    def test_b(self):\n        assert 0\n"
    assert _function_source(source, "test_c") is None
