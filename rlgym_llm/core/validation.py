"""Check plain data (a composed config, keyword arguments) against a dataclass and build it.

One validator for every settings class of the project (run configs, credit-method parameters):

    cfg = load({"lr": 1e-4, "schedule": "cosine"}, OptimConfig, "trainer.optim.")

It reports every problem at once, each with its fix: unknown keys (with the closest valid name, or
the nested section that holds the key), values of the wrong type, and values outside a field's
choices (a `Literal[...]` annotation, or `field(metadata={"choices": ...})` when the choices are
only known at run time) with the closest choice. Range rules stay with the dataclass itself, in
its `__post_init__`; their errors are collected too, prefixed with the section's path.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeGuard, TypeVar

from rlgym_llm.core.errors import ConfigError

T = TypeVar("T")

_SCALARS: dict[Any, Callable[[Any], bool]] = {
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    bool: lambda v: isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    dict: lambda v: isinstance(v, Mapping),
    list: lambda v: isinstance(v, (list, tuple)),
    tuple: lambda v: isinstance(v, (list, tuple)),
}


def _edits(a: str, b: str) -> int:
    """Edit distance counting a swap of neighbours as one edit (`gpro` -> `grpo`: 1)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def closest(value: Any, options: Iterable[Any]) -> str | None:
    """The option a typo most likely meant: fewest edits (swaps count once), then difflib's
    similarity; None when nothing is close."""
    text, names = str(value), [str(o) for o in options]
    if not names:
        return None
    stems = [n for n in names if len(n) > 1 and (text.startswith(n) or n.startswith(text))]
    if stems:  # `tau_typo` -> `tau`, `turn` -> `turn_grpo`
        return max(stems, key=len)
    best = min(names, key=lambda n: (_edits(text.lower(), n.lower()), -difflib.SequenceMatcher(None, text, n).ratio()))
    near = _edits(text.lower(), best.lower()) <= max(1, len(text) // 3)
    return best if near or difflib.get_close_matches(text, [best], n=1) else None


def did_you_mean(value: Any, options: Iterable[Any], quote: str = "'") -> str:
    """` (did you mean 'x'?)` for the closest option, or an empty string."""
    close = closest(value, options)
    return f" (did you mean {quote}{close}{quote}?)" if close else ""


def choices(hint: Any, meta: Mapping[str, Any] | None = None) -> tuple[Any, ...] | None:
    """The allowed values of a field: its `metadata["choices"]` (a sequence or a zero-argument
    callable), or the arguments of a `Literal` annotation (also inside `X | None`); None: any value."""
    if meta and "choices" in meta:
        found = meta["choices"]
        return tuple(found() if callable(found) else found)
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    inner = optional_inner(hint)
    return choices(inner) if inner is not None else None


def _is_section(hint: Any) -> TypeGuard[type]:
    """A nested dataclass (a config section), as opposed to a dataclass instance or a plain type."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def find_key(schema: type, key: str, prefix: str = "", depth: int = 3) -> list[str]:
    """Paths of fields named `key` in the sections nested below `schema` (for "did you mean" hints
    when a setting lives one section deeper, e.g. `trainer.lr` -> `trainer.optim.lr`)."""
    found: list[str] = []
    if depth == 0 or not _is_section(schema):
        return found
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        node = optional_inner(hints[f.name]) or hints[f.name]
        if _is_section(node):
            if key in {g.name for g in dataclasses.fields(node)}:
                found.append(f"{prefix}{f.name}.{key}")
            found += find_key(node, key, f"{prefix}{f.name}.", depth - 1)
    return found


def unknown_key(schema: type, key: str, path: str) -> str:
    """The problem line of a key that `schema` (the section at `path`) does not have."""
    names = [f.name for f in dataclasses.fields(schema)]
    close = closest(key, names)
    deeper = find_key(schema, key, path)
    if deeper:  # the same name one section deeper: the setting moved there
        hint = f"did you mean `{deeper[0]}`?"
    elif close:
        hint = f"did you mean `{path}{close}`?"
    else:
        hint = f"valid keys: {', '.join(names)}"
    return f"unknown key `{path}{key}`: {hint}"


def check(data: Any, schema: type, path: str = "") -> list[str]:
    """Every problem of `data` (a mapping) against the dataclass `schema`; `path` prefixes the keys."""
    fatal: list[str] = []
    wrong_choice: list[str] = []
    _check(data, schema, path, fatal, wrong_choice)
    return fatal + wrong_choice


def _check(data: Any, schema: type, path: str, fatal: list[str], wrong_choice: list[str]) -> None:
    """Sort the problems into `fatal` (the data cannot be built: unknown keys, wrong types) and
    `wrong_choice` (it can, with a value outside its choices)."""
    if not isinstance(data, Mapping):
        fatal.append(f"`{path.rstrip('.') or 'config'}` must be a mapping, got {data!r} ({type(data).__name__})")
        return
    hints = typing.get_type_hints(schema)
    fields = {f.name: f for f in dataclasses.fields(schema)}
    for key, value in data.items():
        if key not in fields:
            fatal.append(unknown_key(schema, str(key), path))
        else:
            _check_value(value, hints[key], f"{path}{key}", fields[key].metadata, fatal, wrong_choice)


def optional_inner(hint: Any) -> Any:
    """`X` of an `X | None` annotation (None for any other annotation)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(inner) == 1 and type(None) in typing.get_args(hint):
            return inner[0]
    return None


def _check_value(
    value: Any, hint: Any, path: str, meta: Mapping[str, Any] | None, fatal: list[str], wrong_choice: list[str]
) -> None:
    if _is_section(hint):
        _check(value, hint, f"{path}.", fatal, wrong_choice)
        return
    inner = optional_inner(hint)
    if inner is not None:
        if value is not None:
            _check_value(value, inner, path, meta, fatal, wrong_choice)
        return
    allowed = choices(hint, meta)
    if allowed is not None:
        if not (value in allowed and type(value) in {type(a) for a in allowed}):
            listed = ", ".join(str(a) for a in allowed)
            wrong_choice.append(f"`{path}={value}` is not one of {listed}{did_you_mean(value, allowed)}")
        return
    origin = typing.get_origin(hint) or hint
    test = _SCALARS.get(origin)
    if test is None:
        return  # Any, unions of several types: not checked here
    if not test(value):
        name = getattr(origin, "__name__", str(hint))
        fatal.append(f"`{path}` must be {name}, got {value!r} ({type(value).__name__}); set `{path}=<{name}>`")
        return
    args = typing.get_args(hint)
    if origin in (list, tuple) and args:
        items = args[:1] if origin is list or (len(args) == 2 and args[1] is Ellipsis) else args
        if origin is tuple and len(items) > 1 and len(items) != len(value):
            fatal.append(f"`{path}` must hold {len(items)} values, got {len(value)}")
            return
        kinds = items * len(value) if len(items) == 1 else items
        for k, (v, h) in enumerate(zip(value, kinds)):
            _check_value(v, h, f"{path}[{k}]", None, fatal, wrong_choice)


def build(data: Mapping[str, Any], schema: type[T], path: str = "") -> T:
    """`schema` built from checked data: nested sections built, lists turned into tuples where a
    field is a tuple. The dataclasses' own checks (`__post_init__`) run in every section, and every
    error they raise is collected.

    Raises:
        ConfigError: the problems found by the dataclasses' checks, each prefixed with its section.
    """
    problems: list[str] = []
    built: T = _build(data, schema, path, problems)
    if problems:
        raise ConfigError(problems)
    return built


def _build(data: Mapping[str, Any], schema: type, path: str, problems: list[str]) -> Any:
    hints = typing.get_type_hints(schema)
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        hint = optional_inner(hints[key]) or hints[key]
        if _is_section(hint) and value is not None:
            kwargs[key] = _build(value, hint, f"{path}{key}.", problems)
        elif typing.get_origin(hint) is tuple and isinstance(value, list):
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    try:
        return schema(**kwargs)
    except ConfigError as e:
        problems += [_qualify(p, schema, path) for p in e.problems]
    except (ValueError, TypeError) as e:
        problems += [_qualify(p, schema, path) for p in str(e).split("; ")]
    return _unchecked(schema, kwargs)


def _unchecked(schema: type, kwargs: dict[str, Any]) -> Any:
    """`schema` with these values and its own checks skipped: the rules between sections still read
    it, so a config with a bad section reports those rules' problems in the same error."""
    obj: Any = object.__new__(schema)
    for f in dataclasses.fields(schema):
        if f.name in kwargs:
            value = kwargs[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            value = None
        object.__setattr__(obj, f.name, value)
    return obj


def _qualify(problem: str, schema: type, path: str) -> str:
    """A dataclass's own message with its section's path: `group_size=1: ...` at `trainer.` reads
    `trainer.group_size=1: ...`; a message that names no field reads `trainer: ...`."""
    if not path:
        return problem
    first = re.match(r"[A-Za-z_]\w*", problem)
    if first and first.group() in {f.name for f in dataclasses.fields(schema)}:
        return f"{path}{problem}"
    return f"{path.rstrip('.')}: {problem}"


def validate(data: Any, schema: type[T], path: str = "") -> tuple[T | None, list[str]]:
    """`check`, then `build`, collecting every problem: (the dataclass, or None when it could not
    be built; the problems).

    Unknown keys and wrong types stop before building. Values outside their choices and failed
    range checks do not: the object is still built (sections that failed their own checks are
    filled in unchecked), so that rules between sections can add their problems to the same list.
    """
    fatal: list[str] = []
    wrong_choice: list[str] = []
    _check(data, schema, path, fatal, wrong_choice)
    if fatal:
        return None, fatal + wrong_choice
    problems: list[str] = []
    built = _build(data, schema, path, problems)
    return built, wrong_choice + problems


def load(data: Any, schema: type[T], path: str = "") -> T:
    """The dataclass built from `data`, or a `ConfigError` listing every problem (see `validate`)."""
    built, problems = validate(data, schema, path)
    if problems or built is None:
        raise ConfigError(problems)
    return built


def _type_name(hint: Any) -> str:
    """`int | Sequence[int]`, not `typing.Union[int, collections.abc.Sequence[int]]`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join("None" if a is type(None) else _type_name(a) for a in typing.get_args(hint))
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return re.sub(r"\b(typing|collections\.abc|pathlib|os)\.", "", str(hint))


def matches(value: Any, hint: Any) -> bool:
    """Whether plain data (what a yaml file or an override gives) fits an annotation. Lenient where
    an annotation is not a plain type (Any, type variables, callables): those are not checked.
    A string fits `Sequence[X]` only when X is `str`, so `difficulty=banana` is not read letter by
    letter as a sequence of levels."""
    if hint is Any or isinstance(hint, (typing.TypeVar, str)):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if origin is typing.Literal:
        return value in args
    if hint is type(None):
        return value is None
    if origin is None and isinstance(hint, type):
        import enum
        import os
        from pathlib import PurePath

        if hint in _SCALARS:
            return _SCALARS[hint](value)
        if issubclass(hint, (PurePath, os.PathLike)):
            return isinstance(value, (str, PurePath))
        if issubclass(hint, enum.Enum):
            return isinstance(value, hint) or value in {m.value for m in hint}
        return isinstance(value, hint)
    import collections.abc as abc

    if origin in (list, tuple, set, frozenset, abc.Sequence, abc.Iterable, abc.Collection, abc.Set):
        if isinstance(value, str):
            return bool(args) and args[0] is str
        if not isinstance(value, (list, tuple, set, frozenset)):
            return False
        items = [a for a in args if a is not Ellipsis]
        if origin is tuple and len(items) > 1:
            return len(items) == len(value) and all(matches(v, h) for v, h in zip(value, items))
        return not items or all(matches(v, items[0]) for v in value)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        if not isinstance(value, Mapping):
            return False
        return len(args) != 2 or all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())
    return True  # other generics (Callable[...], custom generics): not checked here


def check_call(
    target: Callable[..., Any], kwargs: Mapping[str, Any], path: str = "", given: Iterable[str] = ()
) -> list[str]:
    """Every problem of calling `target(**kwargs)` that its signature shows: unknown keyword
    arguments (with the closest valid name), values that do not fit the annotations, required
    arguments missing. `given` names arguments supplied elsewhere (e.g. registered defaults).
    A class is checked against its constructor; `**kwargs` in the signature accepts any name."""
    import inspect

    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return []  # builtins without a signature: nothing to check against
    init = getattr(target, "__init__") if isinstance(target, type) else target  # noqa: B009  (mypy: unsound on instances)
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # an annotation that cannot be resolved (a forward ref to an optional import)
        hints = {}
    params = {name: p for name, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    problems: list[str] = []
    for key, value in kwargs.items():
        if key not in params:
            if not open_kwargs:
                names = list(params)
                hint = did_you_mean(key, names, quote="`")
                hint = hint.replace("`", f"`{path}", 1) if hint else ""
                problems.append(
                    f"unknown key `{path}{key}`{hint}; {_callable_name(target)} takes: {', '.join(names) or 'nothing'}"
                )
        elif key in hints and not matches(value, hints[key]):
            problems.append(f"`{path}{key}={value!r}` must be {_type_name(hints[key])}, got {type(value).__name__}")
    for name, p in params.items():
        if p.default is p.empty and name not in kwargs and name not in set(given):
            problems.append(f"`{path}{name}` is required by {_callable_name(target)}; set `{path}{name}=<value>`")
    return problems


def _callable_name(target: Any) -> str:
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', target)}"
