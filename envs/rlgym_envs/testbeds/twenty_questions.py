"""`rlgym/TwentyQ-v0`: find a hidden number with yes/no range questions, then answer it.

    env = rlgym_llm.make("rlgym/TwentyQ-v0")            # a number from 1 to 16: 4 questions + the answer
    env = rlgym_llm.make("rlgym/TwentyQ-v0", size=32)   # 1 to 32: 5 questions

Built for the information-gain claim (IGPO): the prompt is the same for every task, so the answer
cannot be read or guessed from it (a blind answer is right with probability 1/size); each question
`ask(lo, hi)` that splits the remaining candidates halves them, so an informative question raises the
probability of the right answer, and an answer given before the candidates are down to one is a
guess.

Rules:
- `ask(lo, hi)` is answered `yes` or `no` (is lo <= number <= hi?), followed by the remaining
  candidates when they form a range (`yes: the number is from 5 to 8.`, `... the number is 7.`).
- `answer(n)` ends the episode: reward 1.0 when n is the number, else 0.0.
- Signals: `tool_ok`, `progress` (bits of the `log2(size)` learned so far; 1.0 after a right answer),
  `state_key` (the candidate range, e.g. `5-8`, or the candidate set), `reward_components`
  (`correct`), and the extra `questions` (asks so far).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlgym_llm.core.dispatch import function_tool
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals


class TwentyQuestionsEnv(Env):
    """Find the hidden number in [1, size] with `ask(lo, hi)`, then `answer(n)`.

    Args:
        size: the number is drawn uniformly from 1..size (2 to 1024).
        max_tool_calls, max_observation_chars: see `rlgym_llm.Env`.
    """

    reward_range = (0.0, 1.0)
    no_tool_call = "Use the `ask` and `answer` tools."

    def __init__(self, size: int = 16, max_tool_calls: int = 16, max_observation_chars: int = 32_000) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars)
        if not 2 <= size <= 1024:
            raise ConfigError([f"size must be in [2, 1024], got {size}"])
        self.size = size
        self.candidates: set[int] = set()
        self.answered: int | None = None
        self.questions = 0

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        n = int(options.get("number", self.np_random.integers(1, self.size + 1)))
        if not 1 <= n <= self.size:
            raise ValueError(f"options['number'] must be in [1, {self.size}], got {n}")
        prompt = (
            f"I am thinking of a whole number from 1 to {self.size}. Ask `ask(lo, hi)` to learn whether it is "
            "between lo and hi (inclusive), then give it with `answer(n)`."
        )
        return Task(id=f"twentyq-{self.size}-{n}", prompt=prompt, answer=n)

    def new_episode(self, task: Task) -> None:
        self.candidates = set(range(1, self.size + 1))
        self.answered, self.questions = None, 0

    def opening(self, task: Task) -> Messages:
        return [{"role": "user", "content": task.prompt}]

    def episode_over(self) -> bool:
        return self.answered is not None

    @function_tool
    def ask(self, lo: int, hi: int) -> str:
        """Ask whether the number is between lo and hi (inclusive); the answer is yes or no.

        Args:
            lo: the lower end of the range
            hi: the upper end of the range
        """
        self.questions += 1
        yes = lo <= int(self.task.answer) <= hi
        self.candidates = {c for c in self.candidates if (lo <= c <= hi) == yes}
        return f"{'yes' if yes else 'no'}{self._range_text()}"

    @function_tool
    def answer(self, n: int) -> str:
        """Give the number. This ends the episode.

        Args:
            n: the number
        """
        self.answered = n
        return "correct" if n == self.task.answer else "wrong"

    def outcome(self) -> dict[str, Any]:
        correct = float(self.answered is not None and self.answered == self.task.answer)
        return {"reward": correct, "components": {"correct": correct}}

    def respond(self, turn: AssistantTurn) -> Step:
        step = super().respond(turn)
        correct = self.outcome()["components"]["correct"]
        bits = math.log2(self.size / len(self.candidates))
        signals = StepSignals(
            tool_ok=step.signals.tool_ok,
            progress=1.0 if correct else bits / math.log2(self.size),
            state_key=self._key() + (",answered" if self.answered is not None else ""),
            reward_components={"correct": correct},
            extra={"questions": self.questions},
        )
        return Step(step.messages, step.reward, step.terminated, step.truncated, signals, step.info)

    def _range_text(self) -> str:
        lo, hi = min(self.candidates), max(self.candidates)
        if hi - lo + 1 != len(self.candidates):  # not a range: the model has to combine the answers itself
            return "."
        return f": the number is {lo}." if lo == hi else f": the number is from {lo} to {hi}."

    def _key(self) -> str:
        lo, hi = min(self.candidates), max(self.candidates)
        if hi - lo + 1 == len(self.candidates):
            return f"{lo}-{hi}"
        return ",".join(map(str, sorted(self.candidates)))
