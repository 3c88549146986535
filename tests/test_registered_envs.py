"""Every registered env keeps the contract: `check_env` passes on each id (DESIGN: every shipped env, in CI)."""

import pytest

import rlgym_llm

# The shipped ids (test modules register fault-injecting envs of their own in other namespaces).
ENV_IDS = rlgym_llm.list_envs(namespace="rlgym")


def test_the_built_in_envs_are_registered():
    assert "rlgym/Math-v0" in ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_registered_env_passes_check_env(env_id):
    report = rlgym_llm.check_env(env_id)  # raises EnvCheckError listing every failure
    assert report.ok
