"""Hostile actions for `check_env`'s fuzz: what a badly behaved policy or agent may send to `step`.

The fixed corpus covers each way an action can be wrong (wrong Python type, wrong message shape,
unknown tools, missing or mistyped arguments, garbage JSON, huge and deeply nested values, many
calls at once); random draws follow: odd text, calls with edge-case values of each argument's JSON
type, and `action_space.sample()`. Labels name each action in the checker's failure messages.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import gymnasium
import numpy as np

from rlgym_llm.core.types import AssistantTurn, ToolCall

_MAX_CALLS = 32  # tool calls in the "many calls" action: one reply each stays inside ChatSpace's 64 messages
# Quotes, brackets, control and escape codes, zero-width and bidi marks, a BOM, CJK, emoji, a private-use
# plane. No lone surrogates: decoded model output never contains them.
_ODD_CHARS = "aZ09 {}[]\"'\\\n\t\x00\x07\x1b[31m\u200b\u202e\ufeffé漢字🙂\U0010fffd"


def _text(rng: np.random.Generator, max_len: int = 80) -> str:
    n = int(rng.integers(0, max_len + 1))
    return "".join(_ODD_CHARS[i] for i in rng.integers(0, len(_ODD_CHARS), size=n))


def _value(rng: np.random.Generator, schema: Any) -> Any:
    """A value of the schema's JSON type, picked from edge cases (not necessarily a valid one)."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    options: dict[Any, list[Any]] = {
        "integer": [0, -1, 7, 10**30, int(rng.integers(-1000, 1000))],
        "number": [0.5, -1e308, math.inf, math.nan, float(rng.normal())],
        "string": ["", _text(rng), "x" * 10_000],
        "boolean": [True, False],
        "array": [[], [_text(rng, 8)], list(range(50))],
        "object": [{}, {"k": _text(rng, 8)}],
    }
    pool = options.get(kind, [None, 1, "x", [], {}])
    return pool[int(rng.integers(len(pool)))]


_WRONG = {"integer": "not a number", "number": "NaN-ish", "string": [1, 2], "boolean": "maybe", "array": 5}


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


def hostile_actions(action_space: gymnasium.Space, tools: list[dict], seed: int) -> Iterator[tuple[str, Any]]:
    """Endless `(label, action)` pairs: the fixed corpus first, then random draws.

    Args:
        action_space: the env's action space; its `sample()` supplies part of the random draws.
        tools: the env's tools in the OpenAI format (`info["tools"]` from `reset`).
        seed: seeds both the draws and `action_space`, so a failure can be replayed.
    """
    rng = np.random.default_rng(seed)
    action_space.seed(seed)
    specs = [t["function"] for t in tools] or [{"name": "tool", "parameters": {}}]
    name = specs[0]["name"]
    props = specs[0].get("parameters", {}).get("properties", {})

    def call(tool: str, args: Any) -> dict:
        return {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": tool, "arguments": args}]}

    def valid_shaped(spec: dict) -> ToolCall:
        params = spec.get("parameters", {}).get("properties", {})
        return ToolCall(spec["name"], {k: _value(rng, v) for k, v in params.items()}, id=f"c{int(rng.integers(1000))}")

    yield from [
        ("empty string", ""),
        ("whitespace", " \n\t "),
        ("random text", _text(rng)),
        ("1MB string", "x" * 1_000_000),
        ("unicode and control chars", _ODD_CHARS * 3),
        ("fake tool-call markup", f'<tool_call>{{"name": "{name}", "arguments": {{</tool_call>'),
        ("None", None),
        ("int", 17),
        ("float nan", math.nan),
        ("bytes", b"\xff\xfe"),
        ("list", ["a", 1]),
        ("empty dict", {}),
        ("dict without content", {"role": "assistant"}),
        ("dict with role user", {"role": "user", "content": "I am the user now"}),
        ("dict with int content", {"role": "assistant", "content": 5}),
        ("tool_calls not a list", {"role": "assistant", "content": "", "tool_calls": "call it"}),
        ("tool call not an object", {"role": "assistant", "content": "", "tool_calls": ["x"]}),
        ("tool call without name", {"role": "assistant", "content": "", "tool_calls": [{"arguments": {}}]}),
        ("unknown tool", call("no_such_tool", {})),
        ("unknown tool, huge name", call("t" * 100_000, {})),
        ("missing arguments", call(name, {})),
        ("wrong argument types", call(name, {k: _WRONG.get(v.get("type")) for k, v in props.items()})),
        ("extra argument", call(name, {**{k: _value(rng, v) for k, v in props.items()}, "surprise": 1})),
        ("arguments: garbage JSON string", call(name, "{not json")),
        ("arguments: JSON list string", call(name, "[1, 2]")),
        ("arguments: a list", call(name, [1, 2])),
        ("arguments: an int", call(name, 5)),
        ("arguments: deeply nested", call(name, {k: _nested(200) for k in props} or {"a": _nested(200)})),
        ("arguments: 1MB value", call(name, {k: "9" * 1_000_000 for k in props} or {"a": "9" * 1_000_000})),
        ("openai-format call", {"role": "assistant", "tool_calls": [{"function": {"name": name, "arguments": "{}"}}]}),
        ("AssistantTurn, no calls", AssistantTurn(content=_text(rng))),
        ("AssistantTurn, unknown tool", AssistantTurn(tool_calls=(ToolCall("nope", {"x": 1}, "c1"),))),
        ("AssistantTurn, duplicate call ids", AssistantTurn(tool_calls=(valid_shaped(specs[0]),) * 3)),
        (
            "AssistantTurn, many calls",
            AssistantTurn(tool_calls=tuple(valid_shaped(specs[i % len(specs)]) for i in range(_MAX_CALLS))),
        ),
    ]
    while True:
        kind = int(rng.integers(5))
        if kind == 0:
            yield "random text", _text(rng, 400)
        elif kind == 1:
            yield (
                "random tool call",
                AssistantTurn(_text(rng, 20), (valid_shaped(specs[int(rng.integers(len(specs)))]),)),
            )
        elif kind == 2:
            yield (
                "random call, unexpected argument",
                call(specs[int(rng.integers(len(specs)))]["name"], {"x": _value(rng, {})}),
            )
        else:  # action_space.sample() gets the largest share: it is what Gymnasium users reach for
            yield "action_space.sample()", action_space.sample()
