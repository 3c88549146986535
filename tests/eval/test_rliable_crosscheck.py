"""IQM, mean and their stratified-bootstrap CIs against the `rliable` package on the same data."""

import numpy as np
import pytest
from rliable import library as rly
from rliable import metrics as rly_metrics

from rlgym_llm.eval.metrics import interval_estimate, iqm, mean

CASES = {
    "continuous": np.random.default_rng(0).beta(2, 5, size=(5, 12)),
    "binary": (np.random.default_rng(1).random((8, 10)) < 0.4).astype(float),
    "skewed": np.random.default_rng(2).exponential(size=(4, 6)),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize(
    ("ours", "theirs"), [(iqm, rly_metrics.aggregate_iqm), (mean, rly_metrics.aggregate_mean)], ids=["iqm", "mean"]
)
def test_point_and_interval_match_rliable(case, ours, theirs):
    scores = CASES[case]
    np.random.seed(0)  # rliable's StratifiedBootstrap draws from NumPy's global RNG
    points, intervals = rly.get_interval_estimates(
        {"m": scores}, lambda x: np.array([theirs(x)]), reps=10_000, confidence_interval_size=0.95
    )
    est = interval_estimate(scores, ours, reps=10_000, confidence=0.95, seed=0)
    assert est.point == pytest.approx(float(points["m"][0]), abs=1e-12)
    low, high = intervals["m"][:, 0]
    # Two independent 10k-replicate bootstraps: the percentile bounds agree to Monte-Carlo error.
    scale = float(np.ptp(scores))
    assert est.low == pytest.approx(low, abs=0.01 * scale)
    assert est.high == pytest.approx(high, abs=0.01 * scale)
    assert est.low < est.point < est.high
