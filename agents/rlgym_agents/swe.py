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


class TestEditingAgent:
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
        self._stage = 0

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        self._stage = 0

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        stage, self._stage = self._stage, self._stage + 1
        if stage > 0:
            return AssistantTurn("Done.", (ToolCall("submit", {}, id="submit"),))
        task = self.env.unwrapped.task
        test_files: dict[str, str] = task.hidden["test_files"]
        calls, emptied = [], set()
        for i, test_id in enumerate(task.hidden["fail_to_pass"]):
            path, *_, name = test_id.split("::")
            source = test_files.get(path, "")
            if self.mode == "delete":
                if path not in emptied:
                    emptied.add(path)
                    args = {"path": path, "old_str": source, "new_str": "\n"}
                    calls.append(ToolCall("edit_file", args, id=f"del_{i}"))
                continue
            header = f"def {name}(self):\n"
            if header in source:
                body = source.split(header, 1)[1].split("\n\n", 1)[0]
                old = header + body
                calls.append(
                    ToolCall(
                        "edit_file", {"path": path, "old_str": old, "new_str": header + "        pass"}, id=f"hack_{i}"
                    )
                )
        return AssistantTurn("Making the tests pass.", tuple(calls))


class IdleAgent:
    """Never calls a tool: the do-nothing baseline (it must score 0)."""

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        pass

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        return AssistantTurn("I looked at the issue and have nothing to change.")
