"""The tools of `rlgym/SWE-v0` and the file operations behind them, on an in-memory tree `{path: text}`.

The env keeps the agent's working tree on the host (so listing and reading need no sandbox round
trip) and copies changed files into the sandbox before each test run. Every operation returns a
`ToolOutcome`: the text for the model and whether the call did what was asked (`ok`), which feeds
the `tool_ok` signal. Errors say how to fix the call.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import ClassVar

import pydantic

from rlgym_envs.swe.patches import occurrences
from rlgym_llm.core.tools import Tool

MAX_LIST = 300  # paths listed per call
MAX_READ_LINES = 400  # lines shown per read
MAX_LINE_CHARS = 2000
MAX_EDIT_CHARS = 50_000
MAX_FILE_CHARS = 1_000_000


class ListFiles(Tool):
    """List the repository's files under a directory, recursively (paths relative to the repository root)."""

    name: ClassVar[str] = "list_files"
    path: str = pydantic.Field(".", max_length=500, description="a directory, e.g. '.' or 'tests'")


class ReadFile(Tool):
    """Read a file with line numbers; pass start_line/end_line for a range (at most 400 lines per call)."""

    name: ClassVar[str] = "read_file"
    path: str = pydantic.Field(max_length=500, description="a file path relative to the repository root")
    start_line: int = pydantic.Field(1, ge=1, description="first line to show (1-based)")
    end_line: int | None = pydantic.Field(None, ge=1, description="last line to show (inclusive); default: to the end")


class EditFile(Tool):
    """Replace the one exact occurrence of old_str in a file with new_str.

    old_str must match the file exactly, whitespace and indentation included, and occur exactly once:
    add surrounding lines to make it unique. An empty old_str creates a new file with new_str as its text.
    """

    name: ClassVar[str] = "edit_file"
    path: str = pydantic.Field(max_length=500, description="a file path relative to the repository root")
    old_str: str = pydantic.Field(max_length=MAX_EDIT_CHARS, description="the exact text to replace")
    new_str: str = pydantic.Field(max_length=MAX_EDIT_CHARS, description="the replacement text")


class RunTests(Tool):
    """Run the repository's tests and show which pass, with tracebacks of the failures."""

    name: ClassVar[str] = "run_tests"
    selector: str = pydantic.Field(
        "",
        max_length=500,
        description="space-separated test ids, files or directories (e.g. tests/test_x.py::TestY::test_z), "
        "or a word matched against test ids; empty runs every test",
    )


class Submit(Tool):
    """Submit the repository as it is now and end the episode; hidden tests then decide the reward."""

    name: ClassVar[str] = "submit"


TOOLS: tuple[type[Tool], ...] = (ListFiles, ReadFile, EditFile, RunTests, Submit)


@dataclass(frozen=True)
class ToolOutcome:
    """What a file operation answers: the model's text, whether it succeeded, and the path it changed."""

    text: str
    ok: bool
    changed: str | None = None


def normalize_path(path: str, *, allow_root: bool = False) -> str | None:
    """The tree key of a path the model gave ('./a/b.py' -> 'a/b.py'), or None if it leaves the repository."""
    text = path.strip().replace("\\", "/")
    pure = PurePosixPath(text)
    if not text or "\x00" in text or pure.is_absolute() or ".." in pure.parts:
        return None
    key = pure.as_posix()
    if key == ".":
        return "." if allow_root else None
    return key


def _bad_path(path: str) -> ToolOutcome:
    return ToolOutcome(
        f"Error: invalid path {path[:200]!r}. Use a path relative to the repository root, e.g. 'src/module.py'.",
        ok=False,
    )


def list_files(files: MutableMapping[str, str], path: str) -> ToolOutcome:
    key = normalize_path(path, allow_root=True)
    if key is None:
        return _bad_path(path)
    if key in files:
        return ToolOutcome(f"{key} is a file; use read_file to read it.", ok=True)
    prefix = "" if key == "." else key + "/"
    found = sorted(p for p in files if p.startswith(prefix))
    if not found:
        return ToolOutcome(f"Error: no directory {key!r} in the repository. Try list_files with path '.'.", ok=False)
    shown = found[:MAX_LIST]
    more = f"\n... and {len(found) - len(shown)} more (list a subdirectory)" if len(found) > len(shown) else ""
    return ToolOutcome("\n".join(shown) + more, ok=True)


def read_file(files: MutableMapping[str, str], path: str, start: int, end: int | None) -> ToolOutcome:
    key = normalize_path(path)
    if key is None:
        return _bad_path(path)
    if key not in files:
        return ToolOutcome(f"Error: no file {key!r}. Use list_files to see the repository's files.", ok=False)
    lines = files[key].splitlines()
    if not lines:
        return ToolOutcome(f"{key} is empty.", ok=True)
    if start > len(lines):
        return ToolOutcome(f"Error: {key} has {len(lines)} lines; start_line {start} is past the end.", ok=False)
    last = min(len(lines), end if end is not None else len(lines), start + MAX_READ_LINES - 1)
    if last < start:
        return ToolOutcome(f"Error: end_line {end} is before start_line {start}.", ok=False)
    width = len(str(last))
    body = "\n".join(
        f"{n:>{width}}  {_clip_line(lines[n - 1])}" for n in range(start, last + 1)
    )  # numbered like `cat -n`, so the model can ask for ranges
    note = ""
    if last < len(lines):
        note = f"\n[lines {start}-{last} of {len(lines)}; read more with start_line={last + 1}]"
    return ToolOutcome(body + note, ok=True)


def _clip_line(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line cut]"


def edit_file(files: MutableMapping[str, str], path: str, old: str, new: str) -> ToolOutcome:
    """Exact-string replacement, or file creation when `old` is empty."""
    key = normalize_path(path)
    if key is None:
        return _bad_path(path)
    if old == "":
        if files.get(key):
            return ToolOutcome(
                f"Error: {key} exists; old_str must be the exact text to replace (an empty old_str only creates "
                "a new file).",
                ok=False,
            )
        if any(p.startswith(key + "/") for p in files):
            return ToolOutcome(f"Error: {key} is a directory.", ok=False)
        files[key] = new
        return ToolOutcome(f"Created {key} ({len(new.splitlines())} lines).", ok=True, changed=key)
    if key not in files:
        return ToolOutcome(f"Error: no file {key!r}. Use list_files to see the repository's files.", ok=False)
    text = files[key]
    found = occurrences(text, old)
    if not found:
        return ToolOutcome(
            f"Error: old_str was not found in {key}. It must match the file exactly, including whitespace and "
            "indentation; read_file the lines first and copy them.",
            ok=False,
        )
    if len(found) > 1:
        lines = ", ".join(str(text.count("\n", 0, at) + 1) for at in found[:10])
        return ToolOutcome(
            f"Error: old_str occurs {len(found)} times in {key} (at lines {lines}); include more surrounding "
            "lines so that it occurs exactly once.",
            ok=False,
        )
    if old == new:
        return ToolOutcome("Error: old_str and new_str are the same; nothing to change.", ok=False)
    updated = text[: found[0]] + new + text[found[0] + len(old) :]
    if len(updated) > MAX_FILE_CHARS:
        return ToolOutcome(f"Error: the edit would make {key} larger than {MAX_FILE_CHARS} characters.", ok=False)
    files[key] = updated
    first = text.count("\n", 0, found[0]) + 1
    shown = read_file(files, key, max(1, first - 2), first + new.count("\n") + 2).text.split("\n[lines ")[0]
    return ToolOutcome(f"Edited {key}. The changed region now reads:\n{shown}", ok=True, changed=key)
