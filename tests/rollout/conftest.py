"""Fixtures for the rollout tests that need the project's vLLM venv (`-m vllm`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The vLLM venv's Python. Missing venv: skip locally, fail in CI (`CI` set), where it must exist."""
    from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, find_vllm_python

    try:
        return find_vllm_python()
    except VLLMEnvMissingError as e:
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI must run the vLLM tests, but `make services` did not build the venv: {e}")
        pytest.skip(f"the project's vLLM venv is missing; build it with `make vllm-env` ({e})")
