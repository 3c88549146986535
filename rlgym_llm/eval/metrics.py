"""Evaluation statistics: unbiased pass@k, interquartile mean, stratified bootstrap confidence intervals.

NumPy only. Scores are arranged as a `(runs, tasks)` matrix, as in Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice" (the `rliable` library): a column holds one task's independent runs
(in `rlgym eval`, the n samples of the task; in a learning benchmark, the training seeds). Interval
estimates come from a stratified bootstrap that resamples runs *within each task* and takes percentiles
of the bootstrap distribution.

    >>> round(pass_at_k(n=10, c=3, k=2), 6)  # 1 - C(7, 2) / C(10, 2) = 1 - 21/45
    0.533333
    >>> float(iqm(np.array([[0.0, 1.0, 2.0, 3.0]])))  # the middle half: 1 and 2
    1.5
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]


def pass_at_k(n: int | np.ndarray, c: int | np.ndarray, k: int) -> float | np.ndarray:
    """The unbiased estimator of pass@k from n samples of which c are correct (Chen et al. 2021).

    pass@k = 1 - C(n - c, k) / C(n, k), computed in the numerically stable product form
    1 - prod_{i = n - c + 1}^{n} (1 - k / i), which never forms the huge binomials.

    Args:
        n: samples drawn per task (scalar or array).
        c: correct samples per task (same shape as `n`).
        k: the attempt budget; must satisfy 1 <= k <= n.

    Returns:
        The estimate per task: a float for scalars, else an array shaped like `n`.

    Raises:
        ValueError: k < 1, k > n, or c outside [0, n].
    """
    n_arr, c_arr = np.broadcast_arrays(np.asarray(n, dtype=np.int64), np.asarray(c, dtype=np.int64))
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if np.any(n_arr < k):
        raise ValueError(f"pass@{k} needs at least k samples per task, got n = {int(n_arr.min())}")
    if np.any((c_arr < 0) | (c_arr > n_arr)):
        raise ValueError("c must lie in [0, n] for every task")
    out = np.empty(n_arr.shape, dtype=np.float64)
    for idx in np.ndindex(n_arr.shape):
        ni, ci = int(n_arr[idx]), int(c_arr[idx])
        if ni - ci < k:  # every k-subset contains a correct sample
            out[idx] = 1.0
        else:
            out[idx] = 1.0 - float(np.prod(1.0 - k / np.arange(ni - ci + 1, ni + 1, dtype=np.float64)))
    return float(out) if out.ndim == 0 else out


def pass_at_k_curve(
    n: Sequence[int] | np.ndarray, c: Sequence[int] | np.ndarray, ks: Iterable[int]
) -> dict[int, float]:
    """Mean pass@k over tasks for each k in `ks` that every task has enough samples for."""
    n_arr, c_arr = np.asarray(n), np.asarray(c)
    return {int(k): float(np.mean(pass_at_k(n_arr, c_arr, int(k)))) for k in ks if 1 <= k <= int(n_arr.min())}


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean over the last two axes (runs, tasks): the mean of the middle 50 % of all scores.

    The trimming rule is scipy's `trim_mean(x, 0.25)` (and so `rliable.metrics.aggregate_iqm`): drop
    `floor(0.25 * N)` scores at each end of the sorted N scores. Leading axes are batch axes, so one
    call scores every bootstrap replicate.
    """
    x = np.asarray(scores, dtype=np.float64)
    flat = np.sort(x.reshape(*x.shape[:-2], -1), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut : flat.shape[-1] - cut].mean(axis=-1)


def mean(scores: np.ndarray) -> np.ndarray:
    """Mean over the last two axes (runs, tasks); leading axes are batch axes."""
    return np.asarray(scores, dtype=np.float64).mean(axis=(-2, -1))


def stratified_bootstrap(
    scores: np.ndarray, statistic: Statistic, reps: int = 2000, seed: int | None = 0, chunk: int = 1000
) -> np.ndarray:
    """Bootstrap replicates of `statistic`, resampling runs with replacement within each task.

    Each replicate draws, for every cell (run i, task j), a run index uniformly from the task's runs,
    independently per cell, exactly as `rliable.library.StratifiedBootstrap` does.

    Args:
        scores: a `(runs, tasks)` matrix.
        statistic: maps an array `(..., runs, tasks)` to `(...)` (e.g. `iqm`, `mean`).
        reps: the number of bootstrap replicates.
        seed: seeds the resampling (None: fresh entropy).
        chunk: replicates computed per vectorised batch (bounds memory).

    Returns:
        An array of `reps` replicate values.
    """
    x = _matrix(scores)
    runs, tasks = x.shape
    rng = np.random.default_rng(seed)
    cols = np.arange(tasks)
    out = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        rows = rng.integers(0, runs, size=(size, runs, tasks))
        out[start : start + size] = statistic(x[rows, cols])  # (size, runs, tasks) -> (size,)
    return out


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile bootstrap confidence interval."""

    point: float
    low: float
    high: float
    confidence: float

    def to_dict(self) -> dict[str, float]:
        return {"point": self.point, "low": self.low, "high": self.high, "confidence": self.confidence}

    def __str__(self) -> str:
        return f"{self.point:.3f} [{self.low:.3f}, {self.high:.3f}]"


def interval_estimate(
    scores: np.ndarray, statistic: Statistic, reps: int = 2000, confidence: float = 0.95, seed: int | None = 0
) -> Interval:
    """`statistic` of the score matrix with a stratified-bootstrap percentile CI.

    Args:
        scores: a `(runs, tasks)` matrix.
        statistic: see `stratified_bootstrap`.
        reps: bootstrap replicates (rliable's default is 50,000; 2,000 already pins 95 % bounds to
            about ±0.01 on 0..1 scores).
        confidence: the interval's coverage, in (0, 1).
        seed: seeds the resampling.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = _matrix(scores)
    replicates = stratified_bootstrap(x, statistic, reps=reps, seed=seed)
    alpha = 1.0 - confidence
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Interval(float(statistic(x)), float(low), float(high), confidence)


def _matrix(scores: np.ndarray) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("scores must be finite")
    return x
