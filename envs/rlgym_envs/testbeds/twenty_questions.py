"""`rlgym/TwentyQ-v0`: find a hidden number with yes/no range questions, then answer it.

    env = rlgym_llm.make("rlgym/TwentyQ-v0")            # 16 candidates, e.g. 33 to 48: 4 questions + the answer
    env = rlgym_llm.make("rlgym/TwentyQ-v0", size=32)   # 32 candidates: 5 questions
    env = rlgym_llm.make("rlgym/TwentyQ-v0", split="test")  # numbers no train draw ever produces

Built for the information-gain claim (IGPO): the prompt names the candidates (`size` consecutive
numbers), the same for every number among them, so the answer cannot be read or guessed from it (a
blind answer is right with probability 1/size); each question `ask(lo, hi)` that splits the remaining
candidates halves them, so an informative question raises the probability of the right answer, and
an answer given before the candidates are down to one is a guess.

The hidden number is the task. It is drawn from 1..size*ranges, and its candidates are the block of
`size` numbers that holds it (1..size, size+1..2*size, ...). Content splits (`split`) are by the
number (`Task.key`, e.g. `twentyq:417`): each belongs to one pool (a stable hash,
`rlgym_llm.core.splits`), so no test number is ever a train or val answer; tasks are drawn uniformly
from the split's pool. As shipped (numbers 1..1280) the pools hold 742, 267 and 271 numbers.

Rules:
- `ask(lo, hi)` is answered `yes` or `no` (is lo <= number <= hi?), followed by the remaining
  candidates when they form a range (`yes: the number is from 5 to 8.`, `... the number is 7.`).
- `answer(n)` ends the episode: reward 1.0 when n is the number, else 0.0.
- Signals: `tool_ok`, `progress` (bits of the `log2(size)` learned so far; 1.0 after a right answer),
  `state_key` (the candidate range, e.g. `5-8`, or the candidate set), `reward_components`
  (`correct`), and the extra `questions` (asks so far).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlgym_llm.core.dispatch import function_tool
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import partition, split_of
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals

MAX_NUMBERS = 100_000
"""The largest size * ranges (the split's pool is listed at construction)."""


def task_key(number: int) -> str:
    """The content key of a TwentyQ task: what decides its split."""
    return f"twentyq:{number}"


@functools.lru_cache(maxsize=32)
def split_pool(numbers: int, split: str) -> tuple[int, ...]:
    """The numbers of 1..numbers that belong to `split`, in order."""
    return tuple(partition(range(1, numbers + 1), task_key, split))


@dataclass(frozen=True)
class TwentyQTask(Task):
    """A hidden number; `meta` holds its candidates' bounds (`lo`, `hi`), which the prompt names."""

    def secrets(self) -> list[str]:
        """None: the answers to the questions legitimately narrow the candidates down to the number."""
        return []

    def opening_secrets(self) -> list[str]:
        """The number, unless it is one of the bounds the prompt names (then it is one candidate of `size`)."""
        n = int(self.answer)
        return [] if n in (self.meta["lo"], self.meta["hi"]) else super().secrets()


class TwentyQuestionsEnv(Env):
    """Find the hidden number among `size` candidates with `ask(lo, hi)`, then `answer(n)`.

    Args:
        size: the number of candidates (2 to 1024): the prompt names a block of `size` consecutive numbers.
        ranges: how many blocks the number is drawn from (numbers 1..size*ranges, uniformly).
        split: the content pool (`train`, `val` or `test`): pools share no number.
        max_tool_calls, max_observation_chars: see `rlgym_llm.Env`.
    """

    reward_range = (0.0, 1.0)
    no_tool_call = "Use the `ask` and `answer` tools."

    def __init__(
        self,
        size: int = 16,
        ranges: int = 80,
        split: str = "train",
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        problems = []
        if not 2 <= size <= 1024:
            problems.append(f"size must be in [2, 1024], got {size}")
        if ranges < 1 or size * ranges > MAX_NUMBERS:
            problems.append(
                f"ranges must be >= 1 with size * ranges <= {MAX_NUMBERS}, got size={size}, ranges={ranges}"
            )
        if problems:
            raise ConfigError(problems)
        self.size, self.ranges = size, ranges
        self.pool = split_pool(size * ranges, split)
        if not self.pool:
            raise ConfigError([f"none of the numbers 1..{size * ranges} falls in split {split!r}: raise ranges"])
        self.candidates: set[int] = set()
        self.answered: int | None = None
        self.questions = 0

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        if "number" in options:  # a named task: it must belong to this env's split
            n = int(options["number"])
            if not 1 <= n <= self.size * self.ranges:
                raise ValueError(f"options['number'] must be in [1, {self.size * self.ranges}], got {n}")
            if (found := split_of(task_key(n))) != self.split:
                raise ValueError(
                    f"the number {n} belongs to the {found!r} split, not {self.split!r}: make the env with "
                    f"split={found!r}, or name a number of the {self.split!r} split"
                )
        else:
            n = self.pool[int(self.np_random.integers(len(self.pool)))]
        lo = (n - 1) // self.size * self.size + 1
        hi = lo + self.size - 1
        prompt = (
            f"I am thinking of a whole number from {lo} to {hi}. Ask `ask(lo, hi)` to learn whether it is "
            "between lo and hi (inclusive), then give it with `answer(n)`."
        )
        meta = {"lo": lo, "hi": hi}
        return TwentyQTask(id=f"twentyq-{self.size}-{n}", prompt=prompt, answer=n, meta=meta, key=task_key(n))

    def new_episode(self, task: Task) -> None:
        self.candidates = set(range(int(task.meta["lo"]), int(task.meta["hi"]) + 1))
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
