"""A scripted oracle for `rlgym/Math-v0`: it reads the task's structure and uses the tools properly.

The agent interface used by scripted agents (the rollout manager drives LLM agents differently):

    agent.reset(messages, info)            # after env.reset: the opening messages and reset info
    turn = agent.act(messages, info)       # each turn: the env's latest new messages and info
    messages, reward, terminated, truncated, info = env.step(turn)

The oracle is allowed to cheat: it reads `env.unwrapped.task`. For a generated task it calls
`calculator` on `task.meta["expression"]` and submits the exact part of the result, so a reward
below 1.0 points at a bug in the env, the calculator or the verifier. For a dataset task (no
expression) it submits `task.answer` directly.
"""

from __future__ import annotations

from typing import Any

from rlgym_llm.core.types import AssistantTurn, Messages, ToolCall


class MathOracleAgent:
    """Solve math tasks from their ground-truth structure: calculator first, then `submit_answer`.

    Args:
        env: the env (wrapped or not) whose current task the oracle reads.
    """

    def __init__(self, env: Any) -> None:
        self.env = env
        self._asked_calculator = False

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        self._asked_calculator = False

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        task = self.env.unwrapped.task
        expression = task.meta.get("expression")
        if expression and not self._asked_calculator:
            self._asked_calculator = True
            return AssistantTurn(
                content="Let me compute this exactly.",
                tool_calls=(ToolCall("calculator", {"expression": expression}, id="oracle_calc"),),
            )
        answer = str(task.answer)
        results = [m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == "oracle_calc"]
        if results and not results[-1]["content"].startswith("Error"):
            answer = results[-1]["content"].split("≈")[0].strip()  # "1/3 ≈ 0.333..." -> "1/3"
        return AssistantTurn(
            content=f"The answer is {answer}.",
            tool_calls=(ToolCall("submit_answer", {"answer": answer}, id="oracle_submit"),),
        )
