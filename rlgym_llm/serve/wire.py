"""What a served rlgym env and its clients send each other, as plain JSON (no openenv import here).

An action is the assistant's turn, in one of two shapes:

- `{"content": str, "tool_calls": [OpenAI-format calls], "parse_errors": [str]}`: an `AssistantTurn`
  (what this project's agents produce; `parse_errors` are the calls the agent could not read);
- `{"raw": <any JSON>}`: any other action (plain text, an assistant message dict, or something
  malformed), handed to `env.step` as it is, so the env answers it exactly as it would in process.

An observation carries the env's new messages, Gymnasium's `terminated`/`truncated`, the step's
`info` (signals, outcome, reset facts such as the tool schemas) and OpenEnv's `reward`/`done`.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Mapping
from typing import Any

from rlgym_llm.core.types import AssistantTurn

TASK_KEY = "task_key"
"""The reset info's content hash of the task (the rollout manager's `TASK_KEY`: same name, same hash)."""


def to_json(value: Any) -> Any:
    """`value` as JSON-safe data: tuples become lists, numpy scalars and arrays plain numbers and
    lists, bytes base64 text, keys strings, non-finite floats strings ("nan", "inf")."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_json(v) for v in items]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, torch tensors
    if callable(tolist):
        return to_json(tolist())
    item = getattr(value, "item", None)
    if callable(item):
        return to_json(item())
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_json(to_dict())
    return str(value)


def action_payload(action: Any) -> dict[str, Any]:
    """The wire form of an env action (see the module docstring)."""
    if isinstance(action, AssistantTurn):
        return {
            "content": action.content,
            "tool_calls": [c.to_openai() for c in action.tool_calls],
            "parse_errors": list(action.parse_errors),
        }
    return {"raw": to_json(action)}


def action_from_payload(content: str, tool_calls: list[Any], parse_errors: list[str], raw: Any) -> Any:
    """The env action a payload stands for: `raw` when given, else an `AssistantTurn`.

    The turn's calls are read as an agent's would be: a call that cannot be read joins
    `parse_errors`, and the env answers it with an error message.
    """
    if raw is not None:
        return raw
    coerced = AssistantTurn.coerce({"role": "assistant", "content": content, "tool_calls": list(tool_calls)})
    return AssistantTurn(coerced.content, coerced.tool_calls, (*coerced.parse_errors, *parse_errors))


def task_hash(content_key: Any) -> str:
    """The content hash the rollout manager records for a task (`rollout.manager.task_facts`)."""
    return hashlib.sha256(str(content_key).encode("utf-8")).hexdigest()[:16]


SESSION_CLOSED = "this session was closed by the server"
"""How the server's error message starts when the session's env was closed (idle timeout, shutdown):
a client opens a new connection (a new session) for its next reset."""
