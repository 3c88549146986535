"""The Code oracle earns 1.0 on every shipped task; an agent that does nothing earns 0."""

import pytest

import rlgym_llm
from rlgym_agents.code import CodeOracleAgent, IdleAgent
from rlgym_llm.core.splits import SPLITS


def run_episode(env, agent, **reset_kwargs):
    messages, info = env.reset(**reset_kwargs)
    agent.reset(messages, info)
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
        if terminated or truncated:
            return reward, info


@pytest.fixture(scope="module")
def env():
    env = rlgym_llm.make("rlgym/Code-v0", split="test")  # two-sum's split
    yield env
    env.close()


def test_oracle_runs_examples_then_submits(env):
    agent = CodeOracleAgent(env)
    messages, info = env.reset(seed=0, options={"task_id": "two-sum"})
    agent.reset(messages, info)
    first = agent.act(messages, info)
    assert [c.name for c in first.tool_calls] == ["run_examples"]
    messages, reward, terminated, _, info = env.step(first)
    assert not terminated and "0 failed" in messages[0]["content"]
    assert info["signals"]["examples"]["vector"] == [True, True]
    second = agent.act(messages, info)
    assert [c.name for c in second.tool_calls] == ["submit"]
    _, reward, terminated, _, info = env.step(second)
    assert terminated and reward == 1.0 and info["outcome"]["components"]["pass_rate"] == 1.0


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_oracle_solves_a_task_of_each_kind_and_level(difficulty):
    env = rlgym_llm.make("rlgym/Code-v0", difficulty=difficulty)
    try:
        for kind in ("function", "stdio"):
            index = next(i for i, t in enumerate(env.unwrapped.tasks) if t.meta["kind"] == kind)
            reward, info = run_episode(
                env, CodeOracleAgent(env, run_examples_first=False), options={"task_index": index}
            )
            assert reward == 1.0, info["test_results"]
    finally:
        env.close()


@pytest.mark.slow
def test_oracle_solves_every_shipped_task():
    failed, solved = {}, 0
    for split in SPLITS:
        env = rlgym_llm.make("rlgym/Code-v0", split=split)
        try:
            agent = CodeOracleAgent(env)
            for i, task in enumerate(env.unwrapped.tasks):
                reward, info = run_episode(env, agent, seed=i, options={"task_index": i})
                if reward != 1.0:
                    failed[task.id] = [r for r in info["test_results"] if not r["passed"]]
                solved += 1
        finally:
            env.close()
    assert solved >= 40
    assert failed == {}


def test_idle_agent_earns_nothing(env):
    for seed in range(4):
        reward, info = run_episode(env, IdleAgent(), seed=seed)
        assert reward == 0.0
        assert info["truncated_by"] == "turn_limit"
        assert info["outcome"]["reward"] == 0.0 and info["outcome"]["tests"]["passed"] == 0
