"""One JSONL reader for every data file an env loads: a user's file is a trust boundary.

    for lineno, row in read_jsonl("tasks.jsonl"):
        ...

Every problem is a `DataFileError` naming the file and the 1-based line: a missing file, bytes that are
not UTF-8, a line that is not JSON, and JSON nested deeper than `max_depth` (which would otherwise reach
Python's recursion limit in the parser or in later code, e.g. a 100,000-deep `[[[...]]]`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import DataFileError

MAX_DEPTH = 64  # real task rows nest a few levels; this leaves room and stays far below the recursion limit


def read_jsonl(
    path: str | os.PathLike[str],
    *,
    max_depth: int = MAX_DEPTH,
    error: type[DataFileError] = DataFileError,
    problems: list[str] | None = None,
) -> list[tuple[int, Any]]:
    """The `(line number, value)` of every non-blank line of a JSONL file.

    Args:
        path: the file.
        max_depth: the deepest nesting of lists and objects accepted.
        error: the `DataFileError` subclass to raise (an env's own, e.g. `TaskFileError`).
        problems: if given, a bad line is described here and skipped, so that a loader can report every
            bad line at once; otherwise the first one raises.

    Raises:
        DataFileError: (or `error`) the file is missing or unreadable, or (without `problems`) a line is not
            UTF-8, not JSON, or nests deeper than `max_depth`.
    """
    source = Path(path)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        raise error(f"{source}: no such file") from None
    except OSError as e:
        raise error(f"{source}: cannot be read ({e.strerror or e})") from None
    rows: list[tuple[int, Any]] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        value, problem = _parse(raw, lineno == 1, max_depth)
        if problem is None:
            rows.append((lineno, value))
        elif problem:
            if problems is None:
                raise error(f"{source}:{lineno}: {problem}")
            problems.append(f"{source}:{lineno}: {problem}")
    return rows


def _parse(raw: bytes, first: bool, max_depth: int) -> tuple[Any, str | None]:
    """(value, None) for a JSON line, (None, "") for a blank one, (None, problem) for a bad one."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        where = f"byte 0x{raw[e.start]:02x} at byte {e.start + 1} of the line"
        return None, f"not UTF-8 text ({where}); save the file as UTF-8"
    if first:
        line = line.removeprefix("\ufeff")  # a byte-order mark some editors write
    if not line.strip():
        return None, ""
    try:
        value = json.loads(line)
    except RecursionError:
        return None, f"JSON nested too deeply to parse (at most {max_depth} levels)"
    except json.JSONDecodeError as e:
        return None, f"not valid JSON ({e.msg} at column {e.colno})"
    if _deeper_than(value, max_depth):
        return None, f"JSON nested more than {max_depth} levels deep"
    return value, None


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether lists/objects nest more than `limit` levels (iterative: no recursion on hostile input)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False
