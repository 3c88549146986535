"""Gymnasium spaces for chat: observations are lists of messages, actions are assistant turns."""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from rlgym_llm.core.types import ROLES, AssistantTurn, Messages, ToolCall

_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " \n"
_MESSAGE_KEYS = {"role", "content", "name", "tool_call_id", "tool_calls"}


def _random_text(rng: np.random.Generator, max_len: int) -> str:
    n = int(rng.integers(0, max_len + 1))
    return "".join(_ALPHABET[i] for i in rng.integers(0, len(_ALPHABET), size=n))


class ChatSpace(spaces.Space[Messages]):
    """Observations: a list of chat messages (`{"role", "content"}` dicts, plus tool fields).

    Args:
        roles: roles an env may emit. Env observations never contain assistant turns by default.
        max_messages: the most messages one observation holds.
    """

    def __init__(
        self,
        roles: Sequence[str] = ("system", "user", "tool"),
        max_messages: int = 64,
        seed: int | np.random.Generator | None = None,
    ):
        unknown = set(roles) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}; roles are {ROLES}")
        self.roles = tuple(roles)
        self.max_messages = max_messages
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> Messages:
        n = int(self.np_random.integers(1, 4))
        roles = [self.roles[int(i)] for i in self.np_random.integers(len(self.roles), size=n)]
        return [{"role": role, "content": _random_text(self.np_random, 40)} for role in roles]  # type: ignore[typeddict-item]

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        for m in x:
            if not isinstance(m, Mapping) or not set(m) <= _MESSAGE_KEYS:
                return False
            if m.get("role") not in self.roles or not isinstance(m.get("content"), str):
                return False
            if any(not isinstance(m[k], str) for k in ("name", "tool_call_id") if k in m):
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChatSpace) and (other.roles, other.max_messages) == (self.roles, self.max_messages)

    def __repr__(self) -> str:
        return f"ChatSpace(roles={self.roles}, max_messages={self.max_messages})"


class ActionSpace(spaces.Space[Any]):
    """Actions: an assistant turn as text, an assistant message dict, or an `AssistantTurn`.

    `sample()` draws random turns: plain text, or tool calls to the env's tools (or unknown
    ones) with random arguments, so Gymnasium's checker and our fuzzing exercise the tool path.

    Args:
        tool_names: names of the env's tools, used by `sample()`.
    """

    def __init__(self, tool_names: Sequence[str] = (), seed: int | np.random.Generator | None = None):
        self.tool_names = tuple(tool_names)
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any | None = None, probability: Any | None = None) -> AssistantTurn:
        rng = self.np_random
        text = _random_text(rng, 60)
        if not self.tool_names or rng.random() < 0.3:
            return AssistantTurn(content=text)
        names = [*self.tool_names, "no_such_tool"]
        name = names[int(rng.integers(len(names)))]
        value: Any = [_random_text(rng, 12), int(rng.integers(-100, 100)), None, [1, 2]][int(rng.integers(4))]
        args = {_random_text(rng, 8) or "x": value}
        return AssistantTurn(content=text, tool_calls=(ToolCall(name=name, arguments=args, id="call_0"),))

    def contains(self, x: Any) -> bool:
        try:
            AssistantTurn.coerce(x)
        except ValueError:
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActionSpace) and other.tool_names == self.tool_names

    def __repr__(self) -> str:
        return f"ActionSpace(tool_names={self.tool_names})"
