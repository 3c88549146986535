"""Scripted agents for `rlgym/Code-v0`: an oracle that submits the reference solution, and an idle agent.

    agent = CodeOracleAgent(env)
    messages, info = env.reset(seed=0)
    agent.reset(messages, info)
    turn = agent.act(messages, info)          # run_examples(reference), then submit(reference)

The oracle is allowed to cheat: it reads `env.unwrapped.task.answer`, the task's reference solution,
and goes through the tools like a model would. A reward below 1.0 points at a bug in the task set,
the harness or the grader. The idle agent never calls a tool: the floor, which must earn 0.
"""

from __future__ import annotations

from typing import Any

from rlgym_llm.core.types import AssistantTurn, Messages, ToolCall


class CodeOracleAgent:
    """Submit the task's reference solution through the env's tools.

    Args:
        env: the env (wrapped or not) whose current task the oracle reads.
        run_examples_first: call `run_examples` with the solution before submitting it (when the task
            has visible examples).
    """

    def __init__(self, env: Any, run_examples_first: bool = True) -> None:
        self.env = env
        self.run_examples_first = run_examples_first
        self._ran = False

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        self._ran = False

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        task = self.env.unwrapped.task
        if task.answer is None:
            raise ValueError(f"task {task.id!r} has no reference solution (`solution` in its task file)")
        code = str(task.answer)
        if self.run_examples_first and task.meta.get("examples") and not self._ran:
            self._ran = True
            return AssistantTurn(
                content="Let me check the examples first.",
                tool_calls=(ToolCall("run_examples", {"code": code}, id="oracle_run"),),
            )
        return AssistantTurn(
            content="Submitting my solution.", tool_calls=(ToolCall("submit", {"code": code}, id="oracle_submit"),)
        )


class IdleAgent:
    """Answers every turn with text and never calls a tool (an episode ends only by the turn limit)."""

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        pass

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        return AssistantTurn(content="I am not sure how to solve this.")
