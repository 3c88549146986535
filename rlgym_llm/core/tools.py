"""Tools declared as pydantic models, exported as JSON schemas, validated at the env boundary.

A tool is a pydantic model whose fields are the tool's arguments and whose docstring is the tool's
description; `name` is a class variable:

    class Calculator(Tool):
        '''Evaluate an arithmetic expression exactly.'''
        name: ClassVar[str] = "calculator"
        expression: str = Field(description="e.g. (3 + 4) * 2 / 7")

Model output is untrusted, so `parse_call` never raises: a bad call comes back as a `ToolError`
whose message tells the model how to fix it. Arguments are validated strictly, as the JSON they came
from: no value changes type on the way in, so `true` or `"3"` is no integer (`true` is not element 1),
`3.0` is no integer either, and a number is no string. The one widening kept is JSON's own: an integer
is a valid `float` (JSON has one number type, and `3` is the number `3.0`). A field that should take
another type declares it (e.g. a `BeforeValidator`), on purpose and visibly.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic

from rlgym_llm.core.types import ToolCall, ToolSpec

_MAX_ECHO = 200  # characters of bad input echoed back in an error message


class Tool(pydantic.BaseModel):
    """Base class of tool argument models. Unknown arguments are rejected; types are strict (see above)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True, strict=True)
    name: ClassVar[str] = ""

    @classmethod
    def spec(cls) -> ToolSpec:
        """The tool's `ToolSpec`: name, docstring as description, JSON schema of the arguments."""
        if not cls.name:
            raise TypeError(f"{cls.__name__} must set the class variable `name`")
        schema = cls.model_json_schema()
        schema.pop("title", None)
        schema.pop("description", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return ToolSpec(name=cls.name, description=inspect.cleandoc(cls.__doc__ or ""), parameters=schema)


@dataclass(frozen=True)
class ToolError:
    """A tool call the env could not run, with a message for the model."""

    call: ToolCall
    message: str


def _short(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= _MAX_ECHO else text[:_MAX_ECHO] + "..."


def _problem(err: Any) -> str:
    """One validation problem: where, what, and the value received when it is short (e.g. `got true`)."""
    where = ".".join(str(p) for p in err["loc"]) or "arguments"
    got = json.dumps(err.get("input"), default=str)
    if err["type"] in ("missing", "extra_forbidden") or len(got) > 40:
        return f"{where}: {err['msg']}"
    return f"{where}: {err['msg']}, got {got}"


def parse_call(call: ToolCall, tools: Iterable[type[Tool]]) -> Tool | ToolError:
    """Validate `call` against the env's tools: the tool's argument model, or a `ToolError`."""
    by_name = {t.name: t for t in tools}
    tool = by_name.get(call.name)
    if tool is None:
        return ToolError(
            call,
            f"Error: unknown tool {_short(call.name)!r}. Available tools: {', '.join(sorted(by_name)) or 'none'}.",
        )
    if not isinstance(call.arguments, Mapping):
        return ToolError(call, f"Error: arguments of {tool.name} must be a JSON object.")
    try:
        # strict here too, so that a model or field that turned strictness off is strict at the boundary
        return tool.model_validate(dict(call.arguments), strict=True)
    except pydantic.ValidationError as e:
        problems = "; ".join(_problem(err) for err in e.errors())
        expected = ", ".join(
            f"{k} ({v.get('type', 'any')})" for k, v in tool.spec().parameters.get("properties", {}).items()
        )
        return ToolError(
            call,
            f"Error: invalid arguments for {tool.name}: {_short(problems)}. Expected arguments: {expected}.",
        )
