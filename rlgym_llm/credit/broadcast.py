"""Per-turn advantages to per-token advantages: every completion token of turn t gets A_t; prompt and
env tokens (loss mask 0) get 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.common import as_array


def broadcast_turns(
    turn_advantages: Sequence[float] | np.ndarray, turn_spans: Sequence[tuple[int, int]], length: int
) -> np.ndarray:
    """A length-`length` array holding A_t on [start_t, end_t) of each turn span and 0 elsewhere.

    Raises:
        ValueError: the spans and advantages differ in number, or a span is out of range or overlaps another.
    """
    adv = as_array(turn_advantages)
    if adv.size != len(turn_spans):
        raise ValueError(f"{adv.size} turn advantages for {len(turn_spans)} turns")
    out = np.zeros(length, dtype=np.float64)
    prev_end = 0
    for (start, end), a in zip(turn_spans, adv):
        if not prev_end <= start <= end <= length:
            raise ValueError(f"turn span ({start}, {end}) is out of order or outside [0, {length})")
        out[start:end] = a
        prev_end = end
    return out


def token_advantages(trajectory: Trajectory, turn_advantages: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per-token advantages aligned with `trajectory.token_ids` (nonzero only where `loss_mask` is 1)."""
    return broadcast_turns(turn_advantages, trajectory.turn_spans, len(trajectory.token_ids))


def broadcast_batch(
    trajectories: Sequence[Trajectory],
    turn_advantages: Sequence[Sequence[float] | np.ndarray],
    *,
    pad_to: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Right-padded per-token advantages and loss mask for a batch.

    Args:
        trajectories: B trajectories.
        turn_advantages: per trajectory, one advantage per turn.
        pad_to: the padded length L (default: the longest trajectory).

    Returns:
        (advantages, mask), both (B, L): float64 advantages and the int8 loss mask (0 on padding).
    """
    if len(trajectories) != len(turn_advantages):
        raise ValueError(f"{len(trajectories)} trajectories but {len(turn_advantages)} advantage arrays")
    lengths = [len(t.token_ids) for t in trajectories]
    width = max(lengths, default=0) if pad_to is None else pad_to
    if lengths and max(lengths) > width:
        raise ValueError(f"pad_to={pad_to} is shorter than the longest trajectory ({max(lengths)} tokens)")
    adv = np.zeros((len(trajectories), width), dtype=np.float64)
    mask = np.zeros((len(trajectories), width), dtype=np.int8)
    for b, (traj, a) in enumerate(zip(trajectories, turn_advantages)):
        n = lengths[b]
        adv[b, :n] = token_advantages(traj, a)
        mask[b, :n] = traj.loss_mask
    return adv, mask
