"""Toy envs that ship with the library: tiny, correct, and with a known optimal return.

- `GuessNumberEnv`: find a hidden three-digit number with one tool, `guess`, answered `higher`,
  `lower` or `correct`. Bisection (`Bisector`) always finds it within 10 guesses, so under a turn
  limit of 10 or more the optimal return is 1.0 on every task.
- `CounterEnv`: bring a counter from its start (0 by default) to a target shown in the prompt with
  `add` (1 to 3 per call), then `submit`. The optimal return is 1.0 in `ceil((target - start) / 3) + 1`
  turns (`CounterPlayer`). It reports every standard signal: progress, subgoals, reward components
  and repeating state keys.

They are not registered globally; tests and examples register them under their own ids:

    rlgym_llm.register("test/Guess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field

from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import partition, split_of
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import AssistantTurn, Message, Messages, StepSignals

# --- guess the number ---------------------------------------------------------------------------

LOW, HIGH = 100, 999
GUESS_BUDGET = math.ceil(math.log2(HIGH - LOW + 2))  # bisection's worst case: 10 guesses for 900 numbers


class Guess(Tool):
    """Guess the hidden number. The answer is `higher`, `lower` or `correct`."""

    name: ClassVar[str] = "guess"
    value: int = Field(description="your guess, a three-digit number")


class GuessNumberEnv(Env):
    """Find a hidden three-digit number; reward 1.0 when a guess is correct, which ends the episode.

    The prompt names no digits on purpose: a range like "100 to 999" would contain some answers
    as substrings and look like a leak to `check_env`. Pick a task with `reset(options={"number": n})`.
    """

    tools = (Guess,)
    reward_range = (0.0, 1.0)

    def __init__(self) -> None:
        super().__init__()
        self.lo, self.hi, self.solved = LOW, HIGH, False

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        n = int(options["number"]) if "number" in options else int(self.np_random.integers(LOW, HIGH + 1))
        if not LOW <= n <= HIGH:
            raise ValueError(f"options['number'] must be in [{LOW}, {HIGH}], got {n}")
        prompt = (
            "I am thinking of a three-digit number. Find it with the `guess` tool: "
            "each guess is answered `higher`, `lower` or `correct`."
        )
        return Task(id=f"guess-{n}", prompt=prompt, answer=n)

    def new_episode(self, task: Task) -> None:
        self.lo, self.hi, self.solved = LOW, HIGH, False

    def opening(self, task: Task) -> Messages:
        return [{"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        if not turn.tool_calls:
            nudge: Message = {"role": "user", "content": "Call the `guess` tool with a three-digit number."}
            return Step([nudge], signals=self._signals(tool_ok=None))
        run = self.run_tools(turn)
        reward = 1.0 if self.solved else 0.0
        return Step(run.messages, reward=reward, terminated=self.solved, signals=self._signals(tool_ok=run.ok))

    # Calls after the end are validated first and then ignored, hence no `episode_over` (what the demo trained on).
    def on_guess(self, args: Guess) -> str:
        return "The number was already found." if self.solved else self._judge(args.value)

    def outcome(self) -> dict[str, Any]:
        return {"reward": float(self.solved), "components": {"solved": float(self.solved)}}

    def _judge(self, value: int) -> str:
        answer = int(self.task.answer)
        if value == answer:
            self.solved = True
            return "correct"
        if value < answer:
            self.lo = max(self.lo, value + 1)
            return "higher"
        self.hi = min(self.hi, value - 1)
        return "lower"

    def _signals(self, tool_ok: bool | None) -> StepSignals:
        # Progress: bits of the search space ruled out by the hints so far.
        left = max(self.hi - self.lo + 1, 1)
        progress = 1.0 if self.solved else 1.0 - math.log2(left) / math.log2(HIGH - LOW + 1)
        key = "solved" if self.solved else f"{self.lo}-{self.hi}"
        return StepSignals(
            tool_ok=tool_ok, progress=progress, state_key=key, reward_components={"solved": float(self.solved)}
        )


class Bisector:
    """The optimal policy for `GuessNumberEnv`; it reads only the observations, never the task."""

    def __init__(self) -> None:
        self.lo, self.hi, self.last, self.calls = LOW, HIGH, 0, 0

    def act(self, observation: Messages) -> dict[str, Any]:
        """The next assistant message, given the env's latest messages (the opening first)."""
        for message in observation:
            if message.get("role") == "tool" and message.get("content") == "higher":
                self.lo = self.last + 1
            elif message.get("role") == "tool" and message.get("content") == "lower":
                self.hi = self.last - 1
        self.last, self.calls = (self.lo + self.hi) // 2, self.calls + 1
        call = {"id": f"call_{self.calls}", "name": "guess", "arguments": {"value": self.last}}
        return {"role": "assistant", "content": f"Trying {self.last}.", "tool_calls": [call]}


_GUESSED = re.compile(r'"value": (\d+)')
_HINTED = re.compile(r"<\|im_start\|>tool\n(higher|lower|correct)<\|im_end\|>")


def bisect_completion(prompt: str, prefix: str = "") -> str:
    """The optimal `GuessNumberEnv` move as model text, from a ChatML-rendered prompt alone.

    Stateless (any server can continue any episode), so a `ScriptedPolicy` can play it:
    `ScriptedPolicy(tokenizer, bisect_completion)`. `prefix` goes before the tool call.
    """
    lo, hi = LOW, HIGH
    convo = prompt.split("</tools>")[-1]  # the tool schemas hold no guesses, but skip them anyway
    for guess, hint in zip(map(int, _GUESSED.findall(convo)), _HINTED.findall(convo)):
        if hint == "higher":
            lo = guess + 1
        elif hint == "lower":
            hi = guess - 1
    return f'{prefix}<tool_call>{{"name": "guess", "arguments": {{"value": {(lo + hi) // 2}}}}}</tool_call>'


# --- counter ------------------------------------------------------------------------------------


class Add(Tool):
    """Add 1, 2 or 3 to the counter."""

    name: ClassVar[str] = "add"
    amount: int = Field(ge=1, le=3, description="how much to add: 1, 2 or 3")


class Submit(Tool):
    """Submit the counter's value. This ends the episode."""

    name: ClassVar[str] = "submit"


def counter_key(start: int, target: int) -> str:
    """The content key of a Counter task: what decides its split."""
    return f"counter:{start}->{target}"


@functools.lru_cache(maxsize=32)
def counter_pool(max_start: int, max_target: int, split: str) -> tuple[tuple[int, int], ...]:
    """The (start, target) pairs of `split`, in order."""
    pairs = [(s, s + g) for s in range(max_start + 1) for g in range(1, max_target + 1)]
    return tuple(partition(pairs, lambda p: counter_key(*p), split))


class CounterEnv(Env):
    """Bring a counter from its start to the target shown in the prompt, then submit it.

    Reward 1.0 when the submitted value equals the target. Overshooting cannot be undone, so the
    state keys (`counter=k`) repeat across a group's samples, as step-level grouping needs. Every
    `add` is answered `counter = k, j to go` (or `j past the target`).

    Content splits (`split`) are by the (start, target) pair (`Task.key`, e.g. `counter:41->45`):
    each pair belongs to one pool (a stable hash, `rlgym_llm.core.splits`), and tasks are drawn
    uniformly from the split's pool. With the defaults (start 0, targets 1..20) the pools are 14, 4
    and 2 targets; the demo (`configs/env/counter.yaml`: climbs 1..5 from starts 0..249) has 742, 252
    and 256 pairs.

    Args:
        max_target: the climb (target - start) is drawn uniformly from [1, max_target]; with
            `max_start` 0 that is the target itself.
        max_start: the start is drawn uniformly from [0, max_start].
        split: the content pool, `train` (default), `val` or `test`.
    """

    tools = (Add, Submit)
    reward_range = (0.0, 1.0)
    STEP = 3

    def __init__(self, max_target: int = 20, max_start: int = 0, split: str = "train") -> None:
        super().__init__(split=split)
        problems = [f"max_target must be >= 1, got {max_target}"] if max_target < 1 else []
        problems += [f"max_start must be >= 0, got {max_start}"] if max_start < 0 else []
        if problems:
            raise ConfigError(problems)
        self.max_target, self.max_start = max_target, max_start
        self.pool = counter_pool(max_start, max_target, split)
        if not self.pool:
            size = (max_start + 1) * max_target
            raise ConfigError([f"none of the {size} (start, target) pairs falls in split {split!r}: raise max_start"])
        self.counter, self.submitted = 0, False

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        if "target" in options:  # a named task: it must belong to this env's split
            start, target = int(options.get("start", 0)), int(options["target"])
            if not 0 <= start < target:
                raise ValueError(f"options need 0 <= start < target, got start={start}, target={target}")
            if (found := split_of(counter_key(start, target))) != self.split:
                raise ValueError(
                    f"the task start={start}, target={target} belongs to the {found!r} split, not {self.split!r}: "
                    f"make the env with split={found!r}, or name a task of the {self.split!r} split"
                )
        else:
            start, target = self.pool[int(self.np_random.integers(len(self.pool)))]
        prompt = (
            f"A counter starts at {start}. Bring it to exactly {target} with the `add` tool "
            "(1, 2 or 3 per call), then call `submit`."
        )
        # The target is public: nothing here is ground truth the model must not see.
        task_id = f"counter-{target}" if start == 0 else f"counter-{start}-{target}"
        return Task(id=task_id, prompt=prompt, meta={"start": start, "target": target}, key=counter_key(start, target))

    def new_episode(self, task: Task) -> None:
        self.counter, self.submitted = int(task.meta["start"]), False

    def opening(self, task: Task) -> Messages:
        return [{"role": "user", "content": task.prompt}]

    @property
    def start(self) -> int:
        return int(self.task.meta["start"])

    @property
    def target(self) -> int:
        return int(self.task.meta["target"])

    def respond(self, turn: AssistantTurn) -> Step:
        if not turn.tool_calls:
            nudge: Message = {"role": "user", "content": "Use the `add` and `submit` tools."}
            return Step([nudge], signals=self._signals(tool_ok=None))
        run = self.run_tools(turn)
        reward = self.outcome()["reward"] if self.submitted else 0.0
        return Step(run.messages, reward=reward, terminated=self.submitted, signals=self._signals(tool_ok=run.ok))

    def on_add(self, args: Add) -> str:
        if self.submitted:  # validated first, then ignored (see GuessNumberEnv)
            return "Already submitted."
        self.counter += args.amount
        left = self.target - self.counter
        return f"counter = {self.counter}, " + (f"{left} to go" if left >= 0 else f"{-left} past the target")

    def on_submit(self, args: Submit) -> str:
        if self.submitted:
            return "Already submitted."
        self.submitted = True
        return f"submitted {self.counter}"

    def outcome(self) -> dict[str, Any]:
        hit = float(self.submitted and self.counter == self.target)
        return {"reward": hit, "components": {"hit": hit, "overshoot": float(self.counter > self.target)}}

    def _signals(self, tool_ok: bool | None) -> StepSignals:
        reached = min(self.counter, self.target) - self.start
        return StepSignals(
            tool_ok=tool_ok,
            progress=reached / (self.target - self.start),
            subgoals=(int(self.submitted and self.counter == self.target), 1),
            state_key=f"counter={self.counter}" + (",submitted" if self.submitted else ""),
            reward_components={"hit": float(self.submitted and self.counter == self.target)},
        )


class CounterPlayer:
    """The optimal policy for `CounterEnv`: adds 3 while it can, then the rest, then submits."""

    _TASK = re.compile(r"starts at (\d+)\. Bring it to exactly (\d+)")
    _COUNTER = re.compile(r"^counter = (\d+)")

    def __init__(self) -> None:
        self.target, self.counter, self.calls = 0, 0, 0

    def act(self, observation: Messages) -> dict[str, Any]:
        """The next assistant message, given the env's latest messages (the opening first)."""
        for message in observation:
            content = str(message.get("content", ""))
            if found := self._TASK.search(content):
                self.counter, self.target = int(found.group(1)), int(found.group(2))
            if message.get("role") == "tool" and (found := self._COUNTER.match(content)):
                self.counter = int(found.group(1))
        self.calls += 1
        left = self.target - self.counter
        if left > 0:
            call = {"id": f"call_{self.calls}", "name": "add", "arguments": {"amount": min(left, CounterEnv.STEP)}}
        else:
            call = {"id": f"call_{self.calls}", "name": "submit", "arguments": {}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
