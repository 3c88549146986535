"""A seeded random agent for any env: random text, or random calls to the env's tools.

It is the floor every learning curve should beat, and a fuzzer: its tool calls follow the tools'
JSON schemas (names and argument types) but carry random values, with a few malformed ones.

    agent = RandomAgent(seed=0)
    messages, info = env.reset(seed=0)
    agent.reset(messages, info)                    # reads the tool schemas from info["tools"]
    turn = agent.act(messages, info)
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import numpy as np

from rlgym_llm.core.types import AssistantTurn, Messages, ToolCall

_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " "


class RandomAgent:
    """Act at random: text, or tool calls with schema-shaped random arguments.

    Args:
        seed: seed of the agent's own RNG (the same seed gives the same actions).
        p_text: probability of answering with text only.
        p_malformed: probability that a tool call gets arguments that ignore the schema.
        max_text: the longest random text.
    """

    def __init__(self, seed: int | None = None, p_text: float = 0.2, p_malformed: float = 0.1, max_text: int = 16):
        self.rng = np.random.default_rng(seed)
        self.p_text, self.p_malformed, self.max_text = p_text, p_malformed, max_text
        self.tools: list[Mapping[str, Any]] = []
        self._calls = 0

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        """Read the env's tools (OpenAI format, as in `env.reset`'s `info["tools"]`)."""
        tools = (info or {}).get("tools") or []
        self.tools = [t.get("function", t) for t in tools]

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        text = self._text()
        if not self.tools or self.rng.random() < self.p_text:
            return AssistantTurn(content=text)
        calls = []
        for _ in range(int(self.rng.integers(1, 3))):
            tool = self.tools[int(self.rng.integers(len(self.tools)))]
            if self.rng.random() < self.p_malformed:
                args: dict[str, Any] = {self._text() or "x": self._text()}
            else:
                props = (tool.get("parameters") or {}).get("properties") or {}
                args = {name: self._value(schema) for name, schema in props.items()}
            self._calls += 1
            calls.append(ToolCall(name=str(tool.get("name", "")), arguments=args, id=f"random_{self._calls}"))
        return AssistantTurn(content=text, tool_calls=tuple(calls))

    def _text(self) -> str:
        n = int(self.rng.integers(0, self.max_text + 1))
        return "".join(_ALPHABET[i] for i in self.rng.integers(0, len(_ALPHABET), size=n))

    def _value(self, schema: Mapping[str, Any]) -> Any:
        kind = schema.get("type")
        if "enum" in schema:
            return schema["enum"][int(self.rng.integers(len(schema["enum"])))]
        if kind == "integer":
            return int(self.rng.integers(-100, 101))
        if kind == "number":
            return float(self.rng.normal(0, 50))
        if kind == "boolean":
            return bool(self.rng.integers(2))
        if kind == "array":
            return [self._value(schema.get("items") or {}) for _ in range(int(self.rng.integers(0, 3)))]
        if kind == "object":
            return {}
        return self._text()
