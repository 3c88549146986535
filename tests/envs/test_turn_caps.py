"""A turn of 1000 tool calls runs at most `max_tool_calls` of them and returns at most `max_observation_chars`.

Figures (time and characters per flooded turn, every env): `pytest tests/envs/test_turn_caps.py -s -q`.
"""

import time

import pytest

import rlgym_llm
from rlgym_llm import AssistantTurn, ToolCall
from rlgym_llm.core.errors import ConfigError

FLOOD = 1000
OBSERVATION_CAP = 32_000


def _largest_swe_file(env):
    files = env.unwrapped._instance.files
    return max(files, key=lambda p: len(files[p]))


def _search_doc(env):
    docs = env.unwrapped.docs
    return max(docs, key=lambda d: len(docs[d].text))


# env id, kwargs, the expected cap, a heavy call given the env after reset
CASES = {
    "math": ("rlgym/Math-v0", {}, 16, lambda env: ("calculator", {"expression": "(3 + 4) * 2 ^ 10"})),
    "search": ("rlgym/Search-v0", {}, 16, lambda env: ("open", {"doc_id": _search_doc(env)})),
    "gui": ("rlgym/GUI-v0", {}, 16, lambda env: ("scroll", {"direction": "down"})),
    "swe": ("rlgym/SWE-v0", {}, 16, lambda env: ("read_file", {"path": _largest_swe_file(env)})),
    "code": (
        "rlgym/Code-v0",
        {},
        8,
        lambda env: ("run_examples", {"code": "import sys\nsys.stdout.write('y' * 50000)\n"}),
    ),
}


def flood(env_id, kwargs, make_call, n=FLOOD):
    env = rlgym_llm.make(env_id, **kwargs)
    try:
        env.reset(seed=0)
        name, arguments = make_call(env)
        turn = AssistantTurn(tool_calls=tuple(ToolCall(name, arguments, id=f"c{i}") for i in range(n)))
        start = time.perf_counter()
        messages, _, _, _, info = env.step(turn)
        elapsed = time.perf_counter() - start
    finally:
        env.close()
    return messages, info, elapsed


@pytest.mark.parametrize("name", list(CASES))
def test_a_flood_of_calls_is_capped_in_calls_and_characters(name):
    env_id, kwargs, cap, make_call = CASES[name]
    messages, info, elapsed = flood(env_id, kwargs, make_call)
    tool_messages = [m for m in messages if m["role"] == "tool"]
    chars = sum(len(m["content"]) for m in messages)
    print(f"\n{name}: {FLOOD} calls -> {len(tool_messages)} run, {chars} characters, {elapsed:.2f} s")
    assert len(tool_messages) == cap
    assert f"{FLOOD - cap} more tool call(s) were not run: at most {cap} tool calls" in messages[-1]["content"]
    assert chars <= OBSERVATION_CAP
    assert info["signals"]["tool_ok"] is False
    assert elapsed < 60, "only the capped calls run"


def test_caps_are_configurable_per_env():
    messages, _, _ = flood("rlgym/Math-v0", {"max_tool_calls": 3}, CASES["math"][3], n=10)
    assert sum(m["role"] == "tool" for m in messages) == 3
    read = CASES["swe"][3]
    messages, _, _ = flood("rlgym/SWE-v0", {"max_observation_chars": 2000}, read, n=4)
    assert sum(len(m["content"]) for m in messages) <= 2000
    assert "characters cut: an observation holds at most 2000 characters" in messages[0]["content"]


@pytest.mark.parametrize("kwargs", [{"max_tool_calls": 0}, {"max_tool_calls": "8"}, {"max_observation_chars": 10}])
def test_bad_caps_are_config_errors(kwargs):
    with pytest.raises(ConfigError, match=next(iter(kwargs))):
        rlgym_llm.make("rlgym/Math-v0", **kwargs)
