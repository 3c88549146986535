"""Where a training step's rollouts come from: sampled in place (synchronous), or ahead of time in a
background thread while the trainer updates (`trainer.off_policy_steps`).

    source = Synchronous(run)                 # collect -> update -> sync, one after the other
    source = Ahead(run, off_policy_steps=1)   # step t+1's rollouts sample while step t updates
    source = Sharded(Synchronous(run), dist)  # each data-parallel rank samples its share of the tasks

Both hand `step_once` a `Draw`: the trajectories of one rollout batch, what they cost, and the
weights version that sampled them (the number of loop steps whose updates those weights hold).
`Ahead` samples from a snapshot of the weights taken between updates (a copy of the state dict,
loaded into the engine's own weights by the background thread before the batch), so a batch never
mixes two versions, and a step's batch is at most `off_policy_steps` versions behind the trainer.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rlgym_llm.core.types import Trajectory
from rlgym_llm.rollout.manager import RolloutManager
from rlgym_llm.rollout.progress import ProgressReporter

if TYPE_CHECKING:
    from rlgym_llm.rollout.policy import TrainablePolicy
    from rlgym_llm.train.distributed import Distributed
    from rlgym_llm.train.trainer import PolicyTrainer

logger = logging.getLogger(__name__)

VERSION_KEY = "policy_version"
"""`Trajectory.metadata` key: the weights version that sampled the trajectory."""
RANK_KEY = "rank"
"""`Trajectory.metadata` key: the data-parallel rank that sampled (and trains on) the trajectory."""


class RunParts(Protocol):
    """What a source reads of the loop's `loop.RunParts` (declared here, so that this module does not
    import the loop that imports it)."""

    rollouts: RolloutManager
    trainer: PolicyTrainer
    policy: TrainablePolicy
    progress: ProgressReporter


@dataclass
class Draw:
    """One rollout batch.

    Args:
        trajectories: grouped, in task order (as `RolloutManager.run` returns them).
        tokens: completion tokens sampled.
        failures: failed episodes by kind.
        wall_s: wall time of the batch.
        cpu_s: process CPU time over the batch (with `Ahead`, it includes the trainer's work meanwhile).
        version: the weights version that sampled it.
    """

    trajectories: list[Trajectory]
    tokens: int
    failures: Counter
    wall_s: float
    cpu_s: float
    version: int


def run_shown(manager: RolloutManager, seeds: list[int], progress: ProgressReporter | None, what: str) -> list[Any]:
    """`manager.run_sync(seeds)`, its episodes counted by a progress phase."""
    if progress is None:
        return manager.run_sync(seeds)
    with progress.phase(what, len(seeds) * manager.config.group_size) as phase:
        manager.on_episode = phase
        try:
            return manager.run_sync(seeds)
        finally:
            manager.on_episode = None


def draw(run: RunParts, seeds: Sequence[int], version: int, shown: str | None = None) -> Draw:
    """Roll out `seeds` with `run.rollouts` (a progress phase named `shown`, if given), tagging every
    trajectory with `version`."""
    t0, c0 = time.perf_counter(), time.process_time()
    if shown is None:
        trajs = run.rollouts.run_sync(list(seeds))
    else:
        trajs = run_shown(run.rollouts, list(seeds), run.progress, shown)
    for t in trajs:
        t.metadata[VERSION_KEY] = version
    stats = run.rollouts.stats
    return Draw(
        trajs,
        stats.completion_tokens,
        Counter(stats.failures),
        time.perf_counter() - t0,
        time.process_time() - c0,
        version,
    )


class Synchronous:
    """Rollouts sampled in place, with the weights of the step that trains on them; the engine
    takes the new weights after each update (`trainer.off_policy_steps=0`)."""

    def __init__(self, run: RunParts):
        self.run = run

    def __enter__(self) -> Synchronous:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing runs in the background."""

    def first(self, step: int, seeds: Sequence[int]) -> tuple[Draw, float]:
        """The step's first draw, and how long the caller waited for it."""
        d = draw(self.run, seeds, step, f"RL step {step + 1} rollouts")
        return d, d.wall_s

    def refill(self, step: int, seeds: Sequence[int]) -> Draw:
        """A dynamic-sampling refill of the step, with its current weights."""
        return draw(self.run, seeds, step)

    def before_update(self, step: int) -> None:
        """Nothing to start: the next batch waits for the update."""

    def after_update(self, updated: bool) -> None:
        """The engine samples the next batch from the new weights."""
        if updated:
            self.run.policy.sync_weights(self.run.trainer.weights())

    def settle(self) -> dict[int, Draw]:
        """No batch is ever sampled ahead."""
        return {}

    def restore(self, draws: dict[int, Draw]) -> None:
        if draws:
            raise ValueError(
                f"the checkpoint holds rollouts sampled ahead for steps {sorted(draws)}: resume it with the "
                "trainer.off_policy_steps it was saved with"
            )


class Ahead:
    """Rollouts sampled up to `off_policy_steps` updates ahead, in one background thread.

    Before step t's update, the first draws of steps t+1 .. t+k are submitted with a snapshot of
    step t's weights (version t); the thread loads a job's snapshot into the engine before sampling.
    So step s trains on a batch of version >= s - k, and with k = 1 exactly s - 1 (after the first).
    Refills of dynamic sampling go through the same thread, with the step's current weights.

    An exception in the thread is raised by the call that waits for that batch (`first`, `refill`,
    `settle`); `close` cancels the jobs not yet started and waits for the running one.

    Args:
        run: its `policy` must hold weights of its own (not the trainer's model): it samples while
            the trainer updates.
        off_policy_steps: k >= 1.
        total_steps: no draw is started for a step at or past it.
        seeds_of: the task seeds of a step's first draw.
    """

    def __init__(self, run: RunParts, off_policy_steps: int, total_steps: int, seeds_of: Callable[[int], list[int]]):
        model = run.trainer.model
        if getattr(run.policy, "model", None) is model:
            raise ValueError(
                "trainer.off_policy_steps > 0 samples while the trainer updates: the rollout engine needs "
                "weights of its own, e.g. TransformersPolicy(copy.deepcopy(model), tokenizer), not the trainer's model"
            )
        if not run.trainer.loss_cfg.recompute_old_logp:
            raise ValueError(
                "trainer.off_policy_steps > 0 needs loss.recompute_old_logp=true: the clip is centred on the "
                "trainer's current policy and the stale behaviour logprobs enter through the truncated IS weight"
            )
        self.run, self.k, self.total_steps, self.seeds_of = run, off_policy_steps, total_steps, seeds_of
        self.pending: dict[int, Future[Draw]] = {}  # first draws of coming steps
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rlgym-rollouts-ahead")
        self._snapshot: tuple[int, dict[str, Any]] | None = None  # (version, cloned state dict)
        self._loaded: int | None = None  # the version in the engine (read and written by the thread only)

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def first(self, step: int, seeds: Sequence[int]) -> tuple[Draw, float]:
        """The step's first draw (sampled ahead, or now with the current weights), and the wait."""
        future = self.pending.pop(step, None) or self._submit(seeds, step, f"RL step {step + 1} rollouts")
        t0 = time.perf_counter()
        return future.result(), time.perf_counter() - t0

    def refill(self, step: int, seeds: Sequence[int]) -> Draw:
        return self._submit(seeds, step, None).result()

    def before_update(self, step: int) -> None:
        """Start the first draws of steps step+1 .. step+k with this step's weights (version `step`)."""
        for s in range(step + 1, min(step + self.k, self.total_steps - 1) + 1):
            if s not in self.pending:
                self.pending[s] = self._submit(self.seeds_of(s), step, f"RL step {s + 1} rollouts")

    def after_update(self, updated: bool) -> None:
        """Nothing: the next job takes a snapshot of the new weights."""

    def settle(self) -> dict[int, Draw]:
        """Wait for every started draw; returns them by step (what a checkpoint saves)."""
        return {s: f.result() for s, f in sorted(self.pending.items())}

    def restore(self, draws: dict[int, Draw]) -> None:
        """Take the draws a checkpoint saved as already sampled."""
        for s, d in draws.items():
            f: Future[Draw] = Future()
            f.set_result(d)
            self.pending[s] = f

    def close(self) -> None:
        for f in self.pending.values():
            f.cancel()
        self._pool.shutdown(wait=True)
        for s, f in self.pending.items():
            if f.done() and not f.cancelled() and f.exception() is not None:
                logger.warning("the rollouts sampled ahead for step %d failed: %r", s + 1, f.exception())
        self.pending.clear()

    def _submit(self, seeds: Sequence[int], version: int, shown: str | None) -> Future[Draw]:
        snap = self._snapshot
        if snap is None or snap[0] != version:
            state = self.run.trainer.full_state_dict()
            snap = self._snapshot = (version, {k: v.detach().clone() for k, v in state.items()})
        return self._pool.submit(self._job, list(seeds), snap, shown)

    def _job(self, seeds: list[int], snap: tuple[int, dict[str, Any]], shown: str | None) -> Draw:
        version, weights = snap
        if self._loaded != version:
            self.run.policy.sync_weights(weights)
            self._loaded = version
        return draw(self.run, seeds, version, shown)


class Sharded:
    """`Synchronous` split over the data-parallel ranks: each rank rolls out its contiguous block of
    a draw's task seeds (`Distributed.shard`: whole tasks, so every group stays on one rank) and
    receives every rank's trajectories, in the order one process returns them, with the group ids
    one process gives them. Each trajectory is tagged with its rank (`RANK_KEY`): that rank trains
    on it. With episode-keyed sampling seeds (`EpisodeSeededPolicy`) the draw is the one a single
    process samples.
    """

    def __init__(self, inner: Synchronous, dist: Distributed):
        self.inner, self.dist = inner, dist

    def __enter__(self) -> Sharded:
        return self

    def __exit__(self, *exc: object) -> None:
        """Nothing runs in the background."""

    def first(self, step: int, seeds: Sequence[int]) -> tuple[Draw, float]:
        lo, hi = self.dist.shard(len(seeds))
        mine, waited = self.inner.first(step, list(seeds)[lo:hi])
        t0 = time.perf_counter()
        merged = self._merge(mine, lo)
        return merged, waited + time.perf_counter() - t0  # the wait for the slowest rank included

    def refill(self, step: int, seeds: Sequence[int]) -> Draw:
        lo, hi = self.dist.shard(len(seeds))
        return self._merge(self.inner.refill(step, list(seeds)[lo:hi]), lo)

    def before_update(self, step: int) -> None:
        self.inner.before_update(step)

    def after_update(self, updated: bool) -> None:
        self.inner.after_update(updated)

    def settle(self) -> dict[int, Draw]:
        return self.inner.settle()

    def restore(self, draws: dict[int, Draw]) -> None:
        self.inner.restore(draws)

    def _merge(self, mine: Draw, first_task: int) -> Draw:
        """Every rank's part of a draw: trajectories and tokens and failures summed, the wall time of
        the slowest rank, the CPU time of all."""
        for t in mine.trajectories:  # the manager numbers a call's groups from 0
            t.group_id = str(first_task + int(t.group_id)) if t.group_id.isdigit() else t.group_id
            t.metadata[RANK_KEY] = self.dist.rank
        parts: list[Draw] = self.dist.gather([mine])
        failures: Counter = Counter()
        for d in parts:
            failures.update(d.failures)
        return Draw(
            [t for d in parts for t in d.trajectories],
            sum(d.tokens for d in parts),
            failures,
            max(d.wall_s for d in parts),
            sum(d.cpu_s for d in parts),
            mine.version,
        )
