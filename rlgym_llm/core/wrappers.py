"""Wrappers that `make()` applies and users compose."""

from __future__ import annotations

from typing import Any

import gymnasium

from rlgym_llm.core.types import Messages


class TurnLimit(gymnasium.Wrapper):
    """Truncate an episode after `max_turns` assistant turns.

    Unlike Gymnasium's `TimeLimit`, the last step also carries the env's final outcome in
    `info["outcome"]` (an unfinished task is graded as it stands) and says why it ended in
    `info["truncated_by"]`, so trainers never see an episode end without a verifiable reward.
    """

    def __init__(self, env: gymnasium.Env, max_turns: int):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        super().__init__(env)
        self.max_turns = max_turns
        self._turns = 0

    def reset(self, **kwargs: Any) -> tuple[Messages, dict]:
        self._turns = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Messages, float, bool, bool, dict]:  # type: ignore[override]
        messages, reward, terminated, truncated, info = self.env.step(action)
        self._turns += 1
        if self._turns >= self.max_turns and not terminated and not truncated:
            truncated = True
            info["truncated_by"] = "turn_limit"
            if "outcome" not in info:
                outcome = getattr(self.env.unwrapped, "outcome", None)
                if callable(outcome):
                    info["outcome"] = outcome()
        return messages, float(reward), terminated, truncated, info
