"""The manager keeps envs between episodes: fewer envs made, the same trajectories, broken envs dropped."""

import pytest

from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm.core.registry import make
from rlgym_llm.recipes.parts import oracle_factory
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.testing.policies import ScriptedPolicy
from rlgym_llm.testing.toy import CounterEnv, GuessNumberEnv, bisect_completion


class CountingFactory:
    """Makes envs with `make_env` and counts how many were made and closed."""

    def __init__(self, make_env=GuessNumberEnv):
        self.make_env = make_env
        self.made = self.closed = 0

    def __call__(self):
        self.made += 1
        env = self.make_env()
        close = env.close

        def counted_close():
            self.closed += 1
            close()

        env.close = counted_close
        return env


class BrokenOnSeed3(GuessNumberEnv):
    def respond(self, turn):
        if self.task_seed == 3:
            raise RuntimeError("env bug on purpose")
        return super().respond(turn)

    def reset(self, *, seed=None, options=None):
        self.task_seed = seed
        return super().reset(seed=seed, options=options)


def _policy(tokenizer):
    return ScriptedPolicy(tokenizer, lambda prompt: bisect_completion(prompt, prefix="Guessing. "))


def _comparable(trajs):
    return [t.to_dict() for t in trajs]


def test_envs_are_reset_not_remade_and_trajectories_are_unchanged(tiny_tokenizer):
    agent = ToolCallingAgent(tiny_tokenizer)
    outs = {}
    for reuse in (True, False):
        factory = CountingFactory()
        config = RolloutConfig(group_size=2, max_turns=12, concurrency=2, reuse_envs=reuse)
        with RolloutManager(factory, agent, _policy(tiny_tokenizer), config) as manager:
            first = manager.run_sync(list(range(6)))
            second = manager.run_sync(list(range(6, 10)))
            made_during_runs = factory.made
        outs[reuse] = _comparable(first + second)
        assert factory.closed == factory.made  # every env is closed: after its episode, or by close()
        if reuse:
            assert made_during_runs == 2  # 20 episodes, 2 at a time, the envs kept across runs
        else:
            assert made_during_runs == 20
    assert outs[True] == outs[False]
    assert all(t["outcome"]["reward"] == 1.0 for t in outs[True])


def test_an_env_that_raised_is_closed_and_not_reused(tiny_tokenizer):
    agent = ToolCallingAgent(tiny_tokenizer)
    factory = CountingFactory(BrokenOnSeed3)
    config = RolloutConfig(max_turns=12, concurrency=1)
    with RolloutManager(factory, agent, _policy(tiny_tokenizer), config) as manager:
        trajs = manager.run_sync(list(range(6)))
        assert factory.made == 2  # the env of seed 3 was dropped; seeds 4 and 5 got a new one
        assert factory.closed == 1
    assert [t.failed for t in trajs] == [False, False, False, True, False, False]
    assert factory.closed == 2


SHIPPED = [
    (CounterEnv, "rlgym_llm.testing.toy:CounterPlayer", {"max_target": 5}),
    ("rlgym/Math-v0", "rlgym_agents.math:MathOracleAgent", {}),
    ("rlgym/Search-v0", "rlgym_agents.search:SearchOracle", {}),
    ("rlgym/GUI-v0", "rlgym_agents.gui:GUIPlannerAgent", {}),
    # its sandbox is kept with the env; ~8 s of sandboxed runs
    pytest.param("rlgym/Code-v0", "rlgym_agents.code:CodeOracleAgent", {}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("env_id", "oracle", "kwargs"), SHIPPED, ids=["counter", "math", "search", "gui", "code"])
def test_shipped_envs_give_the_same_episodes_when_reused(tiny_tokenizer, env_id, oracle, kwargs):
    """A noisy oracle (idle turns, failures) on 8 tasks, one env at a time: reuse changes nothing."""
    from rlgym_llm.train.sft import OraclePolicy

    agent = ToolCallingAgent(tiny_tokenizer)
    outs = {}
    for reuse in (True, False):
        factory = CountingFactory(lambda: env_id(**kwargs) if callable(env_id) else make(env_id, **kwargs))
        policy = OraclePolicy(tiny_tokenizer, oracle_factory(oracle), idle_prob=0.3)
        config = RolloutConfig(max_turns=16, concurrency=1, max_context=10**9, token_check="off", reuse_envs=reuse)
        with RolloutManager(factory, agent, policy, config) as manager:
            outs[reuse] = _comparable(manager.run_sync(list(range(8))))
        assert factory.made == (1 if reuse else 8)
    assert outs[True] == outs[False]
    rewards = [t["outcome"]["reward"] for t in outs[True]]
    assert max(rewards) > 0  # the oracle solves some tasks and the idle turns make it fail others
