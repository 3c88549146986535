"""The rollout manager with scripted policies (real tokenizer, real envs, real token bookkeeping)."""

import asyncio
import threading
import time

import gymnasium
import pytest

import rlgym_llm
from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm import FailureKind
from rlgym_llm.rollout.errors import ContextOverflowError, EngineError
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager, TaskRef
from rlgym_llm.rollout.policy import SamplingParams
from rlgym_llm.rollout.store import TrajectoryWriter, read_trajectories
from rlgym_llm.testing.policies import FaultyPolicy, ScriptedPolicy
from rlgym_llm.testing.toy import GuessNumberEnv, bisect_completion

GUESS = "test/RolloutGuess-v0"


def bisect(prompt: str) -> str:
    """The optimal guesser, reading only the prompt text (as a model would), with text before its call."""
    return bisect_completion(prompt, prefix="Guessing. ")


class BrokenEnv(GuessNumberEnv):
    """Raises on its second step: an env bug, which must be recorded, not raised."""

    def respond(self, turn):
        if self.turn == 2:
            raise RuntimeError("env bug on purpose")
        return super().respond(turn)


class SlowEnv(GuessNumberEnv):
    """Records how many steps run at once, to show that episodes overlap."""

    lock = threading.Lock()
    active = 0
    peak = 0

    def respond(self, turn):
        with SlowEnv.lock:
            SlowEnv.active += 1
            SlowEnv.peak = max(SlowEnv.peak, SlowEnv.active)
        time.sleep(0.02)
        with SlowEnv.lock:
            SlowEnv.active -= 1
        return super().respond(turn)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    rlgym_llm.register(GUESS, GuessNumberEnv, max_turns=12)
    yield
    gymnasium.registry.pop(GUESS, None)


@pytest.fixture
def agent(tiny_tokenizer):
    return ToolCallingAgent(tiny_tokenizer)


def manager(agent, policy, env=GUESS, **cfg):
    cfg.setdefault("max_turns", 12)
    cfg.setdefault("retry_backoff_s", 0.0)
    return RolloutManager(env, agent, policy, RolloutConfig(**cfg))


def test_groups_start_identically_and_the_scripted_optimum_solves_every_task(agent, tiny_tokenizer, tmp_path):
    policy = ScriptedPolicy(tiny_tokenizer, bisect)
    with TrajectoryWriter(tmp_path / "t.jsonl") as writer:
        m = RolloutManager(
            GUESS, agent, policy, RolloutConfig(group_size=3, max_turns=12, token_check="strict"), writer=writer
        )
        trajs = m.run_sync([TaskRef(seed=s) for s in range(6)])
    assert len(trajs) == 18 and not any(t.failed for t in trajs)
    assert all(t.reward == 1.0 and t.turns[-1].terminated for t in trajs)
    for g in range(6):
        group = trajs[3 * g : 3 * g + 3]
        assert len({t.task_id for t in group}) == 1 and all(
            t.prompt_token_ids == group[0].prompt_token_ids for t in group
        )
        assert [t.sample_index for t in group] == [0, 1, 2]
    assert len({t.task_id for t in trajs}) == 6
    assert all(t.metadata["token_check"]["drift"] is False for t in trajs)
    # every turn's completion sits in the context where the loss mask says it does
    for t in trajs:
        for (start, end), turn in zip(t.turn_spans, t.turns):
            assert t.token_ids[start:end] == list(turn.completion_token_ids)
            assert all(t.loss_mask[start:end]) and sum(t.loss_mask) == sum(len(x.completion_token_ids) for x in t.turns)
    back = list(read_trajectories(tmp_path / "t.jsonl"))
    assert sorted((t.group_id, t.sample_index) for t in back) == sorted((t.group_id, t.sample_index) for t in trajs)
    assert {(t.group_id, t.sample_index): t.token_ids for t in back} == {
        (t.group_id, t.sample_index): t.token_ids for t in trajs
    }
    stats = m.stats.to_dict()
    assert stats["episodes"] == 18 and stats["turns"] == sum(len(t.turns) for t in trajs) and stats["tokens_per_s"] > 0


def test_turn_limit_and_context_limit_truncate_with_an_outcome(agent, tiny_tokenizer):
    stubborn = ScriptedPolicy(
        tiny_tokenizer, lambda _: '<tool_call>{"name": "guess", "arguments": {"value": 1}}</tool_call>'
    )
    (short,) = manager(agent, stubborn, max_turns=3).run_sync([0])
    assert len(short.turns) == 3 and short.metadata["truncated_by"] == "max_turns" and short.outcome["reward"] == 0.0
    (tight,) = manager(agent, stubborn, max_context=200).run_sync([0])
    assert tight.metadata["truncated_by"] == "context" and len(tight.token_ids) >= 200 and not tight.failed


def test_transient_engine_errors_are_retried(agent, tiny_tokenizer):
    policy = FaultyPolicy(
        ScriptedPolicy(tiny_tokenizer, bisect), {0: EngineError("503"), 1: ConnectionResetError("reset")}
    )
    (traj,) = manager(agent, policy, retries=2).run_sync([0])
    assert not traj.failed and traj.reward == 1.0


def test_every_failure_is_classified_and_no_trajectory_is_lost(agent, tiny_tokenizer):
    faults = {
        0: EngineError("boom"),  # episode of call 0 fails for good: retries=0
        3: ContextOverflowError("prompt too long"),
        5: "hang",  # a call that never returns: the call timeout fires
        7: ValueError("a bug in the backend"),  # not transient: no retry, an engine failure
    }
    policy = FaultyPolicy(ScriptedPolicy(tiny_tokenizer, bisect), faults)
    m = manager(agent, policy, retries=0, call_timeout_s=0.5, concurrency=1)
    trajs = m.run_sync(list(range(8)))
    assert len(trajs) == 8  # count in = count out
    kinds = sorted(f.kind.value for t in trajs for f in t.failures)
    assert kinds == ["engine", "engine", "engine", "policy"]
    failed = [t for t in trajs if t.failed]
    assert all(
        f.error_type in {"EngineError", "ContextOverflowError", "TimeoutError", "ValueError"}
        for t in failed
        for f in t.failures
    )
    assert m.stats.failures[FailureKind.ENGINE] == 3 and m.stats.failures[FailureKind.POLICY] == 1
    assert policy.calls == sum(len(t.turns) for t in trajs) + 4  # failed calls were not retried
    assert sum(not t.failed and t.reward == 1.0 for t in trajs) == 4
    (timeout,) = [f for t in trajs for f in t.failures if f.error_type == "TimeoutError"]
    assert "longer than call_timeout_s=0.5s (attempt 1 of 1)" in timeout.message  # names the limit to raise


def test_an_env_that_raises_mid_episode_is_an_env_failure(agent, tiny_tokenizer):
    m = manager(agent, ScriptedPolicy(tiny_tokenizer, bisect), env=lambda: BrokenEnv())
    trajs = m.run_sync([0, 1, 2])
    assert len(trajs) == 3
    for t in trajs:
        (failure,) = t.failures
        assert failure.kind is FailureKind.ENV and failure.error_type == "RuntimeError" and failure.turn == 1
        assert len(t.turns) == 1  # the turn before the crash is kept


def test_episode_timeout_is_recorded(agent, tiny_tokenizer):
    slow = ScriptedPolicy(tiny_tokenizer, bisect, delay_s=0.2)
    (traj,) = manager(agent, slow, episode_timeout_s=0.5).run_sync([0])
    (failure,) = traj.failures
    assert failure.error_type == "EpisodeTimeout" and failure.kind is FailureKind.ENGINE


def test_concurrency_is_bounded_and_env_steps_overlap(agent, tiny_tokenizer):
    inflight, peak = [0], [0]

    class Counting(ScriptedPolicy):
        async def generate(self, ids, sampling):
            inflight[0] += 1
            peak[0] = max(peak[0], inflight[0])
            await asyncio.sleep(0.01)
            try:
                return await super().generate(ids, sampling)
            finally:
                inflight[0] -= 1

    SlowEnv.peak = 0
    m = manager(agent, Counting(tiny_tokenizer, bisect), env=lambda: SlowEnv(), concurrency=4, max_turns=3)
    trajs = m.run_sync(list(range(12)))
    assert len(trajs) == 12 and not any(t.failed for t in trajs)
    assert peak[0] == 4  # never more than `concurrency` episodes at once
    assert SlowEnv.peak >= 2  # env steps of different episodes ran at the same time (in threads)


def test_sampling_budget_shrinks_to_the_context_left(agent, tiny_tokenizer):
    seen = []

    class Recording(ScriptedPolicy):
        async def generate(self, ids, sampling):
            seen.append((len(ids), sampling.max_tokens))
            return await super().generate(ids, sampling)

    m = manager(agent, Recording(tiny_tokenizer, bisect), max_context=400, sampling=SamplingParams(max_tokens=256))
    m.run_sync([0])
    assert all(n + k <= 400 for n, k in seen) and any(k < 256 for _, k in seen)


def test_progress_bar_counts_episodes_and_failures(agent, tiny_tokenizer):
    import io

    from rlgym_llm.rollout.progress import ProgressReporter, RolloutProgress

    policy = FaultyPolicy(ScriptedPolicy(tiny_tokenizer, bisect), {0: ValueError("x")})
    log = io.StringIO()  # not a terminal: plain lines, at the start, every interval and at the end
    with RolloutProgress(total=4, reporter=ProgressReporter(stream=log, interval_s=0.0)) as bar:
        trajs = RolloutManager(
            GUESS, agent, policy, RolloutConfig(max_turns=12, concurrency=1), on_episode=bar
        ).run_sync(range(4))
    assert bar.done == 4 and bar.failures == 1
    assert bar.reward == sum(t.reward for t in trajs) == 3.0
    lines = log.getvalue().splitlines()
    assert lines[0] == "rollout: started (4)" and lines[-1].startswith("rollout: 4/4 (100%)  reward 0.75  failures 1")
    assert lines[-1].endswith(" done") and len(lines) >= 4  # periodic lines while it ran, not only at the end
