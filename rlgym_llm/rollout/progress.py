"""Progress of a run's phases (setup, SFT, rollouts, held-out evaluation), on stderr.

On a terminal each phase is a live rich bar. Anywhere else (a log file, a pipe, CI) rich would draw
its bars once, at the end, cut to 80 columns; there each phase writes plain lines instead: when it
starts, at most every `interval_s` seconds while it runs, and when it ends.

    reporter = ProgressReporter()
    with reporter.phase("held-out eval", total=96) as bar:
        manager.on_episode = bar            # advances by one per finished episode
        manager.run_sync(seeds)
    reporter.line("SFT: loss 1.2 -> 0.3")   # a line above the bars
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from rlgym_llm.core.types import Trajectory


class Phase:
    """One phase's counter; call it with a finished episode, or `advance(status=...)`."""

    def __init__(self, reporter: ProgressReporter, description: str, total: int | None):
        self.reporter, self.description, self.total = reporter, description, total
        self.done = self.failures = self.tokens = 0
        self.reward = 0.0
        self.status = ""
        self.start = self.last_line = time.perf_counter()
        self.task: Any = None

    def __call__(self, trajectory: Trajectory) -> None:
        """Count one finished episode (pass as `RolloutManager.on_episode`)."""
        self.failures += bool(trajectory.failed)
        self.reward += trajectory.reward
        self.tokens += sum(len(t.completion_token_ids) for t in trajectory.turns)
        rate = self.tokens / max(time.perf_counter() - self.start, 1e-9)
        n = self.done + 1
        self.advance(status=f"reward {self.reward / n:.2f}  failures {self.failures}  {rate:,.0f} tok/s")

    def advance(self, n: int = 1, status: str | None = None) -> None:
        self.done += n
        if status is not None:
            self.status = status
        self.reporter._update(self)

    def text(self) -> str:
        """`description: done/total (pct) status [elapsed]`, the plain line of this phase."""
        count = f"{self.done}/{self.total} ({100 * self.done / self.total:.0f}%)" if self.total else f"{self.done}"
        elapsed = time.perf_counter() - self.start
        return f"{self.description}: {count}{'  ' + self.status if self.status else ''}  [{elapsed:.0f} s]"

    def __enter__(self) -> Phase:
        self.reporter._begin(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.reporter._end(self)


class ProgressReporter:
    """Phases and report lines of a run, on `stream` (stderr by default).

    Args:
        enabled: False: phases count silently; `line` still writes.
        stream: where to write.
        interval_s: off a terminal, the most seconds between two lines of a running phase.
        live: draw rich bars (default: when `stream` is a terminal).
    """

    def __init__(
        self, enabled: bool = True, stream: IO[str] | None = None, interval_s: float = 10.0, live: bool | None = None
    ):
        self.enabled, self.stream, self.interval_s = enabled, stream or sys.stderr, interval_s
        self.live = self.stream.isatty() if live is None else live
        self._bars: Any = None

    def phase(self, description: str, total: int | None = None) -> Phase:
        """A context manager counting one phase (`total`: its expected count, None when unknown)."""
        return Phase(self, description, total)

    def line(self, text: str) -> None:
        """A report line (above the live bars on a terminal)."""
        if self._bars is not None:
            self._bars.console.print(text, soft_wrap=True, highlight=False, markup=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def _begin(self, phase: Phase) -> None:
        if not self.enabled:
            return
        if self.live:
            if self._bars is None:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

                columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn())
                status = TextColumn("{task.fields[status]}")
                console = Console(file=self.stream)
                self._bars = Progress(*columns, status, TimeElapsedColumn(), console=console)
                self._bars.start()
            phase.task = self._bars.add_task(phase.description, total=phase.total, status="")
        else:
            self.line(f"{phase.description}: started" + (f" ({phase.total})" if phase.total else ""))

    def _update(self, phase: Phase) -> None:
        if not self.enabled:
            return
        if self._bars is not None and phase.task is not None:
            self._bars.update(phase.task, completed=phase.done, status=phase.status)
            return
        now = time.perf_counter()
        finished = phase.total is not None and phase.done >= phase.total
        if not self.live and not finished and now - phase.last_line >= self.interval_s:
            phase.last_line = now
            self.line(phase.text())

    def _end(self, phase: Phase) -> None:
        if not self.enabled:
            return
        if self._bars is not None and phase.task is not None:
            self._bars.remove_task(phase.task)
            self.line(phase.text())  # the finished phase stays on screen as a line
            if not self._bars.tasks:
                self.close()
        elif not self.live:
            self.line(phase.text() + " done")


class RolloutProgress:
    """A progress bar over episodes: pass as `RolloutManager(on_episode=...)`, use as a context manager.

    with RolloutProgress(total=len(tasks) * group_size) as bar:
        manager = RolloutManager(env, agent, policy, config, on_episode=bar)
        trajectories = manager.run_sync(tasks)
    """

    def __init__(self, total: int, description: str = "rollout", reporter: ProgressReporter | None = None):
        self.reporter = reporter or ProgressReporter()
        self._phase = self.reporter.phase(description, total)

    def __call__(self, trajectory: Trajectory) -> None:
        self._phase(trajectory)

    @property
    def done(self) -> int:
        return self._phase.done

    @property
    def failures(self) -> int:
        return self._phase.failures

    @property
    def reward(self) -> float:
        return self._phase.reward

    def __enter__(self) -> RolloutProgress:
        self._phase.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._phase.__exit__(*exc)
