"""Evaluation: metrics (pass@k, IQM with bootstrap CIs), the evaluation runner, reports and plots."""
