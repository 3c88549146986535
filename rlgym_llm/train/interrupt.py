"""Ctrl-C during the RL loop: the run stops, and a checkpoint of a consistent state lets
`rlgym train resume=RUN` continue it exactly (`loop.train` uses these two pieces).

A step has two spans. Before its update (rollouts, credit) the weights are still those the step
started from: a Ctrl-C stops at once, and the state saved is the step's start (`Mark`: the RNG
states, the sampling-seed counter and the credit state, taken then and restored before the save).
A half-applied optimizer step cannot be saved, so during the update and its bookkeeping a Ctrl-C is
held until they end (`Interrupts.hold` / `release`); a second Ctrl-C stops at once, without a
checkpoint of that step.
"""

from __future__ import annotations

import copy
import logging
import signal
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any

from rlgym_llm.train import checkpoint

logger = logging.getLogger(__name__)


class Interrupts:
    """SIGINT (Ctrl-C) while the loop runs: between `hold()` and `release()` a Ctrl-C is held and
    raised at the release (a second one is raised at once, `forced`); outside those spans Python's
    own handler stays, so `asyncio.run` (the rollouts) handles a Ctrl-C as it does, cancelling its
    tasks cleanly. Only in the main thread over Python's default handler (elsewhere, and under
    another handler, Ctrl-C behaves as it did)."""

    def __init__(self) -> None:
        self.holding = False
        self.pending = False
        self.forced = False  # a second Ctrl-C while holding: the state is not consistent
        self._managed = False
        self._default: Any = None

    def __enter__(self) -> Interrupts:
        self._default = signal.getsignal(signal.SIGINT)
        self._managed = threading.current_thread() is threading.main_thread() and (
            self._default is signal.default_int_handler
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self.holding and self._managed:
            signal.signal(signal.SIGINT, self._default)
        self.holding = False

    def hold(self) -> None:
        """From now on a Ctrl-C waits for `release`."""
        if self._managed and not self.holding:
            signal.signal(signal.SIGINT, self._on_sigint)
        self.holding = True

    def release(self) -> None:
        """End the hold; a Ctrl-C that came during it is raised now."""
        if self._managed and self.holding:
            signal.signal(signal.SIGINT, self._default)
        self.holding = False
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if not self.pending:
            self.pending = True
            logger.warning("Ctrl-C: stopping when this update ends (Ctrl-C again: now, without saving it)")
            return
        self.forced = True
        raise KeyboardInterrupt


@dataclass
class Mark:
    """A state of the run a Ctrl-C can save: `step` steps done with the weights as they are, and what
    the next step draws from (RNG states, sampling-seed counter, credit state)."""

    step: int
    rng: dict[str, Any]
    calls: int
    credit: dict[str, Any]

    @classmethod
    def take(cls, step: int, seeded: Any, credit: Any) -> Mark:
        calls = seeded.calls if seeded is not None else 0
        return cls(step, checkpoint.rng_state(), calls, copy.deepcopy(credit.state_dict()))

    def restore(self, seeded: Any, credit: Any) -> None:
        checkpoint.set_rng_state(self.rng)
        if seeded is not None:
            seeded.calls = self.calls
        credit.load_state_dict(self.credit)
