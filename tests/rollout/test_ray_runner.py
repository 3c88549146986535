"""The Ray runner: the manager's episodes with envs in actors and several policy servers.

Needs ray (`-m ray`). One local Ray instance (2 CPUs) serves the whole session.
"""

import os
import sys

import pytest

import rlgym_llm
from rlgym_llm.core.types import FailureKind
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager, TaskRef
from rlgym_llm.rollout.policy import SamplingParams
from rlgym_llm.testing import GuessNumberEnv
from rlgym_llm.testing.policies import ScriptedPolicy
from rlgym_llm.testing.toy import bisect_completion

pytestmark = pytest.mark.ray

GUESS_ID = "test/RayGuess-v0"
FLAKY_ID = "test/RayFlaky-v0"
CRASH_ID = "test/RayCrash-v0"
CRASH_NUMBER = 777


class BoxDown(RuntimeError):
    failure_kind = "sandbox"


class FlakyEnv(GuessNumberEnv):
    """Fails on its second step for some numbers: an env bug, or a sandbox failure the env wraps."""

    def respond(self, turn):
        n = int(self.task.answer)
        if self.turn == 2 and n % 3 == 0:
            raise ValueError(f"env bug on {n}")
        if self.turn == 2 and n % 3 == 1:
            try:
                raise BoxDown("sandbox is gone")
            except BoxDown as e:
                raise RuntimeError("could not run the tool") from e
        return super().respond(turn)


class CrashEnv(GuessNumberEnv):
    """Kills its whole process (the env worker) on one number."""

    def respond(self, turn):
        if int(self.task.answer) == CRASH_NUMBER:
            os._exit(1)
        return super().respond(turn)


@pytest.fixture(scope="session")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    # The workers cannot import this test module: ship its env classes by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rlgym_llm.register(GUESS_ID, "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
    rlgym_llm.register(FLAKY_ID, FlakyEnv, max_turns=10)
    rlgym_llm.register(CRASH_ID, CrashEnv, max_turns=10)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def agent(tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    return ToolCallingAgent(tiny_tokenizer)


def config(**kw):
    base = {"group_size": 2, "max_turns": 8, "sampling": SamplingParams(max_tokens=64), "token_check": "strict"}
    return RolloutConfig(**{**base, **kw})


def servers(tokenizer, n, tagged=False):
    return [
        ScriptedPolicy(tokenizer, lambda p, i=i: bisect_completion(p, f"s{i} " if tagged else "")) for i in range(n)
    ]


def comparable(trajectories):
    out = []
    for t in trajectories:
        d = t.to_dict()
        for turn in d["turns"]:
            turn.pop("timings")
        out.append(d)
    return out


def local_run(env_id, agent, tokenizer, tasks, cfg):
    return RolloutManager(env_id, agent, ScriptedPolicy(tokenizer, bisect_completion), cfg).run_sync(tasks)


def test_same_trajectories_as_the_local_manager(ray_session, agent, tiny_tokenizer):
    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    tasks = [*range(6), TaskRef(seed=99, options={"number": 500})]
    cfg = config()
    policies = servers(tiny_tokenizer, 3)
    with RayRolloutRunner(GUESS_ID, agent, policies, cfg, num_env_workers=2) as runner:
        remote = runner.run_sync(tasks)
        placement = runner.placement
    local = local_run(GUESS_ID, agent, tiny_tokenizer, tasks, cfg)

    assert comparable(remote) == comparable(local)
    assert len(remote) == 14 and not any(t.failures for t in remote)
    # Both endings occur: solved (env outcome in the last step) and cut off by max_turns (outcome fetched remotely).
    endings = {(t.reward, t.metadata.get("truncated_by")) for t in remote}
    assert endings == {(1.0, None), (0.0, "max_turns")}
    assert runner.stats.episodes == 14 and runner.stats.turns == sum(len(t.turns) for t in remote)
    assert all(p.calls > 0 for p in policies) and sum(p.calls for p in policies) == runner.stats.turns
    assert sorted(placement["server_episodes"]) == [4, 5, 5]
    assert sorted(placement["worker_episodes"]) == [7, 7]


def test_each_episode_sticks_to_one_server(ray_session, agent, tiny_tokenizer):
    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    with RayRolloutRunner(GUESS_ID, agent, servers(tiny_tokenizer, 3, tagged=True), config(), num_env_workers=2) as r:
        trajectories = r.run_sync(range(6))
    tags = [{turn.action.content for turn in t.turns} for t in trajectories]
    assert all(len(t) == 1 for t in tags)  # one server per episode
    assert set.union(*tags) == {"s0", "s1", "s2"}  # and every server got episodes


def test_env_errors_inside_actors_are_classified_and_recorded(ray_session, agent, tiny_tokenizer):
    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    tasks = [TaskRef(seed=i, options={"number": n}) for i, n in enumerate((300, 301, 302, 600, 601, 602))]
    cfg = config(group_size=1)
    with RayRolloutRunner(FLAKY_ID, agent, servers(tiny_tokenizer, 2), cfg, num_env_workers=2) as runner:
        remote = runner.run_sync(tasks)
    assert len(remote) == len(tasks)
    kinds = [[(f.kind, f.error_type, f.message, f.turn) for f in t.failures] for t in remote]
    env_bug = lambda n: [(FailureKind.ENV, "ValueError", f"env bug on {n}", 1)]  # noqa: E731
    box = [(FailureKind.SANDBOX, "RuntimeError", "could not run the tool", 1)]
    assert kinds == [env_bug(300), box, [], env_bug(600), box, []]
    assert runner.stats.failures == {FailureKind.ENV: 2, FailureKind.SANDBOX: 2}
    # The same records as a local run: the cause chain was classified inside the actor.
    assert comparable(remote) == comparable(local_run(FLAKY_ID, agent, tiny_tokenizer, tasks, cfg))


def test_a_dying_worker_fails_its_episode_and_is_restarted(ray_session, agent, tiny_tokenizer):
    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    numbers = (500, CRASH_NUMBER, 250, 750, 125, 875)
    tasks = [TaskRef(seed=i, options={"number": n}) for i, n in enumerate(numbers)]
    # One episode at a time: only the crashing episode's env is on the worker when it dies.
    cfg = config(group_size=1, max_turns=10, concurrency=1)
    with RayRolloutRunner(CRASH_ID, agent, servers(tiny_tokenizer, 2), cfg, num_env_workers=2) as runner:
        trajectories = runner.run_sync(tasks)
        placement = runner.placement
    assert len(trajectories) == len(tasks)
    crashed = trajectories[1]
    assert len(crashed.failures) == 1 and crashed.failures[0].kind is FailureKind.ENV
    assert crashed.failures[0].error_type.startswith("Actor"), crashed.failures[0]
    others = [t for i, t in enumerate(trajectories) if i != 1]
    assert all(not t.failures and t.reward == 1.0 for t in others)
    assert placement["worker_episodes"] == [3, 3]  # the restarted worker took episodes after the crash


def test_unknown_env_fails_in_the_driver_and_missing_ray_says_what_to_install(agent, tiny_tokenizer, monkeypatch):
    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    with pytest.raises(rlgym_llm.UnknownEnvError):
        RayRolloutRunner("test/NoSuchEnv-v0", agent, servers(tiny_tokenizer, 1))
    runner = RayRolloutRunner(lambda: GuessNumberEnv(), agent, servers(tiny_tokenizer, 1))
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(rlgym_llm.MissingDependencyError, match=r"rlgym-llm\[ray\]"):
        runner.start()
