"""The async multi-turn rollout manager.

Per episode: env messages -> agent renders token ids -> policy generates ids + logprobs -> agent parses
the text into an action -> env steps -> the env's reply is rendered and appended to the context.
Many episodes run concurrently (bounded). A failure never escapes a batch: it is classified
(policy / env / sandbox / engine), recorded on the trajectory, and the trajectory is returned, so the
number of trajectories out always equals the number of episodes in. A step whose `info` says the env
voided the grade (`info["voided"]`, `info["void_reason"]`: it caught forgery) marks the trajectory
`voided`, with the reason; the episode is no failure and keeps the reward the env paid.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import inspect
import logging
import time
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from rlgym_llm.core.env import Env
from rlgym_llm.core.registry import make
from rlgym_llm.core.types import AssistantTurn, Failure, FailureKind, Message, Messages, Trajectory, Turn
from rlgym_llm.rollout.errors import classify, is_transient
from rlgym_llm.rollout.policy import Completion, Episode, EpisodePolicy, Policy, SamplingParams
from rlgym_llm.rollout.store import TrajectoryWriter
from rlgym_llm.rollout.tokens import TokenDriftError, check_tokens

logger = logging.getLogger(__name__)

TASK_KEY, SPLIT_KEY = "task_key", "split"
"""`Trajectory.metadata` keys: a hash of the task's content key (`Task.content_key()`), which tells two
seeds that drew the same task apart from two seeds that drew different ones, and the env's split."""

TokenCheck = Literal["off", "warn", "strict"]
"""Compare an episode's incremental context with a fresh rendering: not at all, with a warning, or
failing the episode on drift."""


class Agent(Protocol):
    """What the manager needs from an agent (see `rlgym_agents.ToolCallingAgent`)."""

    def prepare(self, opening: Messages) -> Messages: ...
    def render_prompt(self, messages: Messages, tools: Sequence[dict] | None) -> list[int]: ...
    def render_continuation(
        self, history: Messages, new_messages: Messages, tools: Sequence[dict] | None, completion: Completion
    ) -> list[int]: ...
    def render_text(self, messages: Messages, tools: Sequence[dict] | None, generation_prompt: bool) -> str: ...
    def assistant_message(self, completion: Completion) -> Message: ...
    def parse(self, text: str) -> AssistantTurn: ...


@dataclass(frozen=True)
class RolloutConfig:
    """Limits and behaviour of a rollout batch.

    Args:
        group_size: G samples per task, all reset with the task's seed (identical openings).
        max_turns: assistant turns per episode (the env's own turn limit may end it sooner).
        max_context: the most tokens an episode's context may reach; past it the episode is truncated.
        concurrency: the most episodes in flight at once.
        call_timeout_s: limit for one generate call.
        episode_timeout_s: limit for a whole episode.
        retries: extra attempts for an infrastructure error of one generate call.
        retry_backoff_s: the first retry's delay; it doubles each time.
        token_check: compare the incremental context with a fresh rendering: off, warn, or strict
            (strict records a drift as a policy failure).
        env_in_thread: run env.reset/step in worker threads so slow envs (sandboxes) overlap with
            generation. Turn off for envs that must stay on the main thread.
        reuse_envs: keep the env of a finished episode and `reset` it for a later one instead of
            making a new env (Gymnasium's contract: `reset` starts afresh). An env that raised, or
            was cut off in the middle of a call, is closed instead. At most `concurrency` envs are
            kept; `RolloutManager.close` closes them.
    """

    group_size: int = 1
    max_turns: int = 8
    max_context: int = 2048
    sampling: SamplingParams = field(default_factory=SamplingParams)
    concurrency: int = 64
    call_timeout_s: float = 120.0
    episode_timeout_s: float = 600.0
    retries: int = 2
    retry_backoff_s: float = 0.5
    token_check: TokenCheck = "warn"
    env_in_thread: bool = True
    reuse_envs: bool = True

    def __post_init__(self) -> None:
        problems = [
            f"{name} must be >= 1, got {getattr(self, name)}"
            for name in ("group_size", "max_turns", "max_context", "concurrency")
            if getattr(self, name) < 1
        ]
        if self.token_check not in get_args(TokenCheck):
            problems.append(f"token_check must be off, warn or strict, got {self.token_check!r}")
        if problems:
            raise ValueError("; ".join(problems))


@dataclass(frozen=True)
class TaskRef:
    """Which task to roll out: the seed (and reset options) that select it."""

    seed: int
    options: dict[str, Any] | None = None


@dataclass
class RolloutStats:
    """Throughput and where the time went, for one `run`."""

    episodes: int = 0
    turns: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    generate_s: float = 0.0
    env_s: float = 0.0
    failures: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, float]:
        wall = max(self.wall_s, 1e-9)
        out = {
            "episodes": self.episodes,
            "turns": self.turns,
            "episodes_per_s": self.episodes / wall,
            "tokens_per_s": self.completion_tokens / wall,
            "generate_s": self.generate_s,
            "env_s": self.env_s,
            "wall_s": self.wall_s,
        }
        out.update({f"failures/{k.value}": float(self.failures.get(k, 0)) for k in FailureKind})
        return out


class _EpisodeFailed(Exception):
    def __init__(self, failure: Failure):
        self.failure = failure


class RolloutManager:
    """Run episodes of one env with one agent and one policy, concurrently.

    Args:
        env: a registered env id (a fresh `make(env, **env_kwargs)` per episode) or a zero-argument
            factory returning an env.
        agent: renders and parses (see `Agent`).
        policy: generates (see `Policy`); an `EpisodePolicy` (a scripted expert) is started for
            each episode after its reset.
        config: limits and behaviour.
        writer: optional JSONL sink; each finished trajectory is written as soon as it ends.
        on_episode: optional callback after each episode (e.g. a progress bar update).

    Envs are kept between episodes and between `run` calls (see `RolloutConfig.reuse_envs`); use the
    manager as a context manager, or call `close`, to close them (they are also closed when the
    manager is garbage-collected).
    """

    def __init__(
        self,
        env: str | Callable[[], Any],
        agent: Agent,
        policy: Policy | EpisodePolicy,
        config: RolloutConfig | None = None,
        env_kwargs: dict[str, Any] | None = None,
        writer: TrajectoryWriter | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
    ):
        self.env_id = env if isinstance(env, str) else getattr(env, "__name__", "custom")
        self._env_factory = (lambda: make(env, **(env_kwargs or {}))) if isinstance(env, str) else env
        self.agent, self.policy = agent, policy
        self.config = config or RolloutConfig()
        self.writer, self.on_episode = writer, on_episode
        self.stats = RolloutStats()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._idle_envs: list[Any] = []
        self._finalizer = weakref.finalize(self, _close_envs, self._idle_envs)

    def __enter__(self) -> RolloutManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the envs kept for reuse. The manager stays usable: later episodes make new envs."""
        _close_envs(self._idle_envs)

    def _acquire_env(self) -> Any:
        return self._idle_envs.pop() if self._idle_envs else self._env_factory()

    def _release_env(self, env: Any, reusable: bool) -> None:
        if reusable and self.config.reuse_envs and len(self._idle_envs) < self.config.concurrency:
            self._idle_envs.append(env)
        else:
            env.close()

    def run_sync(self, tasks: Sequence[TaskRef | int]) -> list[Trajectory]:
        """`run` from synchronous code."""
        return asyncio.run(self.run(tasks))

    async def run(self, tasks: Sequence[TaskRef | int]) -> list[Trajectory]:
        """Roll out `group_size` episodes per task; returns them grouped, in task order."""
        cfg = self.config
        refs = [t if isinstance(t, TaskRef) else TaskRef(seed=int(t)) for t in tasks]
        self.stats = RolloutStats()
        sem = asyncio.Semaphore(cfg.concurrency)
        start = time.perf_counter()

        async def bounded(ref: TaskRef, group: int, sample: int) -> Trajectory:
            async with sem:
                return await self._episode(ref, group, sample)

        jobs = [bounded(ref, g, i) for g, ref in enumerate(refs) for i in range(cfg.group_size)]
        try:
            trajectories = await asyncio.gather(*jobs)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
        self.stats.wall_s = time.perf_counter() - start
        return list(trajectories)

    async def _episode(self, ref: TaskRef, group: int, sample: int) -> Trajectory:
        traj = Trajectory(env_id=self.env_id, seed=ref.seed, task_id="", group_id=f"{group}", sample_index=sample)
        traj.metadata["options"] = ref.options
        phase: dict[str, Any] = {"name": "env", "turn": None}
        try:
            await asyncio.wait_for(self._play(traj, ref, phase), timeout=self.config.episode_timeout_s)
        except _EpisodeFailed as e:
            traj.failures.append(e.failure)
        except asyncio.TimeoutError:
            kind = FailureKind.ENGINE if phase["name"] == "generate" else FailureKind.ENV
            traj.failures.append(
                Failure(
                    kind,
                    "EpisodeTimeout",
                    f"episode exceeded {self.config.episode_timeout_s}s in {phase['name']}",
                    phase["turn"],
                )
            )
        except Exception as e:  # the batch must survive anything; the trajectory says what happened
            kind = classify(e, default=FailureKind.ENV if phase["name"] == "env" else FailureKind.POLICY)
            traj.failures.append(Failure(kind, type(e).__name__, str(e)[:2000], phase["turn"]))
        for f in traj.failures:
            self.stats.failures[f.kind] += 1
            logger.warning(
                "episode %s/%s failed (%s): %s: %s", group, sample, f.kind.value, f.error_type, f.message[:200]
            )
        if traj.voided:
            logger.info("episode %s/%s voided by the env: %s", group, sample, "; ".join(traj.void_reasons) or "-")
        self.stats.episodes += 1
        if self.writer is not None:
            self.writer.write(traj)
        if self.on_episode is not None:
            self.on_episode(traj)
        return traj

    async def _env_call(self, fn: Callable, *args: Any, phase: dict, turn: int | None) -> Any:
        phase["name"], phase["turn"] = "env", turn
        t0 = time.perf_counter()
        try:
            if self.config.env_in_thread:
                # A pool as wide as the concurrency: asyncio's default pool (cpu + 4 threads) would
                # serialise slow env steps (sandboxes) of more episodes than that.
                result = await asyncio.get_running_loop().run_in_executor(self._executor(), fn, *args)
            else:
                result = fn(*args)
            # A remote env (the Ray runner's proxy) answers with awaitables.
            return await result if inspect.isawaitable(result) else result
        except Exception as e:
            raise _EpisodeFailed(
                Failure(classify(e, default=FailureKind.ENV), type(e).__name__, str(e)[:2000], turn)
            ) from e
        finally:
            self.stats.env_s += time.perf_counter() - t0

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="rlgym-env")
        return self._pool

    async def _final_outcome(self, env: Any, phase: dict, turn: int | None) -> dict[str, Any]:
        """The outcome of an episode that ended without one in its last step (e.g. cut off by our limits)."""
        return await self._env_call(_outcome_of, env, phase=phase, turn=turn)

    async def _generate(self, policy: Policy, ids: list[int], turn: int, phase: dict) -> Completion:
        cfg = self.config
        phase["name"], phase["turn"] = "generate", turn
        budget = cfg.max_context - len(ids)
        sampling = cfg.sampling
        if budget < sampling.max_tokens:
            sampling = SamplingParams(**{**sampling.__dict__, "max_tokens": budget})
        last: Exception | None = None
        for attempt in range(cfg.retries + 1):
            t0 = time.perf_counter()
            try:
                return await asyncio.wait_for(policy.generate(ids, sampling), timeout=cfg.call_timeout_s)
            except Exception as e:
                last = e
                kind = classify(e, default=FailureKind.ENGINE)
                if kind is not FailureKind.ENGINE or not is_transient(e) or attempt == cfg.retries:
                    message = str(e)[:2000] or repr(e)
                    timed_out = time.perf_counter() - t0 >= cfg.call_timeout_s
                    if isinstance(e, TimeoutError) and not str(e) and timed_out:  # wait_for's: name the limit
                        message = (
                            f"the generate call took longer than call_timeout_s={cfg.call_timeout_s}s "
                            f"(attempt {attempt + 1} of {cfg.retries + 1}); raise the limit on a loaded machine"
                        )
                    raise _EpisodeFailed(Failure(kind, type(e).__name__, message, turn, attempt + 1)) from e
                await asyncio.sleep(cfg.retry_backoff_s * 2**attempt)
            finally:
                self.stats.generate_s += time.perf_counter() - t0
        raise AssertionError(f"unreachable: {last!r}")

    async def _play(self, traj: Trajectory, ref: TaskRef, phase: dict) -> None:
        cfg = self.config
        env = self._acquire_env()
        finished = False
        try:
            opening, info = await self._env_call(
                lambda: env.reset(seed=ref.seed, options=ref.options), phase=phase, turn=None
            )
            traj.task_id, traj.opening = str(info.get("task_id", "")), list(opening)
            traj.metadata.update(task_facts(env, info))
            tools = info.get("tools")
            episode = Episode(env, ref.seed, list(opening), traj.sample_index)
            policy = self.policy.start(episode) if isinstance(self.policy, EpisodePolicy) else self.policy
            history = self.agent.prepare(opening)
            traj.prompt_token_ids = tuple(self.agent.render_prompt(history, tools))
            ids = list(traj.prompt_token_ids)
            pending_obs: list[int] = []
            for t in range(cfg.max_turns):
                if len(ids) >= cfg.max_context:
                    traj.metadata["truncated_by"] = "context"
                    traj.outcome = await self._final_outcome(env, phase, t)
                    break
                completion = await self._generate(policy, ids, t, phase)
                action = self.agent.parse(completion.text)
                obs, reward, terminated, truncated, step_info = await self._env_call(
                    env.step, action, phase=phase, turn=t
                )
                history.append(self.agent.assistant_message(completion))
                traj.record_void(step_info)  # the env caught forgery: the grade it paid (0) stands, flagged
                traj.turns.append(
                    Turn(
                        index=t,
                        action=action,
                        observation=list(obs),
                        reward=float(reward),
                        terminated=bool(terminated),
                        truncated=bool(truncated),
                        signals=step_info.get("signals", {}),
                        obs_token_ids=tuple(pending_obs),
                        completion_token_ids=completion.token_ids,
                        completion_logprobs=completion.logprobs,
                        finish_reason=completion.finish_reason,
                    )
                )
                self.stats.turns += 1
                self.stats.completion_tokens += len(completion.token_ids)
                ids += completion.token_ids
                if terminated or truncated:
                    traj.outcome = step_info.get("outcome") or await self._final_outcome(env, phase, t)
                    break
                pending_obs = self.agent.render_continuation(history, list(obs), tools, completion)
                history.extend(obs)
                episode.messages.extend(obs)
                ids += pending_obs
            else:
                traj.metadata["truncated_by"] = "max_turns"
                traj.outcome = await self._final_outcome(env, phase, cfg.max_turns - 1)
            finished = True
            if cfg.token_check != "off":
                self._check_tokens(traj, history, tools)
        finally:
            # An env that raised or was interrupted inside one of its calls may be in any state.
            self._release_env(env, reusable=finished or phase["name"] != "env")

    def _check_tokens(self, traj: Trajectory, history: Messages, tools: Any) -> None:
        report = check_tokens(self.agent, traj, history, tools)
        traj.metadata["token_check"] = report.to_dict()
        if report.drift:
            if self.config.token_check == "strict":
                raise _EpisodeFailed(Failure(FailureKind.POLICY, TokenDriftError.__name__, report.describe()))
            logger.warning("token drift in %s seed %s: %s", traj.env_id, traj.seed, report.describe())


def _close_envs(envs: list[Any]) -> None:
    while envs:
        env = envs.pop()
        try:
            env.close()
        except Exception as e:  # one env failing to close must not keep the others open
            logger.warning("closing a kept env failed: %s: %s", type(e).__name__, e)


def task_facts(env: Any, info: dict[str, Any]) -> dict[str, str]:
    """The reset task's content hash and split, where the env says them (an `Env`; its reset info)."""
    facts = {}
    unwrapped = getattr(env, "unwrapped", env)
    # by its methods, not isinstance: in a Ray actor the env's `Env` base may be another copy of the class
    try:
        task = unwrapped.task
    except Exception:  # not reset, or no `task` attribute: no content key
        task = None
    content_key = getattr(task, "content_key", None)
    if callable(content_key):
        facts[TASK_KEY] = hashlib.sha256(str(content_key()).encode("utf-8")).hexdigest()[:16]
    elif isinstance(info.get(TASK_KEY), str):  # a remote env (a Ray actor) hashed it where the task lives
        facts[TASK_KEY] = info[TASK_KEY]
    if isinstance(info.get("split"), str):
        facts[SPLIT_KEY] = info["split"]
    return facts


def task_key(trajectory: Trajectory) -> str:
    """What makes two episodes the same task: the same content (the hash the manager recorded) and the
    same task id (an env whose tasks share a prompt and give no `Task.key` still tells them apart by
    id); without a content hash (an env that is no `Env`), the task id; without either (a failed
    reset), the reset seed."""
    content = trajectory.metadata.get(TASK_KEY)
    if content:
        return f"{content}/{trajectory.task_id}" if trajectory.task_id else str(content)
    return f"id:{trajectory.task_id}" if trajectory.task_id else f"seed:{trajectory.seed}"


def _outcome_of(env: Any) -> dict[str, Any]:
    unwrapped = getattr(env, "unwrapped", env)
    outcome = getattr(unwrapped, "outcome", None)
    # an `Env`, or an env that says its `outcome` is one (`rlgym/Remote-v0`: the served env's)
    ours = isinstance(unwrapped, Env) or getattr(unwrapped, "provides_outcome", False) is True
    return outcome() if callable(outcome) and ours else {"reward": 0.0}
