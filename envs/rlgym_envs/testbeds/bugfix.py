"""`rlgym/BugFix-v0`: run the tests, set the broken lines to the values they report, then submit.

    env = rlgym_llm.make("rlgym/BugFix-v0")                 # 1 or 2 broken lines among 9
    env = rlgym_llm.make("rlgym/BugFix-v0", max_bugs=3)
    env = rlgym_llm.make("rlgym/BugFix-v0", split="test")   # bug sets no train draw ever produces

Built for the gated-reward claim (G-RA vs D-RA): `run_tests` is always a valid call, so an immediate
reward per valid call (`tool_ok`, or the `tests_run` component) can be earned turn after turn without
ever submitting: a policy that only runs the tests collects more of it than one that solves the task.
D-RA (every immediate reward counts) pays that; G-RA counts them only when the outcome level reaches
its threshold (a submission that changed something).

The program is 9 lines, each holding a digit; every task draws which lines are broken, the digit each
must hold and the wrong digit it holds, and the digits of the other lines. Only the test output says
which lines fail and what they must hold, so no patch written without reading it fixes more than a
chance share of the tasks (editing a line that was right to another digit breaks it).

Content splits (`split`) are by the bug set, the broken lines and the digit each must hold
(`Task.key`, e.g. `bugfix:3=7,8=0`): each bug set belongs to one pool (a stable hash,
`rlgym_llm.core.splits`), and tasks are redrawn until one falls in the env's split. With
`max_bugs: 2` there are 90 one-bug and 3,600 two-bug sets; the pools hold 2,210, 770 and 710 of them
(45, 23 and 22 of the one-bug sets; docs/testbeds.md, Splits).

Rules:
- The prompt names no broken line; `run_tests()` answers `failing: line 3 (expected 7, got 4), line 8
  (expected 0, got 2)` (or `all tests pass`).
- `fix(line, value)` sets a line to a digit; any line from 1 to 9 and digit from 0 to 9 is a valid call.
- `submit()` ends the episode: reward 1.0 when every line holds its right digit, else 0.0.
- Signals: `tool_ok`, `progress` (share of the broken lines fixed), `tests` (passed, total, vector:
  one test per line), `state_key` (the fixed lines, the lines an edit broke, and whether the tests ran
  since the last change), `reward_components` (`tests_run`: 1 on a turn that ran the tests; `fixed`:
  lines fixed on the turn), and `outcome_level`: 0 no submission < 1 submitted with no line changed <
  2 submitted, some test fails < 3 submitted, all tests pass (the ordering of G-RA's SWE levels).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from rlgym_llm.core.dispatch import function_tool
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import draw_in_split, split_of
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals

LINES = 9
"""Lines of the program."""
DIGITS = 10
"""Each line holds a digit, 0 to 9."""


def task_key(bugs: Mapping[int, int]) -> str:
    """The content key of a BugFix task: its broken lines and the digit each must hold."""
    return "bugfix:" + ",".join(f"{line}={bugs[line]}" for line in sorted(bugs))


class BugFixEnv(Env):
    """Fix the program's broken lines (hidden; `run_tests` shows them and their right digits), then `submit`.

    Args:
        max_bugs: each task has 1 to max_bugs broken lines (1 to 4).
        split: the content pool (`train`, `val` or `test`): pools share no bug set.
        max_tool_calls, max_observation_chars: see `rlgym_llm.Env`.
    """

    reward_range = (0.0, 1.0)
    no_tool_call = "Use the `run_tests`, `fix` and `submit` tools."

    def __init__(
        self, max_bugs: int = 2, split: str = "train", max_tool_calls: int = 16, max_observation_chars: int = 32_000
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        if not 1 <= max_bugs <= 4:
            raise ConfigError([f"max_bugs must be in [1, 4], got {max_bugs}"])
        self.max_bugs = max_bugs
        self.values: list[int] = []
        self.changed = self.submitted = self.tested = False
        self.turn_tests = self.turn_fixes = 0

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        if "bugs" in options:  # a named bug set: it must belong to this env's split
            bugs = _named_bugs(options["bugs"])
            if (found := split_of(task_key(bugs))) != self.split:
                raise ValueError(
                    f"the bug set {task_key(bugs)!r} belongs to the {found!r} split, not {self.split!r}: make the "
                    f"env with split={found!r}, or name a bug set of the {self.split!r} split"
                )
        else:
            bugs = draw_in_split(self._draw_bugs, self.split, task_key)
        rng = self.np_random
        correct = [bugs[line] if line in bugs else int(rng.integers(DIGITS)) for line in range(1, LINES + 1)]
        program = list(correct)
        for line, right in bugs.items():  # a wrong digit, never the right one
            program[line - 1] = (right + int(rng.integers(1, DIGITS))) % DIGITS
        prompt = (
            f"A program of {LINES} lines fails its tests. Call `run_tests` to see which lines are broken and the "
            "digit each must hold, `fix(line, value)` to set a line to a digit, and `submit` when the tests pass."
        )
        hidden = {"bugs": dict(sorted(bugs.items())), "correct": correct, "program": program}
        task_id = "bugfix-" + "-".join(f"{line}.{bugs[line]}" for line in sorted(bugs))
        return Task(id=task_id, prompt=prompt, hidden=hidden, key=task_key(bugs))

    def _draw_bugs(self) -> dict[int, int]:
        rng = self.np_random
        k = int(rng.integers(1, self.max_bugs + 1))
        lines = sorted(int(b) for b in rng.choice(range(1, LINES + 1), size=k, replace=False))
        return {line: int(rng.integers(DIGITS)) for line in lines}

    @property
    def bugs(self) -> list[int]:
        """The task's broken lines."""
        return sorted(self.task.hidden["bugs"])

    def expected(self, line: int) -> int:
        """The digit `line` must hold."""
        return int(self.task.hidden["correct"][line - 1])

    def failing(self) -> list[int]:
        """The lines whose digit is wrong now: broken lines not fixed yet, and right lines an edit broke."""
        return [line for line in range(1, LINES + 1) if self.values[line - 1] != self.expected(line)]

    def new_episode(self, task: Task) -> None:
        self.values = list(task.hidden["program"])
        self.changed = self.submitted = self.tested = False

    def opening(self, task: Task) -> Messages:
        return [{"role": "user", "content": task.prompt}]

    def episode_over(self) -> bool:
        return self.submitted

    @function_tool
    def run_tests(self) -> str:
        """Run the test suite: it names the lines whose tests fail and the digit each must hold."""
        self.tested, self.turn_tests = True, self.turn_tests + 1
        failing = self.failing()
        if not failing:
            return "all tests pass"
        parts = [f"line {line} (expected {self.expected(line)}, got {self.values[line - 1]})" for line in failing]
        return "failing: " + ", ".join(parts)

    @function_tool
    def fix(
        self, line: Annotated[int, Field(ge=1, le=LINES)], value: Annotated[int, Field(ge=0, le=DIGITS - 1)]
    ) -> str:
        """Set one line of the program to a digit.

        Args:
            line: the line number, 1 to 9
            value: the digit the line must hold, 0 to 9
        """
        self.changed, self.tested = True, False
        was_wrong = self.values[line - 1] != self.expected(line)
        self.values[line - 1] = value
        if was_wrong and value == self.expected(line):
            self.turn_fixes += 1
        return f"edited line {line}"

    @function_tool
    def submit(self) -> str:
        """Submit the program. This ends the episode."""
        self.submitted = True
        return "submitted"

    def outcome_level(self) -> int:
        """0 no submission < 1 submitted unchanged < 2 submitted, some test fails < 3 all tests pass."""
        if not self.submitted:
            return 0
        if not self.changed:
            return 1
        return 3 if not self.failing() else 2

    def outcome(self) -> dict[str, Any]:
        solved = float(self.outcome_level() == 3)
        return {"reward": solved, "components": {"solved": solved}}

    def respond(self, turn: AssistantTurn) -> Step:
        self.turn_tests = self.turn_fixes = 0
        step = super().respond(turn)
        failing = set(self.failing())
        vector = tuple(line not in failing for line in range(1, LINES + 1))
        fixed = [line for line in self.bugs if line not in failing]
        broken = sorted(failing - set(self.bugs))
        state = f"fixed={','.join(map(str, fixed)) or 'none'}" + (
            f",broken={','.join(map(str, broken))}" if broken else ""
        )
        signals = StepSignals(
            tool_ok=step.signals.tool_ok,
            progress=len(fixed) / len(self.bugs),
            tests=(sum(vector), len(vector), vector),
            state_key=state + (",tested" if self.tested else "") + (",submitted" if self.submitted else ""),
            reward_components={"tests_run": float(self.turn_tests > 0), "fixed": float(self.turn_fixes)},
            extra={"outcome_level": self.outcome_level()},
        )
        return Step(step.messages, step.reward, step.terminated, step.truncated, signals, step.info)


def _named_bugs(value: Any) -> dict[int, int]:
    """`options['bugs']`: {line: digit} or [[line, digit], ...], lines 1 to 9 and digits 0 to 9."""
    try:
        pairs = value.items() if isinstance(value, Mapping) else [tuple(p) for p in value]
        bugs = {int(line): int(digit) for line, digit in pairs}
    except (TypeError, ValueError):
        bugs = {}
    if not bugs or not all(1 <= line <= LINES and 0 <= d < DIGITS for line, d in bugs.items()):
        raise ValueError(
            f"options['bugs'] must map broken lines (1 to {LINES}) to the digit each must hold (0 to {DIGITS - 1}), "
            f"e.g. {{3: 7, 8: 0}}; got {value!r}"
        )
    return bugs
