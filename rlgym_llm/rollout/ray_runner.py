"""Scale-out rollouts with Ray: envs (and their sandboxes) live in actors, generation spreads over servers.

The episode loop is `RolloutManager`'s own. This module only changes where things run:

- envs are built and stepped inside `EnvWorker` actors; the manager holds a proxy per episode whose
  `reset`/`step` answer with Ray object refs, which the manager awaits on the driver's event loop;
- generation goes through a `PolicyPool`: each episode sticks to one policy server for its whole life
  (so a multi-turn context stays in that server's prefix cache), chosen as the least loaded one.

    runner = RayRolloutRunner("rlgym/Code-v0", agent, [server_a, server_b], config, num_env_workers=4)
    with runner:
        trajectories = runner.run_sync(range(32))

Failures inside actors are data like any other: an env that raises is recorded as an env failure
(or as the kind its error names, classified inside the actor where the exception's cause chain is still
intact), and an actor that dies fails only the episodes whose envs it hosted. Ray restarts a dead worker
(`max_restarts`), so later episodes can be placed on it again. Env calls are never retried: a step is
not idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from rlgym_llm.core import registry
from rlgym_llm.core.errors import MissingDependencyError, UnknownEnvError
from rlgym_llm.core.types import FailureKind, Trajectory
from rlgym_llm.rollout.errors import classify
from rlgym_llm.rollout.manager import TASK_KEY, Agent, RolloutConfig, RolloutManager, TaskRef, _outcome_of, task_facts
from rlgym_llm.rollout.policy import Completion, Policy, SamplingParams
from rlgym_llm.rollout.store import TrajectoryWriter

logger = logging.getLogger(__name__)

# The policy server of the episode running in the current asyncio task (set per episode by the runner).
_SERVER: contextvars.ContextVar[int | None] = contextvars.ContextVar("rlgym_policy_server", default=None)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError.of(e, "the Ray runner", default="ray") from e
    return ray


class _LeastLoaded:
    """Pick the slot with the fewest live users; ties go round-robin so idle slots share the work."""

    def __init__(self, n: int):
        self.live = [0] * n
        self.total = [0] * n
        self._next = itertools.cycle(range(n))

    def acquire(self) -> int:
        low = min(self.live)
        start = next(self._next)
        n = len(self.live)
        i = next(j % n for j in range(start, start + n) if self.live[j % n] == low)
        self.live[i] += 1
        self.total[i] += 1
        return i

    def release(self, i: int) -> None:
        self.live[i] -= 1


class PolicyPool:
    """Several policy servers behind one `Policy`; an episode sticks to one server.

    Inside a `RayRolloutRunner` episode every `generate` call goes to that episode's server (chosen
    when the episode starts, least loaded first). Called outside an episode, each call picks the
    least loaded server on its own.

    Args:
        policies: the servers (any `Policy`: HTTP clients of vLLM servers, local models, fakes).
    """

    def __init__(self, policies: Sequence[Policy]):
        if not policies:
            raise ValueError("PolicyPool needs at least one policy")
        self.policies = list(policies)
        self._load = _LeastLoaded(len(self.policies))
        self.calls = [0] * len(self.policies)

    def acquire(self) -> int:
        """Reserve the least loaded server for an episode; give it back with `release`."""
        return self._load.acquire()

    def release(self, server: int) -> None:
        self._load.release(server)

    @property
    def episodes(self) -> list[int]:
        """Episodes placed on each server so far."""
        return list(self._load.total)

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        server = _SERVER.get()
        if server is not None:
            self.calls[server] += 1
            return await self.policies[server].generate(prompt_token_ids, sampling)
        server = self.acquire()
        try:
            self.calls[server] += 1
            return await self.policies[server].generate(prompt_token_ids, sampling)
        finally:
            self.release(server)


# --- the env side ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Registration:
    """How the driver registered an env id, so workers that lack the registration can repeat it."""

    env_id: str
    entry_point: Any
    defaults: dict[str, Any]
    max_turns: int | None


def _registration(env_id: str) -> _Registration:
    spec = registry.spec(env_id)  # raises UnknownEnvError (with suggestions) in the driver, before any actor starts
    # Ids registered at run time (tests, notebooks) exist only in the driver's registry; ship them along.
    # There is no public accessor for the turn limit yet, hence the private read.
    return _Registration(env_id, spec.entry_point, dict(spec.kwargs or {}), registry._max_turns.get(env_id))


def _make_registered(reg: _Registration, env_kwargs: dict[str, Any]) -> Any:
    """Build a registered env in a worker, registering it first if this process has not."""
    try:
        registry.spec(reg.env_id)
    except UnknownEnvError:
        registry.register(reg.env_id, reg.entry_point, max_turns=reg.max_turns, **reg.defaults)
    return registry.make(reg.env_id, **env_kwargs)


def _tag_failure(error: Exception) -> None:
    # Pickling an exception to the driver drops its `__cause__` chain (e.g. a sandbox error an env
    # wrapped), so classify here, where the chain is intact, and let the tag travel in its `__dict__`.
    with contextlib.suppress(AttributeError):  # an exception without a __dict__ stays untagged (env by default)
        error.failure_kind = classify(error, default=FailureKind.ENV).value  # type: ignore[attr-defined]


class EnvWorker:
    """A Ray actor body that hosts the env instances of the episodes placed on it, one per episode key.

    Args:
        make_env: zero-argument factory of a fresh env (called once per episode, at its reset).
    """

    def __init__(self, make_env: Callable[[], Any]):
        self._make_env = make_env
        self._envs: dict[str, Any] = {}

    def reset(self, key: str, seed: int | None, options: dict[str, Any] | None) -> tuple[list, dict]:
        try:
            env = self._envs.get(key)
            if env is None:
                env = self._envs[key] = self._make_env()
            obs, info = env.reset(seed=seed, options=options)
            # the task's content hash, which the manager reads from the env itself when it runs locally
            return obs, {**info, **{k: v for k, v in task_facts(env, {}).items() if k == TASK_KEY}}
        except Exception as e:
            _tag_failure(e)
            raise

    def step(self, key: str, action: Any) -> tuple[list, float, bool, bool, dict]:
        try:
            return self._env(key).step(action)
        except Exception as e:
            _tag_failure(e)
            raise

    def outcome(self, key: str) -> dict[str, Any]:
        try:
            return _outcome_of(self._env(key))
        except Exception as e:
            _tag_failure(e)
            raise

    def close(self, key: str) -> None:
        env = self._envs.pop(key, None)
        if env is not None:
            env.close()

    def live(self) -> int:
        """How many envs this worker holds (episodes not yet closed)."""
        return len(self._envs)

    def _env(self, key: str) -> Any:
        env = self._envs.get(key)
        if env is None:
            # The worker restarted after a crash (or the episode was never reset here): its env is gone.
            raise KeyError(f"episode {key} has no env on this worker (was the worker restarted?)")
        return env


class _RemoteEnv:
    """The manager's handle on one episode's env inside an `EnvWorker`; calls return awaitables."""

    def __init__(self, runner: RayRolloutRunner, worker: int, key: str):
        self._runner, self.worker, self.key = runner, worker, key
        self._actor = runner._workers[worker]
        self._closed = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self._reset(seed, options)

    async def _reset(self, seed: int | None, options: dict[str, Any] | None) -> Any:
        # A worker that is restarting after a crash refuses calls for a moment. Nothing of this episode
        # lives there yet and a reset builds its env afresh, so waiting for the worker is safe here
        # (unlike `step`, whose env died with the old process).
        ray = _import_ray()
        deadline = time.monotonic() + self._runner.restart_wait_s
        delay = 0.05
        while True:
            try:
                return await _result(self._actor.reset.remote(self.key, seed, options))
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(2 * delay, 1.0)

    def step(self, action: Any) -> Any:
        return _result(self._actor.step.remote(self.key, action))

    def outcome(self) -> Any:
        return _result(self._actor.outcome.remote(self.key))

    def close(self) -> None:
        if not self._closed:  # the manager closes from a `finally`: this must not block or raise
            self._closed = True
            self._runner._closing.append(self._actor.close.remote(self.key))
            self._runner._env_load.release(self.worker)


async def _result(ref: Any) -> Any:
    """Await an actor call; an error raised by the env comes back as itself, not wrapped by Ray."""
    ray = _import_ray()
    try:
        return await ref
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, Exception):
            raise cause from e
        raise


# --- the runner --------------------------------------------------------------------------------


class RayRolloutRunner(RolloutManager):
    """`RolloutManager` with envs hosted in Ray actors and generation spread over several policies.

    Same episodes, same trajectories (with a deterministic policy and fixed seeds, identical to a
    local `RolloutManager` run); only placement differs. Actors start on the first `run` (calling
    `ray.init()` with defaults if Ray is not initialized) and stop on `shutdown` or when the
    runner is used as a context manager.

    Args:
        env: a registered env id (built in the workers with `make(env, **env_kwargs)`) or a picklable
            zero-argument factory returning an env.
        agent: renders and parses, on the driver.
        policies: the policy servers; each episode sticks to one (see `PolicyPool`).
        config: limits and behaviour. `env_in_thread` is ignored: env calls are already asynchronous.
        env_kwargs: constructor kwargs for a registered env.
        num_env_workers: `EnvWorker` actors; each episode's env goes to the one with the fewest live envs.
        worker_options: Ray actor options for the workers (e.g. `{"num_cpus": 1}`, or
            `{"max_concurrency": 8}` to step several envs of one worker in threads; only for
            thread-safe envs).
        restart_wait_s: how long an episode's reset waits for its worker to come back from a restart.
        writer: optional JSONL sink, as for `RolloutManager`.
        on_episode: optional callback after each episode.
    """

    def __init__(
        self,
        env: str | Callable[[], Any],
        agent: Agent,
        policies: Sequence[Policy],
        config: RolloutConfig | None = None,
        env_kwargs: dict[str, Any] | None = None,
        num_env_workers: int = 2,
        worker_options: dict[str, Any] | None = None,
        restart_wait_s: float = 30.0,
        writer: TrajectoryWriter | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
    ):
        if num_env_workers < 1:
            raise ValueError(f"num_env_workers must be >= 1, got {num_env_workers}")
        # envs live in actors that may die and restart: a proxy is never kept for a later episode
        config = dataclasses.replace(config or RolloutConfig(), env_in_thread=False, reuse_envs=False)
        self.pool = PolicyPool(policies)
        super().__init__(self._open_env, agent, self.pool, config, writer=writer, on_episode=on_episode)
        if isinstance(env, str):
            self.env_id = env
            self._make_env: Callable[[], Any] = functools.partial(
                _make_registered, _registration(env), dict(env_kwargs or {})
            )
        else:
            self.env_id = getattr(env, "__name__", "custom")
            self._make_env = env
        self.num_env_workers, self.restart_wait_s = num_env_workers, restart_wait_s
        # Never replay an env call on a restarted actor: a step is not idempotent, and its env is gone.
        self.worker_options = {"max_restarts": 3, "max_task_retries": 0, **(worker_options or {})}
        self._workers: list[Any] = []
        self._env_load = _LeastLoaded(num_env_workers)
        self._keys = itertools.count()
        self._closing: list[Any] = []

    # --- lifecycle ---

    def start(self) -> None:
        """Start the env workers (done by the first `run` if not called)."""
        if self._workers:
            return
        ray = _import_ray()
        if not ray.is_initialized():
            logger.info("starting a local Ray instance for the rollout runner")
            ray.init()
        actor = ray.remote(EnvWorker).options(**self.worker_options)
        self._workers = [actor.remote(self._make_env) for _ in range(self.num_env_workers)]

    def shutdown(self) -> None:
        """Stop the env workers (their envs are dropped)."""
        if self._workers:
            ray = _import_ray()
            for w in self._workers:
                ray.kill(w, no_restart=True)
            self._workers = []

    def __enter__(self) -> RayRolloutRunner:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def placement(self) -> dict[str, list[int]]:
        """Episodes per policy server, generate calls per server, and episodes per env worker."""
        return {
            "server_episodes": self.pool.episodes,
            "server_calls": list(self.pool.calls),
            "worker_episodes": list(self._env_load.total),
        }

    # --- the manager's hooks ---

    async def run(self, tasks: Sequence[TaskRef | int]) -> list[Trajectory]:
        """Roll out `group_size` episodes per task over the workers; returns them grouped, in task order."""
        self.start()
        try:
            return await super().run(tasks)
        finally:
            # Wait for the envs to be closed, so their sandboxes are gone when `run` returns.
            closing, self._closing = self._closing, []
            ray = _import_ray()
            for result in await asyncio.gather(*(_result(r) for r in closing), return_exceptions=True):
                if isinstance(result, ray.exceptions.RayActorError):  # the env died with its worker
                    logger.debug("env already gone with its worker: %s", result)
                elif isinstance(result, BaseException):
                    logger.warning("closing an env failed: %s: %s", type(result).__name__, result)

    def _open_env(self) -> _RemoteEnv:
        return _RemoteEnv(self, self._env_load.acquire(), f"ep{next(self._keys)}")

    async def _episode(self, ref: TaskRef, group: int, sample: int) -> Trajectory:
        server = self.pool.acquire()
        token = _SERVER.set(server)  # seen by every generate call of this episode (it runs in this task)
        try:
            return await super()._episode(ref, group, sample)
        finally:
            _SERVER.reset(token)
            self.pool.release(server)

    async def _final_outcome(self, env: Any, phase: dict, turn: int | None) -> dict[str, Any]:
        return await self._env_call(env.outcome, phase=phase, turn=turn)
