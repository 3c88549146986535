"""Reverse a word and submit it with the `submit` tool."""

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from rlgym_llm import Env, Task, Tool

# No palindromes: their answer would already be in the prompt, which check_env reports as a leak.
WORDS = ("planet", "rocket", "garden", "silver", "python", "window", "bridge", "forest", "candle", "marble")


class Submit(Tool):
    """Submit your answer. This ends the episode."""

    name: ClassVar[str] = "submit"
    answer: str = Field(description="the word, reversed")


class ReverseEnv(Env):
    """Reward 1.0 when the submitted answer is the word reversed."""

    tools = (Submit,)
    no_tool_call = "Call `submit` with your answer."

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        word = str(options.get("word", WORDS[int(self.np_random.integers(len(WORDS)))]))
        return Task(id=f"reverse-{word}", prompt=f"Reverse the word '{word}', then call `submit`.", answer=word[::-1])

    def opening(self, task: Task) -> list:
        return [{"role": "user", "content": task.prompt}]

    def new_episode(self, task: Task) -> None:
        self.submitted: str | None = None

    def episode_over(self) -> bool:  # the first submission ends the episode; later calls are not run
        return self.submitted is not None

    def on_submit(self, args: Submit) -> str:
        self.submitted = args.answer
        return "Submitted."

    def outcome(self) -> dict[str, Any]:
        correct = float(self.submitted == self.task.answer)
        return {"reward": correct, "components": {"correct": correct}}
