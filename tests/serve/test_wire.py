"""The wire format of served envs: JSON-safe values and actions that round-trip exactly."""

import json

import numpy as np

from rlgym_llm.core.types import AssistantTurn, ToolCall
from rlgym_llm.serve.wire import action_from_payload, action_payload, task_hash, to_json


def test_to_json_makes_every_value_json_safe():
    value = {1: (np.int64(3), np.float32(0.5)), "a": np.array([[1, 2]]), "b": b"\x00\x01", "c": float("nan")}
    out = to_json(value)
    assert out == {"1": [3, 0.5], "a": [[1, 2]], "b": "AAE=", "c": "nan"}
    json.dumps(out, allow_nan=False)


def test_an_assistant_turn_round_trips_with_its_parse_errors():
    turn = AssistantTurn("hi", (ToolCall("add", {"amount": 2}, "c1"),), ("tool call #1 has no tool name",))
    p = action_payload(turn)
    back = action_from_payload(p["content"], p["tool_calls"], p["parse_errors"], None)
    assert back == turn


def test_other_actions_travel_raw_and_bad_calls_become_parse_errors():
    assert action_payload("text") == {"raw": "text"}
    assert action_payload({"role": "user"}) == {"raw": {"role": "user"}}
    turn = action_from_payload("", [{"function": {"name": "add", "arguments": "{bad"}}], [], None)
    assert turn.tool_calls == () and "not valid JSON" in turn.parse_errors[0]


def test_task_hash_is_the_rollout_managers():
    from rlgym_llm.rollout.manager import task_facts

    class _Env:
        class task:
            @staticmethod
            def content_key():
                return "What is 2+2?"

    assert task_facts(_Env(), {})["task_key"] == task_hash("What is 2+2?")
