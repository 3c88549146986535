"""Unified diffs over in-memory file trees (`{path: text}`): make them, apply them, turn them into edits.

    diff = make_patch(buggy, fixed)              # the gold patch of an instance
    fixed_again = apply_patch(buggy, diff)       # SWE-bench `patch` / `test_patch` fields
    edits = replacement_edits(old_text, new_text)  # unique (old_str, new_str) pairs, for the oracle

Everything stays on the host: the sandbox image needs neither `git` nor `patch`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from rlgym_llm.core.errors import RlgymError

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(RlgymError, ValueError):
    """A diff does not parse, or does not apply to the files it names."""


def make_patch(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """A unified diff (git style `a/` and `b/` prefixes) that turns `old` into `new`."""
    chunks: list[str] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        chunks += difflib.unified_diff(
            (before or "").splitlines(keepends=True),
            (after or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if before is not None else "/dev/null",
            tofile=f"b/{path}" if after is not None else "/dev/null",
        )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in chunks)


def _strip_prefix(name: str) -> str | None:
    name = name.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    return name[2:] if name[:2] in ("a/", "b/") else name


def apply_patch(files: Mapping[str, str], diff: str) -> dict[str, str]:
    """A copy of `files` with the unified diff applied (new and deleted files included).

    Hunks are placed at their stated line when the context matches there, else at the nearest
    place where it matches (like `patch` with fuzz 0).

    Raises:
        PatchError: the diff is malformed or a hunk's context is not found.
    """
    out = dict(files)
    lines = diff.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not (lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")):
            i += 1
            continue
        source, target = _strip_prefix(lines[i][4:]), _strip_prefix(lines[i + 1][4:])
        i += 2
        path = target or source
        if path is None:
            raise PatchError("a diff header names /dev/null on both sides")
        if source is not None and source not in out:
            raise PatchError(f"the patch changes {source!r}, which does not exist")
        text = (out.get(source) or "") if source is not None else ""
        current = text.splitlines(keepends=True)
        offset = 0
        while i < len(lines) and lines[i].startswith("@@"):
            match = _HUNK.match(lines[i])
            if not match:
                raise PatchError(f"malformed hunk header {lines[i].strip()!r}")
            i += 1
            old_part: list[str] = []
            new_part: list[str] = []
            want_old = int(match.group(2)) if match.group(2) is not None else 1
            want_new = int(match.group(4)) if match.group(4) is not None else 1
            while i < len(lines) and (
                len(old_part) < want_old or len(new_part) < want_new or lines[i].startswith("\\")
            ):
                line = lines[i]
                if line.startswith("\\"):  # "\ No newline at end of file": about the previous line
                    kind = lines[i - 1][:1]
                    for part in ([old_part] if kind in " -" else []) + ([new_part] if kind in " +" else []):
                        part[-1] = part[-1].removesuffix("\n")
                elif line[:1] in (" ", "\n"):
                    old_part.append(line[1:] if line[:1] == " " else "\n")
                    new_part.append(line[1:] if line[:1] == " " else "\n")
                elif line[:1] == "-":
                    old_part.append(line[1:])
                elif line[:1] == "+":
                    new_part.append(line[1:])
                else:
                    raise PatchError(f"hunk {match.group(0)} of {path!r} is shorter than its header says")
                i += 1
            start = max(int(match.group(1)) - 1, 0) + offset if old_part else int(match.group(1)) + offset
            at = _find(current, old_part, start)
            if at is None:
                raise PatchError(f"hunk {match.group(0)} does not apply to {path!r}")
            current[at : at + len(old_part)] = new_part
            offset += len(new_part) - len(old_part)
        if target is None:
            out.pop(source or "", None)
        else:
            if source is not None and source != target:
                out.pop(source, None)
            out[target] = "".join(current)
    return out


def _find(lines: list[str], block: list[str], start: int) -> int | None:
    if not block:
        return min(start, len(lines))
    for delta in range(len(lines) + 1):
        for at in (start - delta, start + delta) if delta else (start,):
            if 0 <= at <= len(lines) - len(block) and lines[at : at + len(block)] == block:
                return at
    return None


def replacement_edits(old: str, new: str) -> list[tuple[str, str]]:
    """Exact-replace edits that turn `old` into `new`; apply them in order.

    Changed line blocks come from `difflib`; each block grows by context lines (of the text as the
    earlier edits left it) until its old text occurs exactly once. An empty `old` gives `("", new)`.
    """
    if old == new:
        return []
    if not old:
        return [("", new)]
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    current = list(a)
    edits: list[tuple[str, str]] = []
    shift = 0  # lines added by the earlier edits: block [i1, i2) of `a` sits at [i1 + shift, i2 + shift)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lo, hi = i1 + shift, i2 + shift
        text = "".join(current)
        while True:
            old_str = "".join(current[lo:hi])
            if old_str and len(occurrences(text, old_str)) == 1:
                break
            if lo == 0 and hi == len(current):
                break
            lo, hi = max(lo - 1, 0), min(hi + 1, len(current))
        replaced = current[lo : i1 + shift] + b[j1:j2] + current[i2 + shift : hi]
        edits.append((old_str, "".join(replaced)))
        current[lo:hi] = replaced
        shift += (j2 - j1) - (i2 - i1)
    return edits


def occurrences(text: str, part: str) -> list[int]:
    """Start offsets of every occurrence of `part` in `text`, overlapping ones included (str.count skips them)."""
    found, at = [], text.find(part)
    while part and at != -1:
        found.append(at)
        at = text.find(part, at + 1)
    return found
