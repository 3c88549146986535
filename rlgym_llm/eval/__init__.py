"""Evaluation: metrics (pass@k, IQM with bootstrap CIs, seed-level comparisons of learning runs), the
evaluation runner, reports and plots."""

from rlgym_llm.eval.metrics import (
    PairedComparison,
    paired_seed_comparison,
    run_task_bootstrap,
    seed_mean_interval,
    task_outcome_cells,
)

__all__ = [
    "PairedComparison",
    "paired_seed_comparison",
    "run_task_bootstrap",
    "seed_mean_interval",
    "task_outcome_cells",
]
