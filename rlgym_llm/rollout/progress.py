"""A live progress bar for rollouts (rich, on stderr): episodes done, failures, throughput."""

from __future__ import annotations

import time
from typing import Any

from rlgym_llm.core.types import Trajectory


class RolloutProgress:
    """Pass as `RolloutManager(on_episode=...)`; use as a context manager around `run`.

    with RolloutProgress(total=len(tasks) * group_size) as bar:
        manager = RolloutManager(env, agent, policy, config, on_episode=bar)
        trajectories = manager.run_sync(tasks)
    """

    def __init__(self, total: int, description: str = "rollout"):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.task = self.progress.add_task(description, total=total, status="")
        self.failures = 0
        self.tokens = 0
        self.reward = 0.0
        self.done = 0
        self._start = time.perf_counter()

    def __call__(self, trajectory: Trajectory) -> None:
        self.done += 1
        self.failures += bool(trajectory.failed)
        self.reward += trajectory.reward
        self.tokens += sum(len(t.completion_token_ids) for t in trajectory.turns)
        rate = self.tokens / max(time.perf_counter() - self._start, 1e-9)
        status = f"reward {self.reward / self.done:.3f}  failures {self.failures}  {rate:,.0f} tok/s"
        self.progress.update(self.task, advance=1, status=status)

    def __enter__(self) -> RolloutProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()
