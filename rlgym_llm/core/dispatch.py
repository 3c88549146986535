"""Tool dispatch for envs: one handler per tool, tools as plain functions, one tool-result message.

An env answers a call to tool `x` with its method `on_x(args)` (`args`: the validated `Tool` model), or
declares the tool as a typed function whose signature and docstring are the schema:

    class SumEnv(Env):
        @function_tool
        def add(self, a: int, b: int) -> str:
            '''Add two integers exactly.

            Args:
                a: first addend
                b: second addend
            '''
            return str(a + b)

A handler returns the tool message's text, or a `ToolResult` to say the call failed. `Env.run_tools` runs
a turn's calls through `dispatch`: each call is validated (a bad call becomes an error message), run, and
answered with one `tool_message`; calls past the episode's end are not run.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pydantic

from rlgym_llm.core.tools import Tool, ToolError, parse_call
from rlgym_llm.core.types import Message, ToolCall

_TOOL_ATTR = "__rlgym_tool__"


def tool_message(call: ToolCall, content: str) -> Message:
    """The `tool` message answering `call`."""
    return {"role": "tool", "content": content, "tool_call_id": call.id, "name": call.name}


@dataclass(frozen=True)
class ToolResult:
    """What a handler returns when a plain string is not enough.

    Args:
        content: the tool message's text.
        ok: whether the call succeeded (`tool_ok`); None: the call does not count either way.
    """

    content: str
    ok: bool | None = True


@dataclass
class ToolRun:
    """The calls of one turn after dispatch: one message and one result per call, in order.

    `results[i]` is True (ran), False (invalid, or its handler reported a failure) or None (not run or
    not counted, e.g. a call after the episode ended).
    """

    messages: list[Message] = field(default_factory=list)
    results: list[bool | None] = field(default_factory=list)
    parsed: list[Tool | ToolError | None] = field(default_factory=list)
    dropped: int = 0  # calls past the per-turn cap: not run, answered together by one message

    @property
    def ok(self) -> bool | None:
        """`tool_ok` of the turn: None without calls, else whether no call failed and none was dropped."""
        if self.dropped:
            return False
        return None if not self.results else all(r is not False for r in self.results)


Handler = Callable[[Any, Tool], "str | ToolResult"]


def function_tool(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Declare a function (or an env method) as a tool; its signature and docstring are the schema.

    Parameters become arguments (type hints and defaults; `Annotated[..., Field(...)]` adds checks), the
    docstring's summary the description, and its Google-style `Args:` lines the argument descriptions.
    A method decorated inside an `Env` subclass is a tool of that env; a plain function (decorated, or not
    when the defaults suffice) goes into the env's `tools` tuple. Called with the validated arguments, it returns the tool message's text or a `ToolResult`.
    """

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        setattr(f, _TOOL_ATTR, tool_from_function(f, name=name))
        return f

    return wrap(fn) if fn is not None else wrap


def tool_of(obj: Any) -> type[Tool] | None:
    """The `Tool` model that `function_tool` attached to `obj`, if any."""
    model = getattr(obj, _TOOL_ATTR, None)
    return model if isinstance(model, type) and issubclass(model, Tool) else None


_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SECTIONS = {"args", "arguments", "parameters", "returns", "raises", "example", "examples", "note"}


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {argument: description}) of a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        if not line.startswith(" ") and stripped.endswith(":") and stripped[:-1].lower() in _SECTIONS:
            section, current, indent = stripped[:-1].lower(), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if section not in ("args", "arguments", "parameters") or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        found = _ARG_LINE.match(line)
        if depth == indent and found:
            current = found.group(1)
            args[current] = found.group(2).strip()
        elif current is not None:  # a continuation line of the current argument
            args[current] = f"{args[current]} {stripped}".strip()
    return "\n".join(summary).strip(), args


def tool_from_function(fn: Callable[..., Any], name: str | None = None) -> type[Tool]:
    """A `Tool` model built from `fn`'s signature and docstring (the first parameter `self` is skipped)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    description, arg_docs = _parse_docstring(fn.__doc__ or "")
    fields: dict[str, Any] = {}
    for i, (pname, param) in enumerate(inspect.signature(fn).parameters.items()):
        if i == 0 and pname == "self":
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(f"tool {fn.__name__}: parameter {pname!r} must be a plain named parameter")
        annotation = hints.get(pname, str)
        default = ... if param.default is param.empty else param.default
        fields[pname] = (annotation, pydantic.Field(default, description=arg_docs.get(pname)))
    tool_name = name or fn.__name__
    model = pydantic.create_model(  # type: ignore[call-overload]
        f"{_camel(tool_name)}Tool", __base__=Tool, __doc__=description, __module__=fn.__module__, **fields
    )
    model.name = tool_name
    return typing.cast(type[Tool], model)


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) or "Function"


def collect_tools(cls: type, declared: tuple[Any, ...]) -> tuple[tuple[type[Tool], ...], dict[str, Handler]]:
    """An env class's tool models and function handlers: `declared` (models or function tools) plus the
    class's own `function_tool` methods, in that order. Raises TypeError on a duplicate name."""
    tools: list[type[Tool]] = []
    handlers: dict[str, Handler] = {}
    for entry in declared:
        model = tool_of(entry)
        if model is None and inspect.isfunction(entry):  # an undecorated function is a tool too
            model = tool_from_function(entry)
        if model is not None:  # a plain function: called with the arguments alone
            tools.append(model)
            handlers[model.name] = _function_handler(entry, bound=False)
        elif isinstance(entry, type) and issubclass(entry, Tool):
            tools.append(entry)
        else:
            raise TypeError(f"{cls.__name__}.tools: {entry!r} is neither a Tool model nor a function_tool")
    for attr, value in vars(cls).items():
        model = tool_of(value)
        if model is not None and model not in tools:
            tools.append(model)
            handlers[model.name] = _function_handler(attr, bound=True)
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise TypeError(f"{cls.__name__} declares the tool name(s) {duplicates} more than once")
    return tuple(tools), handlers


def _function_handler(fn: Any, bound: bool) -> Handler:
    def handle(env: Any, args: Tool) -> str | ToolResult:
        kwargs = {k: getattr(args, k) for k in type(args).model_fields}
        return getattr(env, fn)(**kwargs) if bound else fn(**kwargs)

    return handle


def dispatch(
    env: Any,
    calls: tuple[ToolCall, ...] | list[ToolCall],
    tools: tuple[type[Tool], ...],
    handlers: Mapping[str, Handler],
    ended: Callable[[], bool],
    ignored: ToolResult,
    max_calls: int,
) -> ToolRun:
    """Validate and run `calls` in order, at most `max_calls` of them (see `Env.run_tools`)."""
    run = ToolRun(dropped=max(len(calls) - max_calls, 0))
    for call in calls[:max_calls]:
        if ended():
            result, parsed = ignored, None
        else:
            parsed = parse_call(call, tools)
            if isinstance(parsed, ToolError):
                result = ToolResult(parsed.message, ok=False)
            else:
                function = handlers.get(parsed.name)
                method = getattr(env, f"on_{parsed.name}", None)
                if function is not None:
                    out = function(env, parsed)
                elif method is not None:
                    out = method(parsed)
                else:
                    out = env.handle_tool(parsed)
                result = out if isinstance(out, ToolResult) else ToolResult(str(out))
        run.messages.append(tool_message(call, result.content))
        run.results.append(result.ok)
        run.parsed.append(parsed)
    if run.dropped:
        text = (
            f"Error: {run.dropped} more tool call(s) were not run: at most {max_calls} tool calls are run per turn. "
            "Send fewer calls per turn."
        )
        run.messages.append({"role": "user", "content": text})
    return run


def clip_observation(messages: list[Message], limit: int) -> list[Message]:
    """`messages` with their text cut so that together they hold at most `limit` characters.

    Short messages are kept whole; the long ones share what is left equally, each keeping its beginning
    and saying how much was cut (a shorter notice where a share cannot hold the full one, none where it
    cannot hold that either). Messages that fit are returned unchanged (the same list).
    """
    sizes = [len(m["content"]) if isinstance(m.get("content"), str) else 0 for m in messages]
    if sum(sizes) <= limit:
        return messages
    notices = {}
    allowance = limit
    order = sorted(range(len(messages)), key=lambda i: sizes[i])
    for rank, i in enumerate(order):
        share = allowance // (len(order) - rank)
        if sizes[i] > share:
            # the longest notice this message can get (the cut is at most its size), so that the kept text
            # plus the notice never pass the share: a notice longer than the share is not worth sending
            template = next((t for t in _CUT_NOTICES if len(t.format(cut=sizes[i], limit=limit)) <= share), "")
            notices[i] = (share - len(template.format(cut=sizes[i], limit=limit)), template)
        allowance -= min(sizes[i], share)
    out = []
    for i, message in enumerate(messages):
        if i in notices:
            n, template = notices[i]
            cut = sizes[i] - n
            message = {**message, "content": message["content"][:n] + template.format(cut=cut, limit=limit)}
        out.append(message)
    return out


_CUT_NOTICE = "\n[... {cut} characters cut: an observation holds at most {limit} characters; ask for less at a time]"
# longest first; clip_observation takes the first that fits a message's share
_CUT_NOTICES = (_CUT_NOTICE, "\n[... {cut} cut]")
