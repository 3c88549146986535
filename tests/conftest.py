"""Shared fixtures: the project's tiny model (built once, cached under RLGYM_CACHE)."""

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir():
    pytest.importorskip("torch", reason="needs the train extra")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)
