"""`rlgym/Ladder-v0`: climb a counter from 0 to a target with `add` (1, 2 or 3), then `submit`.

    env = rlgym_llm.make("rlgym/Ladder-v0")                      # targets 19..27: 8 to 10 turns
    env = rlgym_llm.make("rlgym/Ladder-v0", min_target=28, max_target=36)

Built for the long-horizon credit claims (GiGPO, SPA-RL): an episode takes 8 to 10 turns, almost
all of them easy (add 3 while 3 or more are left), and it fails on one or two bad turns near the top
(adding past the target ends it at once; submitting early is wrong). The reward is sparse: 1.0 for
submitting exactly the target, else 0.0, paid at the end. The same states (`counter=k`) recur across
the samples of a group and across turns, so step groups are large.

Rules:
- Every `add` is answered `counter = k, j to go`; adding past the target ends the episode (reward 0).
- `submit` ends the episode; reward 1.0 when the counter equals the target.
- Signals: `tool_ok`, `progress` (the counter's share of the target, 0 after an overshoot),
  `subgoals` (target reached and submitted), `state_key` (`counter=k`, `,submitted`/`,over`),
  `reward_components` (`hit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from rlgym_llm.core.dispatch import function_tool
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import AssistantTurn, Messages, StepSignals

STEP = 3
"""The largest `add`."""


class LadderEnv(Env):
    """Bring a counter from 0 to the target in the prompt with `add` calls, then `submit`.

    Args:
        min_target, max_target: targets are drawn uniformly from [min_target, max_target].
        max_tool_calls, max_observation_chars: see `rlgym_llm.Env`.
    """

    reward_range = (0.0, 1.0)
    no_tool_call = "Use the `add` and `submit` tools."

    def __init__(
        self, min_target: int = 19, max_target: int = 27, max_tool_calls: int = 16, max_observation_chars: int = 32_000
    ) -> None:
        super().__init__(max_tool_calls=max_tool_calls, max_observation_chars=max_observation_chars)
        if not 1 <= min_target <= max_target:
            raise ConfigError([f"need 1 <= min_target <= max_target, got {min_target} and {max_target}"])
        self.min_target, self.max_target = min_target, max_target
        self.counter, self.submitted = 0, False

    def sample_task(self, options: Mapping[str, Any]) -> Task:
        target = int(options.get("target", self.np_random.integers(self.min_target, self.max_target + 1)))
        if target < 1:
            raise ValueError(f"options['target'] must be >= 1, got {target}")
        prompt = (
            f"A counter starts at 0. Bring it to exactly {target} with the `add` tool (1, 2 or 3 per call), "
            "then call `submit`. Going past the target ends the task."
        )
        # The target is public: nothing here is ground truth the model must not see.
        return Task(id=f"ladder-{target}", prompt=prompt, meta={"target": target})

    def new_episode(self, task: Task) -> None:
        self.counter, self.submitted = 0, False

    def opening(self, task: Task) -> Messages:
        return [{"role": "user", "content": task.prompt}]

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
            progress=0.0 if self.over else self.counter / self.target,
            subgoals=(int(self.counter == self.target) + int(bool(hit)), 2),
            state_key=f"counter={self.counter}{suffix}",
            reward_components={"hit": hit},
        )
        return Step(step.messages, step.reward, step.terminated, step.truncated, signals, step.info)
