"""`rlgym/Ladder-v0`: climb a counter from its start to a target with `add` (1, 2 or 3), then `submit`.

    env = rlgym_llm.make("rlgym/Ladder-v0")                      # climbs of 19..27: 8 to 10 turns
    env = rlgym_llm.make("rlgym/Ladder-v0", min_climb=28, max_climb=36)
    env = rlgym_llm.make("rlgym/Ladder-v0", split="test")        # tasks no train draw ever produces

Built for the long-horizon credit claims (GiGPO, SPA-RL): an episode takes 8 to 10 turns, almost
all of them easy (add 3 while 3 or more are left), and it fails on one or two bad turns near the top
(adding past the target ends it at once; submitting early is wrong). The reward is sparse: 1.0 for
submitting exactly the target, else 0.0, paid at the end. The same states (`counter=k`) recur across
the samples of a group and across turns, so step groups are large.

A task is a start and a target (`start + climb`); the prompt names both, every `add` is answered with
what is left. Content splits (`split`) are by that pair (`Task.key`, e.g. `ladder:57->80`): each of
the `(max_start + 1) * (max_climb - min_climb + 1)` pairs belongs to one pool (a stable hash,
`rlgym_llm.core.splits`), and tasks are drawn uniformly from the split's pool. As shipped (starts
0..149, climbs 19..27: 1,350 pairs) the pools hold 804, 261 and 285 of them (docs/testbeds.md, Splits).

Rules:
- Every `add` is answered `counter = k, j to go`; adding past the target ends the episode (reward 0).
- `submit` ends the episode; reward 1.0 when the counter equals the target.
- Signals: `tool_ok`, `progress` (the share of the climb done, 0 after an overshoot),
  `subgoals` (target reached and submitted), `state_key` (`counter=k`, `,submitted`/`,over`),
  `reward_components` (`hit`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from rlgym_llm.core.dispatch import function_tool
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import partition, split_of
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals

STEP = 3
"""The largest `add`."""


def task_key(start: int, target: int) -> str:
    """The content key of a Ladder task: what decides its split."""
    return f"ladder:{start}->{target}"


@functools.lru_cache(maxsize=32)
def split_pool(max_start: int, min_climb: int, max_climb: int, split: str) -> tuple[tuple[int, int], ...]:
    """The (start, target) pairs of `split`, in order."""
    pairs = [(s, s + c) for s in range(max_start + 1) for c in range(min_climb, max_climb + 1)]
    return tuple(partition(pairs, lambda p: task_key(*p), split))


class LadderEnv(Env):
    """Bring a counter from its start to the target in the prompt with `add` calls, then `submit`.

    Args:
        min_climb, max_climb: the target is `start + climb`, the climb drawn from [min_climb, max_climb].
        max_start: the start is drawn from [0, max_start].
        split: the content pool (`train`, `val` or `test`): pools share no (start, target) pair.
        max_tool_calls, max_observation_chars: see `rlgym_llm.Env`.
    """

    reward_range = (0.0, 1.0)
    no_tool_call = "Use the `add` and `submit` tools."

    def __init__(
        self,
        min_climb: int = 19,
        max_climb: int = 27,
        max_start: int = 149,
        split: str = "train",
        max_tool_calls: int = 16,
        max_observation_chars: int = 32_000,
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars, split=split)
        problems = []
        if not 1 <= min_climb <= max_climb:
            problems.append(f"need 1 <= min_climb <= max_climb, got {min_climb} and {max_climb}")
        if max_start < 0:
            problems.append(f"max_start must be >= 0, got {max_start}")
        if problems:
            raise ConfigError(problems)
        self.min_climb, self.max_climb, self.max_start = min_climb, max_climb, max_start
        self.pool = split_pool(max_start, min_climb, max_climb, split)
        if not self.pool:
            size = (max_start + 1) * (max_climb - min_climb + 1)
            raise ConfigError([f"none of the {size} (start, target) pairs falls in split {split!r}: raise max_start"])
        self.counter, self.submitted = 0, False

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        if "target" in options:  # a named task: it must belong to this env's split
            start, target = int(options.get("start", 0)), int(options["target"])
            if not 0 <= start < target:
                raise ValueError(f"options need 0 <= start < target, got start={start}, target={target}")
            if (found := split_of(task_key(start, target))) != self.split:
                raise ValueError(
                    f"the task start={start}, target={target} belongs to the {found!r} split, not {self.split!r}: "
                    f"make the env with split={found!r}, or name a task of the {self.split!r} split"
                )
        else:
            start, target = self.pool[int(self.np_random.integers(len(self.pool)))]
        prompt = (
            f"A counter starts at {start}. Bring it to exactly {target} with the `add` tool (1, 2 or 3 per call), "
            "then call `submit`. Going past the target ends the task."
        )
        # The target is public: nothing here is ground truth the model must not see.
        meta = {"start": start, "target": target}
        return Task(id=f"ladder-{start}-{target}", prompt=prompt, meta=meta, key=task_key(start, target))

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

    @property
    def over(self) -> bool:
        return self.counter > self.target

    def episode_over(self) -> bool:
        return self.submitted or self.over

    @function_tool
    def add(self, amount: Annotated[int, Field(ge=1, le=STEP)]) -> str:
        """Add 1, 2 or 3 to the counter.

        Args:
            amount: how much to add: 1, 2 or 3
        """
        self.counter += amount
        if self.over:
            return f"counter = {self.counter}, past the target: the task is over."
        return f"counter = {self.counter}, {self.target - self.counter} to go"

    @function_tool
    def submit(self) -> str:
        """Submit the counter's value. This ends the episode."""
        self.submitted = True
        return f"submitted {self.counter}"

    def outcome(self) -> dict[str, Any]:
        hit = float(self.submitted and self.counter == self.target)
        return {"reward": hit, "components": {"hit": hit, "overshoot": float(self.over)}}

    def respond(self, turn: AssistantTurn) -> Step:
        step = super().respond(turn)
        hit = float(self.submitted and self.counter == self.target)
        suffix = ",over" if self.over else ",submitted" if self.submitted else ""
        signals = StepSignals(
            tool_ok=step.signals.tool_ok,
            progress=0.0 if self.over else (self.counter - self.start) / (self.target - self.start),
            subgoals=(int(self.counter == self.target) + int(bool(hit)), 2),
            state_key=f"counter={self.counter}{suffix}",
            reward_components={"hit": hit},
        )
        return Step(step.messages, step.reward, step.terminated, step.truncated, signals, step.info)
