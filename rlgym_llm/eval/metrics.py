"""Evaluation statistics: unbiased pass@k, interquartile mean, stratified bootstrap confidence intervals,
and seed-level comparisons of learning runs (`paired_seed_comparison`).

NumPy only. Scores are arranged as a `(runs, tasks)` matrix, as in Agarwal et al. 2021, "Deep RL at the
Edge of the Statistical Precipice" (the `rliable` library): a column holds one task's independent runs.
`interval_estimate` takes percentiles of a stratified bootstrap that resamples runs *within each task*
(the tasks held fixed). `unit_interval_estimate` resamples whole units instead, one score each: `rlgym
eval` makes the distinct task the unit (its samples pooled into one score), so the interval of 64
episodes of 5 distinct tasks is that of 5 scores.

    >>> round(pass_at_k(n=10, c=3, k=2), 6)  # 1 - C(7, 2) / C(10, 2) = 1 - 21/45
    0.533333
    >>> float(iqm(np.array([[0.0, 1.0, 2.0, 3.0]])))  # the middle half: 1 and 2
    1.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
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


def unit_bootstrap(
    values: Sequence[float] | np.ndarray,
    statistic: Statistic,
    reps: int = 2000,
    seed: int | None = 0,
    chunk: int = 1000,
) -> np.ndarray:
    """Bootstrap replicates of `statistic`, resampling whole units (one score each) with replacement.

    The unit is what the samples are not independent within: in an evaluation, a distinct task (its
    samples, from however many seeds drew it, are pooled into one score first). The scores are read
    as a `(1, units)` matrix, so `mean` and `iqm` apply unchanged. Replicate r draws its `units`
    indices as row r of `rng.integers(0, units, size=(reps, units))`.

    Args:
        values: one score per unit.
        statistic: maps `(..., 1, units)` to `(...)`.
        reps, seed, chunk: as in `stratified_bootstrap`.
    """
    x = _matrix(np.asarray(values, dtype=np.float64).reshape(1, -1))[0]
    rng = np.random.default_rng(seed)
    out = np.empty(reps, dtype=np.float64)
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        rows = rng.integers(0, x.size, size=(size, x.size))  # (size, units): whole units, with replacement
        out[start : start + size] = statistic(x[rows][:, None, :])
    return out


def unit_interval_estimate(
    values: Sequence[float] | np.ndarray,
    statistic: Statistic = mean,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> Interval:
    """`statistic` of one score per unit with a percentile bootstrap CI that resamples units.

    With n units the interval reflects n, however many samples each unit pooled: 64 episodes of 5
    distinct tasks give the interval of 5 task scores. With few units (under ~10) a percentile
    bootstrap undercovers, and one unit gives a zero-width interval that says nothing of other units.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(values, dtype=np.float64).reshape(1, -1)
    replicates = unit_bootstrap(x[0], statistic, reps=reps, seed=seed)
    alpha = 1.0 - confidence
    low, high = np.percentile(replicates, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Interval(float(statistic(_matrix(x))), float(low), float(high), confidence)


def _matrix(scores: np.ndarray) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.size == 0:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError("scores must be finite")
    return x


# --- learning comparisons: the seed is the unit ------------------------------------------------------


def student_t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (NumPy only: the CDF integrated on a
    grid, then bisection; agrees with scipy.stats.t.ppf to ~1e-6 for p in [0.5, 0.9999])."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        grid = np.linspace(0.0, x, 20_001)
        pdf = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid**2 / df))
        return 0.5 + float(np.sum((pdf[1:] + pdf[:-1]) * np.diff(grid)) / 2)

    low, high = 0.0, 1.0
    while cdf(high) < p:
        low, high = high, high * 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if cdf(mid) < p else (low, mid)
    return (low + high) / 2


@dataclass(frozen=True)
class PairedComparison:
    """Method A vs method B over seeds, one number per run (same seed = same warm-up and task stream).

    Args:
        n: seeds compared (those both methods finished).
        diff: mean over seeds of a_s - b_s.
        low, high: percentile bootstrap CI of `diff`, resampling seeds with replacement (pairs kept).
        t_low, t_high: the paired t interval, diff -/+ t_{1-alpha/2, n-1} sd / sqrt(n). With few seeds
            the percentile bootstrap undercovers (3 seeds have 10 distinct resamples, and three
            positive differences give an interval above 0 whatever their spread), so a verdict needs
            both intervals to exclude 0.
        sd: sample std of the paired differences.
        mdd: the minimum detectable difference with n seeds: (t_{1-alpha/2} + t_{power}) * sd / sqrt(n),
            t with n - 1 degrees of freedom (a paired t-test's detectable effect); inf for n < 2.
        confidence, power: of the CI and of the MDD.
    """

    n: int
    diff: float
    low: float
    high: float
    t_low: float
    t_high: float
    sd: float
    mdd: float
    confidence: float
    power: float

    def verdict(self, name: str = "A", other: str = "B") -> str:
        """`beats`, `worse than` (both intervals exclude 0), or no significant difference (with the MDD)."""
        if self.low > 0 and self.t_low > 0:
            return f"{name} beats {other}"
        if self.high < 0 and self.t_high < 0:
            return f"{name} worse than {other}"
        return f"no significant difference (detectable with {self.n} seeds: {self.mdd:.3f})"

    def to_dict(self) -> dict[str, float]:
        keys = ("n", "diff", "low", "high", "t_low", "t_high", "sd", "mdd", "confidence", "power")
        return {k: getattr(self, k) for k in keys}


def paired_seed_comparison(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    power: float = 0.8,
    reps: int = 10_000,
    seed: int | None = 0,
) -> PairedComparison:
    """Compare two methods by the paired difference over seeds, each run summarised by one number.

    d_s = a_s - b_s for every seed s; the point estimate is mean(d); the CI resamples the n seeds with
    replacement (the pairing is kept: a seed's two runs share its warm-up and task stream), so steps of
    one run never count as independent samples; the paired t interval guards the bootstrap's
    undercoverage at few seeds; the MDD says how large a difference n seeds can detect.

    Args:
        a, b: one number per seed (e.g. held-out success at the end, or the area under a curve),
            aligned by seed.
        confidence: coverage of the CI; alpha = 1 - confidence for the MDD.
        power: the MDD's power (1 - beta).
        reps: bootstrap replicates.
        seed: seeds the resampling.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise ValueError(f"a and b must be 1-D, non-empty and aligned by seed, got shapes {x.shape}, {y.shape}")
    if not (0 < confidence < 1 and 0 < power < 1):
        raise ValueError(f"confidence and power must be in (0, 1), got {confidence}, {power}")
    d = x - y
    n = d.size
    rows = np.random.default_rng(seed).integers(0, n, size=(reps, n))
    boot = d[rows].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    if n > 1:
        t_crit = student_t_quantile(1 - alpha / 2, n - 1)
        se = sd / math.sqrt(n)
        t_low, t_high = float(d.mean()) - t_crit * se, float(d.mean()) + t_crit * se
        mdd = (t_crit + student_t_quantile(power, n - 1)) * se
    else:
        t_low, t_high, mdd = -math.inf, math.inf, math.inf
    return PairedComparison(n, float(d.mean()), float(low), float(high), t_low, t_high, sd, mdd, confidence, power)


def seed_mean_interval(
    values: Sequence[float] | np.ndarray, *, confidence: float = 0.95, reps: int = 10_000
) -> Interval:
    """The mean over seeds of one number per run, with a percentile bootstrap CI resampling seeds."""
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"values must be 1-D and non-empty, got shape {x.shape}")
    boot = x[np.random.default_rng(0).integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Interval(float(x.mean()), float(low), float(high), confidence)


def task_outcome_cells(
    pairs: Sequence[tuple[Mapping[str, Sequence[int]], Mapping[str, Sequence[int]]]],
) -> np.ndarray:
    """The (run, task) matrix of a paired comparison from per-task outcomes: for each run (a seed), a
    pair of `{task key: [1/0 per episode]}` maps, A and B (after and before RL, or a method and its
    baseline on the same seed); cell = task's success in A minus in B (its episodes averaged: one
    task is one unit however many samples it had). Tasks in sorted key order.

    Raises:
        ValueError: the runs, or A and B of one run, measured different tasks.
    """
    if not pairs:
        raise ValueError("no runs")
    keys = sorted(pairs[0][0])
    for a, b in pairs:
        if sorted(a) != keys or sorted(b) != keys:
            raise ValueError("the runs' measures hold different test tasks")
    return np.array([[np.mean(a[k]) - np.mean(b[k]) for k in keys] for a, b in pairs], dtype=np.float64)


def run_task_bootstrap(cells: np.ndarray, *, confidence: float = 0.95, reps: int = 10_000, seed: int = 0) -> Interval:
    """The mean of a (run, task) matrix with a percentile CI from a two-way bootstrap that resamples
    runs (rows) and tasks (columns) independently: the interval covers the draw of the test tasks as
    well as the seeds (an interval over seeds alone holds the tasks fixed)."""
    x = np.asarray(cells, dtype=np.float64)
    if x.ndim != 2 or 0 in x.shape:
        raise ValueError(f"cells must be a non-empty (run, task) matrix, got shape {x.shape}")
    rng = np.random.default_rng(seed)
    runs, tasks = x.shape
    boot = np.array([x[np.ix_(rng.integers(0, runs, runs), rng.integers(0, tasks, tasks))].mean() for _ in range(reps)])
    alpha = 1.0 - confidence
    low, high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)])
    return Interval(float(x.mean()), float(low), float(high), confidence)
