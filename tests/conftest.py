"""Shared fixtures: the project's tiny model (built once, cached under RLGYM_CACHE), the vLLM venv."""

import os
from pathlib import Path

import pytest

try:  # property tests check properties, not speed: no per-example deadline on a shared, loaded machine
    from hypothesis import settings

    settings.register_profile("rlgym", deadline=None)
    settings.load_profile("rlgym")
except ImportError:  # the dev extra is not installed
    pass


@pytest.fixture(scope="session")
def tiny_model_dir():
    pytest.importorskip("torch", reason="needs the train extra")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


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
