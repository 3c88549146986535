"""Failure classification: which part of the system a failure belongs to.

An exception names its class with a `failure_kind` attribute ("policy", "env", "sandbox", "engine");
exceptions from other libraries are classified by type. Classification walks the `__cause__` chain,
so a sandbox error wrapped by an env still counts as a sandbox failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rlgym_llm.core.errors import RlgymError
from rlgym_llm.core.types import FailureKind, Trajectory


class EngineError(RlgymError, RuntimeError):
    """The inference engine failed: HTTP errors, bad responses, lost connections."""

    failure_kind = "engine"

    def __init__(self, message: str, transient: bool = True):
        super().__init__(message)
        self.transient = transient


class ContextOverflowError(RlgymError, ValueError):
    """The prompt leaves no room to generate within the model's context window."""

    failure_kind = "policy"


def is_transient(error: BaseException) -> bool:
    """Whether retrying the same call may succeed (timeouts, lost connections, 5xx); bugs are not."""
    if isinstance(error, EngineError):
        return error.transient
    return isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)) or type(
        error
    ).__module__.startswith("aiohttp")


def classify(error: BaseException, default: FailureKind) -> FailureKind:
    """The `FailureKind` of `error` (or of the first error in its cause chain that names one)."""
    seen: BaseException | None = error
    while seen is not None:
        kind = getattr(seen, "failure_kind", None)
        if kind is not None:
            return FailureKind(kind)
        if isinstance(seen, (asyncio.TimeoutError, TimeoutError, ConnectionError)) or type(seen).__module__.startswith(
            "aiohttp"
        ):
            return FailureKind.ENGINE
        seen = seen.__cause__
    return default


class TooManyFailuresError(RlgymError, RuntimeError):
    """More episodes of a batch failed than the run allows (e.g. every episode, because the env's
    constructor raises or the endpoint is unreachable): the run stops with the first error."""


def check_failures(trajectories: Sequence[Trajectory], max_share: float, what: str, setting: str) -> None:
    """Raise `TooManyFailuresError` when more than `max_share` of `trajectories` failed.

    Args:
        trajectories: one batch (a training step, a held-out measure, the SFT demonstrations).
        max_share: the largest tolerated share of failed episodes (1.0: never raise).
        what: the batch, for the message (e.g. "RL step 3").
        setting: the config key of `max_share`, for the message.
    """
    failed = [t for t in trajectories if t.failed]
    if not trajectories or len(failed) / len(trajectories) <= max_share:
        return
    first = failed[0].failures[0]
    turn = "" if first.turn is None else f", turn {first.turn}"
    raise TooManyFailuresError(
        f"{what}: {len(failed)} of {len(trajectories)} episodes failed, more than {setting}={max_share} allows; "
        f"first error ({first.kind.value} failure{turn}, seed {failed[0].seed}): {first.error_type}: {first.message}"
    )
