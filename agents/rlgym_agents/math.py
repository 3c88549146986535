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

import random
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
            return _calculator_turn("Let me compute this exactly.", expression)
        answer = str(task.answer)
        results = [m for m in messages if m.get("role") == "tool" and m.get("tool_call_id") == "oracle_calc"]
        if results and not results[-1]["content"].startswith("Error"):
            answer = results[-1]["content"].split("≈")[0].strip()  # "1/3 ≈ 0.333..." -> "1/3"
        return AssistantTurn(
            content=f"The answer is {answer}.",
            tool_calls=(ToolCall("submit_answer", {"answer": answer}, id="oracle_submit"),),
        )


class _SeededTeacher(MathOracleAgent):
    """The oracle with a random source drawn from the episode's seed (and the class's name), so a
    seed gives the same demonstration; subclasses add their noise."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.reset()

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        super().reset(messages, info)
        self._rng = random.Random(f"{type(self).__name__}-{self.env.unwrapped.np_random_seed}")


class MathTeacher(_SeededTeacher):
    """A noisy teacher for Math-v0's warm-up: the oracle, except that on its first turn it answers from
    memory with chance `guess_prob`, and its mental arithmetic is off by one (a wrong answer, the
    episode ends). The draw comes from the episode's seed, so a seed gives the same demonstration.

    A clone of it skips the calculator on about that share of tasks: what RL can learn here is to
    use the tool (docs/math_env.md). Generated tasks only; a dataset task is solved as the oracle does.
    """

    guess_prob = 0.3

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        super().reset(messages, info)
        self._first = True

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        first, self._first = self._first, False
        task = self.env.unwrapped.task
        if first and task.meta.get("expression") and self._rng.random() < self.guess_prob:
            guess = _off_by_one(str(task.answer), self._rng)
            if guess is not None:
                return AssistantTurn(
                    content=f"The answer is {guess}.",
                    tool_calls=(ToolCall("submit_answer", {"answer": guess}, id="oracle_submit"),),
                )
        return super().act(messages, info)


class MathRecheckTeacher(_SeededTeacher):
    """A noisy teacher for Math-v0's warm-up with the tiny model: the oracle, except that on a share
    `recheck_prob` of the episodes it never submits: after the calculator's result it calls the
    calculator again, and again, until the episode runs out of turns (reward 0).

    Its noise is a decision, not a copy: the first turn is always the oracle's calculator call (the
    digits the tiny model must learn to copy stay in the same place in every demonstration), and
    what RL can learn is to submit the result instead of re-checking it (docs/math_env.md). The draw
    comes from the episode's seed, so a seed gives the same demonstration. A task without an
    expression (a dataset task) is solved as the oracle does.
    """

    # 0.7: the clone (which copies the digits) starts near 0.3 held-out, the middle of the band RL
    # needs (docs/math_env.md)
    recheck_prob = 0.7

    def reset(self, messages: Messages | None = None, info: dict[str, Any] | None = None) -> None:
        super().reset(messages, info)
        self._recheck = self._rng.random() < self.recheck_prob

    def act(self, messages: Messages, info: dict[str, Any] | None = None) -> AssistantTurn:
        expression = self.env.unwrapped.task.meta.get("expression")
        if self._asked_calculator and self._recheck and expression:
            return _calculator_turn("Let me check it again.", expression)
        return super().act(messages, info)


def _calculator_turn(content: str, expression: str) -> AssistantTurn:
    """The oracle's calculator call (its id is how the oracle finds the result among the messages)."""
    return AssistantTurn(
        content=content, tool_calls=(ToolCall("calculator", {"expression": expression}, id="oracle_calc"),)
    )


def _off_by_one(answer: str, rng: random.Random) -> str | None:
    """An integer answer plus or minus one; None for any other answer (fractions, decimals)."""
    try:
        value = int(answer)
    except ValueError:
        return None
    return str(value + rng.choice((-1, 1)))
