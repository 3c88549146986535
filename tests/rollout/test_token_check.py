"""The token sanity check catches drift between the incremental context and a fresh rendering.

The tiny-model runs (`test_tiny_model_rollouts.py`, `-m slow`) show it passes over hundreds of turns;
here an agent that loses one token of every env reply shows that it fails when it should, per mode.
"""

import logging

import pytest

import rlgym_llm
from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm import FailureKind
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.rollout.policy import SamplingParams
from rlgym_llm.testing.policies import ScriptedPolicy

GUESS = "test/TokenCheckGuess-v0"
CALL = '<tool_call>{"name": "guess", "arguments": {"value": 500}}</tool_call>'


class LossyAgent(ToolCallingAgent):
    """Drops the first token of each env reply's rendering: the context no longer matches the chat."""

    def render_continuation(self, history, new_messages, tools, completion):
        return super().render_continuation(history, new_messages, tools, completion)[1:]


def _run(agent, tokenizer, mode: str):
    config = RolloutConfig(max_turns=3, sampling=SamplingParams(max_tokens=32), token_check=mode)
    manager = RolloutManager(GUESS, agent, ScriptedPolicy(tokenizer, lambda _: CALL), config)
    return manager.run_sync([0, 1])


def test_strict_mode_fails_a_drifting_episode_as_a_policy_failure(tiny_tokenizer):
    clean = _run(ToolCallingAgent(tiny_tokenizer), tiny_tokenizer, "strict")
    assert all(not t.failures and t.metadata["token_check"]["drift"] is False for t in clean)

    lossy = _run(LossyAgent(tiny_tokenizer), tiny_tokenizer, "strict")
    assert len(lossy) == 2  # recorded, not raised
    for traj in lossy:
        (failure,) = traj.failures
        assert failure.kind is FailureKind.POLICY and failure.error_type == "TokenDriftError"
        assert traj.metadata["token_check"]["drift"] is True
        assert traj.metadata["token_check"]["first_diff_char"] is not None


def test_warn_mode_records_and_logs_drift_and_off_skips_the_check(tiny_tokenizer, caplog):
    with caplog.at_level(logging.WARNING, logger="rlgym_llm.rollout.manager"):
        warned = _run(LossyAgent(tiny_tokenizer), tiny_tokenizer, "warn")
    assert all(not t.failures and t.metadata["token_check"]["drift"] is True for t in warned)
    assert sum("token drift" in r.getMessage() for r in caplog.records) == 2

    off = _run(LossyAgent(tiny_tokenizer), tiny_tokenizer, "off")
    assert all(not t.failures and "token_check" not in t.metadata for t in off)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    import gymnasium

    rlgym_llm.register(GUESS, "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
    yield
    gymnasium.registry.pop(GUESS, None)
