"""Every registered env keeps the contract: `check_env` passes on each id (DESIGN: every shipped env, in CI)."""

import pytest

import rlgym_llm

# The shipped ids (test modules register fault-injecting envs of their own in other namespaces).
# rlgym/Remote-v0 needs a server: tests/serve/test_serve.py checks it against a served env.
ENV_IDS = [e for e in rlgym_llm.list_envs(namespace="rlgym") if e != "rlgym/Remote-v0"]


def test_the_built_in_envs_are_registered():
    assert "rlgym/Math-v0" in ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_registered_env_passes_check_env(env_id):
    report = rlgym_llm.check_env(env_id)  # raises EnvCheckError listing every failure
    assert report.ok
