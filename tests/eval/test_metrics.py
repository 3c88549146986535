"""pass@k, IQM and stratified bootstrap intervals against hand-computed cases and brute force."""

import itertools
from math import comb

import numpy as np
import pytest

from rlgym_llm.eval.metrics import (
    interval_estimate,
    iqm,
    mean,
    pass_at_k,
    pass_at_k_curve,
    stratified_bootstrap,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),
        (5, 5, 3, 1.0),
        (10, 3, 1, 0.3),  # k = 1 is the fraction correct
        (10, 3, 2, 1 - 21 / 45),  # 1 - C(7,2)/C(10,2)
        (4, 1, 2, 0.5),  # half of the 6 pairs contain the one correct sample
        (6, 4, 3, 1.0),  # n - c = 2 < k: every triple holds a correct sample
        (8, 2, 8, 1.0),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_equals_brute_force_over_subsets():
    for n in range(1, 8):
        for c in range(n + 1):
            outcomes = [1] * c + [0] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                brute = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_where_binomials_overflow_floats():
    # C(2000, 1000) ~ 1e600 overflows float64; the product form does not need it.
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5, abs=1e-12)
    exact = 1 - comb(1990, 1000) / comb(2000, 1000)  # Python ints are exact
    assert pass_at_k(2000, 10, 1000) == pytest.approx(exact, rel=1e-10)


def test_pass_at_k_vectorises_over_tasks():
    got = pass_at_k(np.array([4, 4, 4]), np.array([0, 1, 4]), 2)
    np.testing.assert_allclose(got, [0.0, 0.5, 1.0])


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 0), (3, 1, 4), (3, 4, 1), (3, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_curve_averages_tasks_and_skips_k_above_n():
    curve = pass_at_k_curve([4, 4], [1, 0], ks=[1, 2, 4, 8])
    assert curve == pytest.approx({1: 0.125, 2: 0.25, 4: 0.5})


def test_iqm_drops_a_quarter_at_each_end():
    # 8 scores: drop the 2 lowest and the 2 highest, average 3, 4, 5, 6.
    scores = np.array([[1.0, 100.0, 3.0, 4.0], [5.0, 6.0, -50.0, 8.0]])
    assert float(iqm(scores)) == pytest.approx(4.5)
    # 5 scores: floor(1.25) = 1 from each end.
    assert float(iqm(np.array([[0.0, 1.0, 2.0, 3.0, 10.0]]))) == pytest.approx(2.0)
    # Batch axes: one value per leading index.
    np.testing.assert_allclose(iqm(np.stack([scores, scores + 1])), [4.5, 5.5])


def test_iqm_matches_scipy_trim_mean():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    for shape in [(3, 7), (5, 10), (1, 9), (10, 1)]:
        x = rng.normal(size=shape)
        assert float(iqm(x)) == pytest.approx(stats.trim_mean(x, 0.25, axis=None), abs=1e-12)


def test_bootstrap_of_a_constant_matrix_has_zero_width():
    est = interval_estimate(np.full((4, 3), 0.7), iqm, reps=200)
    assert (est.point, est.low, est.high) == pytest.approx((0.7, 0.7, 0.7))


def test_bootstrap_two_runs_one_task_hand_computed():
    # Resampled means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: the 95 % interval is [0, 1].
    replicates = stratified_bootstrap(np.array([[0.0], [1.0]]), mean, reps=4000, seed=1)
    values, counts = np.unique(replicates, return_counts=True)
    np.testing.assert_allclose(values, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(counts / 4000, [0.25, 0.5, 0.25], atol=0.03)
    est = interval_estimate(np.array([[0.0], [1.0]]), mean, reps=4000)
    assert (est.point, est.low, est.high) == (0.5, 0.0, 1.0)


def test_bootstrap_resamples_within_tasks_only():
    # Task 0 always scores 0, task 1 always 1: any replicate keeps one of each per run, so the mean
    # stays 0.5 exactly. Resampling across tasks would move it.
    scores = np.array([[0.0, 1.0]] * 5)
    assert np.all(stratified_bootstrap(scores, mean, reps=500) == 0.5)


def test_bootstrap_is_seeded_and_narrows_with_more_runs():
    rng = np.random.default_rng(3)
    few, many = rng.random((3, 8)), rng.random((30, 8))
    assert interval_estimate(few, iqm, seed=5) == interval_estimate(few, iqm, seed=5)
    w_few = interval_estimate(few, iqm).high - interval_estimate(few, iqm).low
    w_many = interval_estimate(many, iqm).high - interval_estimate(many, iqm).low
    assert w_many < w_few


def test_bootstrap_rejects_bad_input():
    with pytest.raises(ValueError, match="runs, tasks"):
        interval_estimate(np.array([1.0, 2.0]), mean)
    with pytest.raises(ValueError, match="finite"):
        interval_estimate(np.array([[np.nan]]), mean)
    with pytest.raises(ValueError, match="confidence"):
        interval_estimate(np.ones((2, 2)), mean, confidence=1.5)
