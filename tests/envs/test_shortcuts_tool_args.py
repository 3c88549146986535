"""Every env validates tool arguments strictly: no bool-to-int, no str-to-int coercion (issue 32).

Attack: `true` or `"3"` where an integer is expected (lax validation reads them as 1 and 3: GUI-v0 clicked
element 1 for `{"id": true}`, Ladder-v0 added 1 for `{"amount": true}`), `true` where text is expected.
The call must be refused with an error observation that names the argument, count as a failed tool call
(`tool_ok` False) and leave the episode going with its state unchanged. Control: the same call with the
right types runs.
"""

import importlib
from typing import Any

import gymnasium
import pytest

import rlgym_llm
from rlgym_llm import AssistantTurn, Tool, ToolCall, ToolError, parse_call
from rlgym_llm.testing.toy import GuessNumberEnv

# rlgym/Remote-v0 has no tools of its own: they are the served env's (tests/serve checks it against one).
ENV_IDS = sorted(set(rlgym_llm.list_envs()) - {"rlgym/Remote-v0"})
NUMBERS_AS_TEXT = {("rlgym/Math-v0", "calculator"), ("rlgym/Math-v0", "submit_answer")}
"""Fields that declare (with a `BeforeValidator`) that a JSON number is taken as its text: `{"answer": 12}`."""


def env_tools(env_id: str) -> tuple[type[Tool], ...]:
    module, name = gymnasium.spec(env_id).entry_point.split(":")
    return getattr(importlib.import_module(module), name).tools


def valid_value(schema: dict[str, Any]) -> Any:
    kinds = [schema, *schema.get("anyOf", [])]
    for kind in kinds:
        if "enum" in kind:
            return kind["enum"][0]
        if kind.get("type") == "integer":
            return kind.get("minimum", 1)
        if kind.get("type") == "string":
            return "x" * max(kind.get("minLength", 1), 1)
    raise AssertionError(f"no valid value for {schema}")


def valid_arguments(tool: type[Tool]) -> dict[str, Any]:
    return {k: valid_value(v) for k, v in tool.spec().parameters["properties"].items()}


def typed_fields(tool: type[Tool], kind: str) -> list[str]:
    props = tool.spec().parameters["properties"]
    return [k for k, v in props.items() if kind in {v.get("type"), *(a.get("type") for a in v.get("anyOf", []))}]


CASES = [(env_id, tool) for env_id in ENV_IDS for tool in env_tools(env_id)]


def test_every_env_family_is_covered():
    families = {"BugFix", "Code", "GUI", "Ladder", "Math", "SWE", "Search", "TwentyQ", "Counter"}
    assert {env_id.split("/")[1].split("-")[0] for env_id in ENV_IDS} >= families
    assert sum(bool(typed_fields(t, "integer")) for _, t in CASES) >= 8


@pytest.mark.parametrize(("env_id", "tool"), CASES, ids=[f"{e}:{t.name}" for e, t in CASES])
def test_attack_every_tool_refuses_bool_and_text_for_integers_and_bool_for_text(env_id, tool):
    args = valid_arguments(tool)
    assert isinstance(parse_call(ToolCall(tool.name, args), [tool]), tool)  # control
    for field in typed_fields(tool, "integer"):
        for bad in (True, False, str(args[field]), float(args[field])):
            result = parse_call(ToolCall(tool.name, {**args, field: bad}), [tool])
            assert isinstance(result, ToolError) and f"{field}: Input should be a valid integer" in result.message
    for field in typed_fields(tool, "string"):
        refused = [True, ["x"]] if (env_id, tool.name) in NUMBERS_AS_TEXT else [True, ["x"], 3]
        for bad in refused:
            result = parse_call(ToolCall(tool.name, {**args, field: bad}), [tool])
            assert isinstance(result, ToolError), (field, bad)


def test_guess_number_toy_refuses_coerced_guesses():
    tool = GuessNumberEnv.tools[0]
    assert isinstance(parse_call(ToolCall("guess", {"value": "500"}), [tool]), ToolError)
    assert isinstance(parse_call(ToolCall("guess", {"value": 500}), [tool]), tool)


# --- per family: through env.step, the refusal is an error observation and a failed call ----------------


def one_call(name: str, **arguments: Any) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(name, arguments, id="c1"),))


def refused(env, name: str, field: str, **arguments: Any) -> dict[str, Any]:
    messages, reward, terminated, truncated, info = env.step(one_call(name, **arguments))
    assert messages[0]["content"].startswith(f"Error: invalid arguments for {name}: {field}:"), messages
    assert "valid integer" in messages[0]["content"] or "valid string" in messages[0]["content"]
    assert info["signals"]["tool_ok"] is False and reward == 0.0 and not terminated and not truncated
    return info


def test_gui_click_with_id_true_is_refused_not_element_1():
    env = rlgym_llm.make("rlgym/GUI-v0")
    env.reset(seed=0)
    start = env.unwrapped.state
    for bad in (True, "1", 1.0):
        info = refused(env, "click", "id", id=bad)
        assert info["signals"]["invalid_action"] is True and env.unwrapped.state == start
    env.step(one_call("type", id=True, text="x"))
    assert env.unwrapped.state == start
    _, _, _, _, info = env.step(one_call("click", id=1))  # control: element 1 is an app icon on the home screen
    assert info["signals"]["tool_ok"] is True and env.unwrapped.state != start


def test_ladder_add_true_is_refused_not_one():
    env = rlgym_llm.make("rlgym/Ladder-v0")
    env.reset(seed=0)
    start = env.unwrapped.counter
    for bad in (True, "2", 2.0):
        refused(env, "add", "amount", amount=bad)
        assert env.unwrapped.counter == start
    _, _, _, _, info = env.step(one_call("add", amount=2))
    assert info["signals"]["tool_ok"] is True and env.unwrapped.counter == start + 2


def test_counter_add_true_is_refused():
    env = rlgym_llm.make("toy/Counter-v0")
    env.reset(seed=0)
    start = env.unwrapped.counter
    refused(env, "add", "amount", amount=True)
    refused(env, "add", "amount", amount="1")
    assert env.unwrapped.counter == start
    _, _, _, _, info = env.step(one_call("add", amount=1))
    assert info["signals"]["tool_ok"] is True and env.unwrapped.counter == start + 1


def test_twentyq_ask_and_answer_refuse_coerced_numbers():
    env = rlgym_llm.make("rlgym/TwentyQ-v0")
    env.reset(seed=0, options={"number": 7})
    refused(env, "ask", "lo", lo=True, hi=8)
    refused(env, "ask", "hi", lo=1, hi="8")
    refused(env, "answer", "n", n="7")
    messages, _, _, _, info = env.step(one_call("ask", lo=1, hi=8))
    assert messages[0]["content"].startswith("yes") and info["signals"]["tool_ok"] is True
    _, reward, terminated, _, _ = env.step(one_call("answer", n=7))
    assert (reward, terminated) == (1.0, True)


def test_bugfix_fix_refuses_coerced_numbers():
    env = rlgym_llm.make("rlgym/BugFix-v0")
    env.reset(seed=0, options={"bugs": {2: 5}})
    program, right = list(env.unwrapped.values), env.unwrapped.expected(2)
    refused(env, "fix", "line", line=True, value=right)
    refused(env, "fix", "value", line=2, value=str(right))
    assert env.unwrapped.values == program
    _, _, _, _, info = env.step(one_call("fix", line=2, value=right))
    assert info["signals"]["tool_ok"] is True and env.unwrapped.values[1] == right and env.unwrapped.failing() == []


def test_search_k_refuses_coerced_numbers(tmp_path):
    env = rlgym_llm.make("rlgym/Search-v0", cache_dir=tmp_path)
    env.reset(seed=0)
    refused(env, "search", "k", query="river", k="3")
    refused(env, "search", "k", query="river", k=True)
    refused(env, "open", "doc_id", doc_id=True)
    messages, _, _, _, info = env.step(one_call("search", query="river", k=3))
    assert info["signals"]["tool_ok"] is True and len(messages[0]["content"].splitlines()) == 3


def test_math_answer_true_is_refused_and_a_number_is_its_text():
    env = rlgym_llm.make("rlgym/Math-v0", difficulty=1, kinds=["arithmetic"])
    env.reset(seed=0)
    refused(env, "submit_answer", "answer", answer=True)
    refused(env, "calculator", "expression", expression=False)
    answer = env.unwrapped.task.answer
    _, reward, terminated, _, _ = env.step(one_call("submit_answer", answer=int(answer)))  # declared: 12 -> "12"
    assert (reward, terminated) == (1.0, True)
