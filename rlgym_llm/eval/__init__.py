"""Evaluation: metrics (pass@k, IQM with bootstrap CIs, seed-level comparisons of learning runs), the
evaluation runner, reports and plots."""

from rlgym_llm.eval.metrics import PairedComparison, paired_seed_comparison, seed_mean_interval

__all__ = ["PairedComparison", "paired_seed_comparison", "seed_mean_interval"]
