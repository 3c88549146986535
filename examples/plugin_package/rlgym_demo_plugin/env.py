"""Reverse a word and submit it with the `submit` tool."""

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from rlgym_llm import AssistantTurn, Env, Step, StepSignals, Task, Tool, ToolError, parse_call

# No palindromes: their answer would already be in the prompt, which check_env reports as a leak.
WORDS = ("planet", "rocket", "garden", "silver", "python", "window", "bridge", "forest", "candle", "marble")


class Submit(Tool):
    """Submit your answer. This ends the episode."""

    name: ClassVar[str] = "submit"
    answer: str = Field(description="the word, reversed")


class ReverseEnv(Env):
    """Reward 1.0 when the submitted answer is the word reversed."""

    tools = (Submit,)

    def __init__(self) -> None:
        super().__init__()
        self.submitted: str | None = None

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        word = str(options.get("word", WORDS[int(self.np_random.integers(len(WORDS)))]))
        return Task(id=f"reverse-{word}", prompt=f"Reverse the word '{word}', then call `submit`.", answer=word[::-1])

    def opening(self, task: Task) -> list:
        self.submitted = None
        return [{"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        if not turn.tool_calls:
            return Step([{"role": "user", "content": "Call `submit` with your answer."}])
        messages, ok = [], True
        for call in turn.tool_calls:
            parsed = parse_call(call, self.tools)
            if isinstance(parsed, ToolError):
                ok, text = False, parsed.message
            else:
                assert isinstance(parsed, Submit)
                self.submitted = parsed.answer if self.submitted is None else self.submitted
                text = "Submitted."
            messages.append({"role": "tool", "content": text, "tool_call_id": call.id, "name": call.name})
        done = self.submitted is not None
        reward = self.outcome()["reward"] if done else 0.0
        return Step(messages, reward=reward, terminated=done, signals=StepSignals(tool_ok=ok))

    def outcome(self) -> dict[str, Any]:
        correct = float(self.submitted == self.task.answer)
        return {"reward": correct, "components": {"correct": correct}}
