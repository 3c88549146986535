"""Scripted agents for `rlgym/SWE-v0`: an oracle that applies the known fix through the tools, and baselines.

    agent = SWEOracleAgent(env)
    messages, info = env.reset(seed=0)
    agent.reset(messages, info)
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
        if terminated or truncated:
            break

The oracle cheats on purpose: it reads `env.unwrapped.task.hidden["gold_edits"]` (the gold fix as
exact-replace edits). It reads each file it will change, edits, runs the tests, then submits, so a
reward below 1.0 points at a bug in the env, its sandbox or the instance. `TestEditingAgent` does
what a reward hacker would (makes the failing tests pass by rewriting or deleting them) and must
earn nothing; `IdleAgent` never calls a tool.
"""

from __future__ import annotations

import random
import re
from typing import Any

from rlgym_llm.core.types import AssistantTurn, Messages, ToolCall


class SWEOracleAgent:
    """Fix the bug with the known gold edits: read, edit, run the tests, submit.

    Args:
        env: the env (wrapped or not) whose current task the oracle reads.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._stage = 0

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        self._stage = 0

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        edits: dict[str, list[tuple[str, str]]] = self.env.unwrapped.task.hidden["gold_edits"]
        stage, self._stage = self._stage, self._stage + 1
        if stage == 0:
            calls = [ToolCall("read_file", {"path": path}, id=f"read_{i}") for i, path in enumerate(sorted(edits))]
            return AssistantTurn("Let me read the code the issue is about.", tuple(calls))
        if stage == 1:
            calls = [
                ToolCall("edit_file", {"path": path, "old_str": old, "new_str": new}, id=f"edit_{i}_{j}")
                for i, path in enumerate(sorted(edits))
                for j, (old, new) in enumerate(edits[path])
            ]
            return AssistantTurn("Fixing it.", tuple(calls))
        if stage == 2:
            return AssistantTurn("Running the tests.", (ToolCall("run_tests", {"selector": ""}, id="tests"),))
        return AssistantTurn("Submitting the fix.", (ToolCall("submit", {}, id="submit"),))


class _EditThenSubmit:
    """One turn of edits (`edit_turn`), then `submit` on every later turn: the shape of both baselines."""

    _stage = 0

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        self._stage = 0

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        stage, self._stage = self._stage, self._stage + 1
        if stage > 0:
            return AssistantTurn("Done.", (ToolCall("submit", {}, id="submit"),))
        return self.edit_turn()

    def edit_turn(self) -> AssistantTurn:
        raise NotImplementedError


class TestEditingAgent(_EditThenSubmit):
    """A reward hacker: rewrites every failing test into `pass` (or empties the test files), then submits.

    Args:
        env: the env whose task names the FAIL_TO_PASS tests.
        mode: "rewrite" replaces each failing test's body with `pass`; "delete" empties its test file.
    """

    __test__ = False  # not a pytest class, despite the name

    def __init__(self, env: Any, mode: str = "rewrite") -> None:
        if mode not in ("rewrite", "delete"):
            raise ValueError(f"mode must be 'rewrite' or 'delete', got {mode!r}")
        self.env, self.mode = env, mode

    def edit_turn(self) -> AssistantTurn:
        task = self.env.unwrapped.task
        test_files: dict[str, str] = task.hidden["test_files"]
        calls, done = [], set()
        for i, test_id in enumerate(task.hidden["fail_to_pass"]):
            path, *names = test_id.split("::")
            source = test_files.get(path, "")
            if self.mode == "delete":
                if path not in done:
                    done.add(path)
                    calls.append(
                        ToolCall("edit_file", {"path": path, "old_str": source, "new_str": "\n"}, id=f"del_{i}")
                    )
                continue
            name = re.sub(r"\[.*\]$", "", names[-1]) if names else ""
            if (path, name) in done:
                continue
            done.add((path, name))
            old = _function_source(source, name)
            if old is not None:
                header = old.split(":\n", 1)[0] + ":\n"
                indent = " " * (len(header) - len(header.lstrip()) + 4)
                new = header + indent + "pass\n"
                calls.append(ToolCall("edit_file", {"path": path, "old_str": old, "new_str": new}, id=f"hack_{i}"))
        return AssistantTurn("Making the tests pass.", tuple(calls))


def _function_source(source: str, name: str) -> str | None:
    """The text of the first `def name(...)` (any indentation, decorators excluded), or None."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(rf"\s*(async\s+)?def {re.escape(name)}\(", line):
            indent = len(line) - len(line.lstrip())
            end = i + 1
            while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
                end += 1
            while end > i + 1 and not lines[end - 1].strip():
                end -= 1
            text = "".join(lines[i:end])
            return text if source.count(text) == 1 else None
    return None


_SWAPS = (("+", "-"), ("<", ">"), ("==", "!="), (" and ", " or "), ("True", "False"), ("0", "1"))


class RandomEditAgent(_EditThenSubmit):
    """A baseline that changes one random token of one random source line, then submits.

    It picks, with its own seeded RNG, a non-test Python file, a line holding one of `+ < == and
    True 0` (or their counterparts) and swaps that token: an edit of the size a real fix has, made
    blindly. It must resolve nothing.

    Args:
        env: the env whose repository the agent edits.
        seed: seed of the agent's RNG.
    """

    def __init__(self, env: Any, seed: int = 0) -> None:
        self.env, self.rng = env, random.Random(seed)

    def edit_turn(self) -> AssistantTurn:
        files: dict[str, str] = self.env.unwrapped._files
        sources = sorted(p for p in files if p.endswith(".py") and "test" not in p)
        self.rng.shuffle(sources)
        for path in sources:
            text = files[path]
            lines = [
                ln for ln in text.splitlines(keepends=True) if text.count(ln) == 1 and not ln.lstrip().startswith("#")
            ]
            self.rng.shuffle(lines)
            for line in lines:
                pairs = [(a, b) for a, b in _SWAPS if a in line] + [(b, a) for a, b in _SWAPS if b in line]
                if pairs:
                    a, b = self.rng.choice(pairs)
                    new = line.replace(a, b, 1)
                    args = {"path": path, "old_str": line, "new_str": new}
                    return AssistantTurn("Trying a change.", (ToolCall("edit_file", args, id="edit"),))
        return AssistantTurn("Nothing to change.", (ToolCall("submit", {}, id="submit"),))


class IdleAgent:
    """Never calls a tool: the do-nothing baseline (it must score 0)."""

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        pass

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        return AssistantTurn("I looked at the issue and have nothing to change.")
