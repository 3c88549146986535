"""Rollout: policies (token in, token out), tokenization, the async manager, the Ray runner."""
