"""`rlgym/Math-v0`: solve a math problem with a calculator tool, then submit one answer.

    env = rlgym_llm.make("rlgym/Math-v0", difficulty=2, kinds=["linear", "word"])
    env = rlgym_llm.make("rlgym/Math-v0", dataset="problems.jsonl")   # {"question", "answer"} lines

Episode rules:
- The opening is a short system prompt naming the tools, then the question.
- Each turn, every tool call runs in order and gets a `tool` message with its `tool_call_id`.
  Invalid calls (unknown tool, bad arguments) get an error message instead; `step` never raises.
- A turn without tool calls gets a reminder to call `submit_answer`.
- The first `submit_answer` call ends the episode, right or wrong: one submission per episode, so
  the reward cannot be farmed by guessing. Calls after it in the same turn are ignored. The
  feedback says only "correct" or "incorrect", never the reference answer.
- Reward: 1.0 for a correct answer, else 0.0. `outcome()["components"]`: `correct` (0/1) and
  `format` (1 if a submission was made whose answer could be read, see `verify.Verdict.parsed`).
- Signals: `tool_ok`, `progress` (0 before the submission, 1 after), `reward_components` and the
  extra `calls_made` (tool calls so far, valid or not).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import pydantic

from rlgym_envs.math.calculator import calculate
from rlgym_envs.math.tasks import EASY_LEVEL, KINDS, LEVELS, generate_task, load_dataset
from rlgym_envs.math.verify import Verdict, check
from rlgym_llm.core.dispatch import ToolResult
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import draw_in_split, partition
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals

logger = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "Solve the math problem. You have two tools:\n"
    "- calculator(expression): evaluates arithmetic exactly (+ - * / ^, parentheses, sqrt, abs).\n"
    "- submit_answer(answer): submits your final answer and ends the episode; only one submission counts.\n"
    "Give exact answers: an integer or a fraction in lowest terms such as 3/4, not a rounded decimal. "
    "A percentage p% means p/100."
)
SHORT_PROMPT = "Use calculator(expression), then submit_answer(answer)."
"""The `prompt="short"` system prompt (16 tokens of the tiny model's tokenizer instead of 187): for a
model that learns the two calls in its warm-up, not from reading the tool descriptions."""
PROMPTS = {"full": SYSTEM_PROMPT, "short": SHORT_PROMPT}
NO_TOOL_CALL = "Please call the submit_answer tool with your final answer (you may use the calculator first)."


def _number_as_text(value: Any) -> Any:
    """Models often send `{"answer": 12}`; accept JSON numbers as their text."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value.strip()


_Text = Annotated[
    str, pydantic.BeforeValidator(_number_as_text), pydantic.AfterValidator(_not_blank), pydantic.Field(min_length=1)
]


class Calculator(Tool):
    """Evaluate an arithmetic expression exactly: numbers, + - * / ^, parentheses, sqrt(x) and abs(x)."""

    name: ClassVar[str] = "calculator"
    expression: _Text = pydantic.Field(description="the expression, e.g. (3 + 4) * 2 / 7")


class SubmitAnswer(Tool):
    """Submit your final answer. This ends the episode: only one submission counts."""

    name: ClassVar[str] = "submit_answer"
    answer: _Text = pydantic.Field(description="the final answer only, e.g. 42 or 3/4")


class MathEnv(Env):
    """Math word, arithmetic, fraction and equation problems, solved with a calculator tool.

    Args:
        difficulty: a level in 1..3, or a list of levels to draw from (generated tasks only).
            Level 0 (`kinds=["arithmetic"]` only) is one `+` or `-` of two operands in 1..99, the
            tier of `configs/env/math.yaml`.
        kinds: task kinds to draw from, a subset of `arithmetic`, `fraction`, `linear`, `word`
            (default: all).
        prompt: the system prompt: `full` describes both tools and the answer format; `short` is
            one line naming the two calls (`SHORT_PROMPT`), for a model taught the calls by SFT.
        dataset: `{"question", "answer"}` records: a JSONL or Parquet file, a Hugging Face
            `datasets` folder (`save_to_disk`), or `"sample"` (the packaged sample)
            to use instead of the generator. `reset(options={"task_index": i})` picks row i;
            otherwise the env's RNG picks.
        fields: the data set's column for each field, e.g. `{"question": "problem", "answer": "solution"}`.
        split: the content pool, `train` (default), `val` or `test`. A question belongs to exactly one
            pool (a stable hash of its text, `rlgym_llm.core.splits`): generated tasks are redrawn until
            they fall in the pool, a data set's rows are partitioned the same way, and
            `task_index` counts within the pool. Level 0 has 19,602 questions, about 3,900 per held-out pool.
        dataset_split: the split to read from a `datasets` folder that holds several (default: its only
            one, else `train`); its rows are then partitioned into `split`'s pool like any file's.
        max_tool_calls, max_observation_chars: the per-turn caps on tool calls run and on the
            characters returned (see `rlgym_llm.Env`).
    """

    tools: ClassVar[tuple[type[Tool], ...]] = (Calculator, SubmitAnswer)
    ignored_call = ToolResult("Ignored: an answer was already submitted.", ok=None)

    def __init__(
        self,
        difficulty: int | Sequence[int] = 1,
        kinds: Sequence[str] | None = None,
        prompt: Literal["full", "short"] = "full",
        dataset: str | Path | None = None,
        fields: Mapping[str, str] | None = None,
        split: str = "train",
        dataset_split: str | None = None,
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        levels = [difficulty] if isinstance(difficulty, int) else list(difficulty)
        self.kinds = tuple(KINDS if kinds is None else ([kinds] if isinstance(kinds, str) else kinds))
        problems = [f"difficulty {d!r} is not one of {list(LEVELS)}" for d in levels if d not in LEVELS]
        problems += [f"kind {k!r} is not one of {list(KINDS)}" for k in self.kinds if k not in KINDS]
        if EASY_LEVEL in levels and set(self.kinds) != {"arithmetic"}:
            problems.append(
                f"difficulty {EASY_LEVEL} exists for kinds=['arithmetic'] only, got kinds={list(self.kinds)}"
            )
        if prompt not in PROMPTS:
            problems.append(f"prompt {prompt!r} is not one of {list(PROMPTS)}")
        if not levels:
            problems.append("difficulty must name at least one level")
        if not self.kinds:
            problems.append("kinds must name at least one kind")
        if problems:
            raise ConfigError(problems)
        self.difficulties = tuple(int(d) for d in levels)
        self.system_prompt = PROMPTS[prompt]
        self.dataset: list[Task] | None = None
        if dataset is not None:
            rows = load_dataset(dataset, fields, dataset_split)
            self.dataset = partition(rows, Task.content_key, split)
            if not self.dataset:
                raise ConfigError(f"dataset {dataset!r}: none of its {len(rows)} questions falls in split {split!r}")
        self._verdict: Verdict | None = None
        self._calls = 0

    def new_episode(self, task: Task) -> None:
        self._verdict, self._calls = None, 0

    def episode_over(self) -> bool:
        return self._verdict is not None

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        index = options.get("task_index")
        if self.dataset is None:
            if index is not None:
                raise ValueError("options['task_index'] needs a dataset: MathEnv(dataset='file.jsonl')")
            return draw_in_split(lambda: generate_task(self.np_random, self.kinds, self.difficulties), self.split)
        if index is None:
            index = int(self.np_random.integers(len(self.dataset)))
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.dataset):
            raise ValueError(
                f"options['task_index'] must be an int in [0, {len(self.dataset)}) (the {self.split!r} split's "
                f"questions), got {index!r}"
            )
        return self.dataset[index]

    def opening(self, task: Task) -> Messages:
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        submitted_before = self._verdict is not None
        self._calls += len(turn.tool_calls)
        run = self.run_tools(turn)
        messages = run.messages if turn.tool_calls else [{"role": "user", "content": NO_TOOL_CALL}]
        done = self._verdict is not None
        # The reward is paid once, on the step that submits; later steps (if a caller keeps going) pay 0.
        reward = self.outcome()["reward"] if done and not submitted_before else 0.0
        info = {"verdict": self._verdict.method} if self._verdict is not None else {}
        return Step(messages, reward=reward, terminated=done, signals=self._signals(run.ok), info=info)

    def on_calculator(self, args: Calculator) -> ToolResult:
        result = calculate(args.expression)
        return ToolResult(result, ok=not result.startswith("Error:"))

    def on_submit_answer(self, args: SubmitAnswer) -> str:
        self._verdict = check(args.answer, self.task.answer)
        logger.debug("task %s: submitted %r -> %s", self.task.id, args.answer, self._verdict)
        return f"Answer submitted. {'Correct.' if self._verdict.correct else 'Incorrect.'}"

    def invalid_action(self, problem: str) -> Step:
        step = super().invalid_action(problem)
        return Step(step.messages, terminated=self._verdict is not None, signals=self._signals(False))

    def _signals(self, tool_ok: bool | None) -> StepSignals:
        done = self._verdict is not None
        return StepSignals(
            tool_ok=tool_ok,
            progress=1.0 if done else 0.0,
            reward_components=self.outcome()["components"],
            extra={"calls_made": self._calls},
        )

    def outcome(self) -> dict[str, Any]:
        verdict = self._verdict
        correct = float(verdict is not None and verdict.correct)
        return {
            "reward": correct,
            "components": {"correct": correct, "format": float(bool(verdict and verdict.parsed))},
        }
