"""Shared numerics of the estimators: group z-scores, pooled and per-index normalisation, discounted sums.

Every function is pure and works on numpy arrays; "ragged" means a list of 1-D arrays, one per
trajectory of a group, of possibly different lengths (one value per turn).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

Scale = Literal["std", "none"]
"""How a group-centred value is scaled: `std` divides by (std + eps) (GRPO), `none` keeps the mean-centred value."""

Ragged = list[np.ndarray]


def as_array(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """A float64 1-D copy of `x`."""
    arr = np.array(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D sequence of numbers, got shape {arr.shape}")
    return arr


def is_constant(x: np.ndarray) -> bool:
    """True for an empty array or one whose values are all exactly equal (a zero-variance group)."""
    return x.size == 0 or bool(np.all(x == x.flat[0]))


def normalize(x: Sequence[float] | np.ndarray, *, scale: Scale = "std", ddof: int = 0, eps: float = 1e-6) -> np.ndarray:
    """Centre a group of values on its mean and (optionally) divide by its standard deviation.

    A_i = (x_i - mean(x)) / (std(x) + eps)   (scale="std");   A_i = x_i - mean(x)   (scale="none").

    Groups whose values are all equal get exactly 0 (not a rounding residue of the mean), so
    "advantage collapse" is an exact, countable event.

    Args:
        x: the group's values.
        scale: `std` or `none`.
        ddof: 0 for the population std, 1 for the sample (Bessel-corrected) std; a group of one
            value with ddof=1 is constant anyway and gets 0.
        eps: added to the std, as in the authors' code, so near-constant groups stay finite.
    """
    arr = as_array(x)
    if is_constant(arr):
        return np.zeros_like(arr)
    centred = arr - arr.mean()
    if scale == "none":
        return centred
    if scale != "std":
        raise ValueError(f"scale must be 'std' or 'none', got {scale!r}")
    return centred / (arr.std(ddof=ddof) + eps)


def normalize_pooled(values: Sequence[np.ndarray], **kw) -> Ragged:
    """Normalise every value of a ragged group against one mean/std pooled over all of them.

    This is IGPO's "joint" normalisation and the default for turn rewards: pooling over all turns
    of the group avoids the per-turn-index bias when the policy decides when to stop (verl RFC #7244).
    Keyword arguments go to `normalize`.
    """
    arrays = [as_array(v) for v in values]
    if not arrays:
        return []
    flat = normalize(np.concatenate(arrays), **kw)
    return np.split(flat, np.cumsum([a.size for a in arrays])[:-1])


def normalize_per_index(values: Sequence[np.ndarray], **kw) -> Ragged:
    """Normalise turn t of every trajectory against the turn-t values of the group (A2TGPO's option).

    Only trajectories that reached turn t take part in turn t's statistics; a turn index that only
    one trajectory reached gets 0. Keyword arguments go to `normalize`.
    """
    arrays = [as_array(v) for v in values]
    out = [np.zeros_like(a) for a in arrays]
    for t in range(max((a.size for a in arrays), default=0)):
        rows = [i for i, a in enumerate(arrays) if a.size > t]
        normed = normalize([arrays[i][t] for i in rows], **kw)
        for i, v in zip(rows, normed):
            out[i][t] = v
    return out


def discounted_returns(rewards: Sequence[float] | np.ndarray, gamma: float) -> np.ndarray:
    """Reward-to-go: G_t = sum_{k >= t} gamma^(k - t) r_k, computed backwards in one pass."""
    r = as_array(rewards)
    out = np.empty_like(r)
    acc = 0.0
    for t in range(r.size - 1, -1, -1):
        acc = r[t] + gamma * acc
        out[t] = acc
    return out
