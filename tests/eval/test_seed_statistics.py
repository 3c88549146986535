"""Seed-level comparison of learning runs: the paired difference over seeds, its bootstrap CI over
seeds, the minimum detectable difference, against hand cases and a plain-loop reference."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_llm.eval import paired_seed_comparison, seed_mean_interval
from rlgym_llm.eval.metrics import student_t_quantile


def test_student_t_quantiles_match_the_table():
    # two-sided 95 % and one-sided 80 % critical values from a t table
    for df, t975, t80 in [(1, 12.7062, 1.3764), (2, 4.3027, 1.0607), (4, 2.7764, 0.9410), (30, 2.0423, 0.8538)]:
        assert student_t_quantile(0.975, df) == pytest.approx(t975, abs=2e-4)
        assert student_t_quantile(0.8, df) == pytest.approx(t80, abs=2e-4)
    assert student_t_quantile(0.025, 2) == pytest.approx(-4.3027, abs=2e-4)


def test_t_quantiles_agree_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 5, 9, 20):
        for p in (0.6, 0.8, 0.9, 0.975, 0.995):
            assert student_t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), abs=1e-5)


def test_two_seeds_by_hand():
    # d = a - b = [0.1, 0.3]: resampling 2 seeds gives means 0.1 (p 1/4), 0.2 (1/2), 0.3 (1/4),
    # so the 95 % percentile interval is [0.1, 0.3]; sd = 0.1414214;
    # MDD = (t_.975,1 + t_.8,1) * sd / sqrt(2) = (12.7062 + 1.3764) * 0.1 = 1.40826
    c = paired_seed_comparison([0.6, 0.8], [0.5, 0.5])
    assert c.n == 2 and c.diff == pytest.approx(0.2)
    assert (c.low, c.high) == pytest.approx((0.1, 0.3))
    assert c.sd == pytest.approx(0.1414214) and c.mdd == pytest.approx(1.40826, abs=1e-4)
    # the paired t interval: 0.2 -/+ 12.7062 * 0.1 = [-1.07062, 1.47062]: two seeds prove nothing, although
    # the bootstrap interval [0.1, 0.3] excludes 0
    assert (c.t_low, c.t_high) == pytest.approx((-1.07062, 1.47062), abs=1e-4)
    assert c.verdict("turn_grpo", "GRPO").startswith("no significant difference (detectable with 2 seeds: 1.408)")
    # five seeds, differences [0.04, 0.05, 0.06, 0.05, 0.05]: sd sqrt(0.0002 / 4) = 0.0070711,
    # t interval 0.05 -/+ 2.7764 * 0.0070711 / sqrt(5) = [0.0412203, 0.0587797]
    c5 = paired_seed_comparison([0.54, 0.65, 0.76, 0.55, 0.65], [0.5, 0.6, 0.7, 0.5, 0.6])
    assert (c5.t_low, c5.t_high) == pytest.approx((0.0412203, 0.0587797), abs=1e-5)
    assert c5.verdict("turn_grpo", "GRPO") == "turn_grpo beats GRPO"


def test_pairing_matters():
    # Seeds differ a lot, the method adds a steady +0.05 on each: paired, that is a clear win; the
    # unpaired spread of either method alone (0.2 .. 0.8) would hide it.
    b = np.array([0.2, 0.5, 0.8, 0.35, 0.65])
    c = paired_seed_comparison(b + 0.05, b)
    assert c.low == pytest.approx(0.05) and c.high == pytest.approx(0.05) and c.sd == pytest.approx(0.0, abs=1e-12)
    tie = paired_seed_comparison(b, b[::-1])
    assert tie.low < 0 < tie.high and tie.verdict().startswith("no significant difference")


def loop_comparison(a, b, confidence, power, reps, seed):
    """The same statistics, one seed and one replicate at a time."""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    rows = np.random.default_rng(seed).integers(0, n, size=(reps, n))
    boot = sorted(sum(d[i] for i in row) / n for row in rows)
    alpha = 1 - confidence

    def pct(q):  # numpy's linear percentile
        pos = q / 100 * (reps - 1)
        lo = math.floor(pos)
        return boot[lo] + (boot[min(lo + 1, reps - 1)] - boot[lo]) * (pos - lo)

    mean = sum(d) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1))
    t = student_t_quantile(1 - alpha / 2, n - 1) + student_t_quantile(power, n - 1)
    half = student_t_quantile(1 - alpha / 2, n - 1) * sd / math.sqrt(n)
    return mean, pct(100 * alpha / 2), pct(100 * (1 - alpha / 2)), mean - half, mean + half, sd, t * sd / math.sqrt(n)


@settings(deadline=None, max_examples=25)
@given(
    st.integers(2, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0, 1), min_size=n, max_size=n), st.lists(st.floats(0, 1), min_size=n, max_size=n)
        )
    ),
    st.sampled_from([0.9, 0.95]),
    st.integers(0, 5),
)
def test_matches_loop(pair, confidence, seed):
    a, b = pair
    c = paired_seed_comparison(a, b, confidence=confidence, reps=500, seed=seed)
    want = loop_comparison(a, b, confidence, 0.8, 500, seed)
    assert (c.diff, c.low, c.high, c.t_low, c.t_high, c.sd, c.mdd) == pytest.approx(want, abs=1e-9)


def test_one_seed_cannot_detect_anything_and_bad_input_is_refused():
    c = paired_seed_comparison([0.9], [0.1])
    assert c.mdd == math.inf and c.low == c.high == pytest.approx(0.8)
    with pytest.raises(ValueError, match="aligned by seed"):
        paired_seed_comparison([0.1, 0.2], [0.1])
    iv = seed_mean_interval([0.2, 0.4])
    assert iv.point == pytest.approx(0.3) and (iv.low, iv.high) == pytest.approx((0.2, 0.4))


def test_task_outcome_cells_and_the_run_task_bootstrap():
    import numpy as np

    from rlgym_llm.eval import run_task_bootstrap, task_outcome_cells

    # run 0: task x +1 (two samples after, one before), task y 0; run 1: x 0, y -0.5
    cells = task_outcome_cells(
        [({"y": [1], "x": [1, 1]}, {"x": [0], "y": [1]}), ({"x": [1], "y": [0, 1]}, {"x": [1], "y": [1]})]
    )
    assert cells.tolist() == [[1.0, 0.0], [0.0, -0.5]]  # columns in sorted key order: x, y
    ci = run_task_bootstrap(cells, reps=2000)
    assert ci.point == pytest.approx(0.125) and ci.low < 0.125 < ci.high
    assert ci.low >= -0.5 and ci.high <= 1.0  # a mean of cells can leave neither end
    with pytest.raises(ValueError, match="different test tasks"):
        task_outcome_cells([({"x": [1]}, {"x": [0]}), ({"z": [1]}, {"z": [0]})])
    with pytest.raises(ValueError, match="non-empty"):
        run_task_bootstrap(np.zeros((0, 3)))
