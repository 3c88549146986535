"""Builds `Trajectory` records for the credit tests (token ids are arbitrary; only lengths matter)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlgym_llm.core.types import AssistantTurn, Failure, FailureKind, Trajectory, Turn


def make_trajectory(
    turn_rewards: Sequence[float] = (),
    outcome: float = 0.0,
    *,
    group: str = "g",
    signals: Sequence[Mapping[str, Any]] | None = None,
    completion_lens: Sequence[int] | None = None,
    obs_lens: Sequence[int] | None = None,
    prompt_len: int = 3,
    components: Mapping[str, float] | None = None,
    failed: bool = False,
    opening: list | None = None,
) -> Trajectory:
    n = len(turn_rewards)
    completion_lens = completion_lens or [2] * n
    obs_lens = obs_lens or [0] + [1] * (n - 1)
    signals = signals or [{} for _ in range(n)]
    token = iter(range(10_000))
    turns = [
        Turn(
            index=t,
            action=AssistantTurn(content=f"turn {t}"),
            observation=[{"role": "tool", "content": "ok"}],
            reward=float(r),
            terminated=t == n - 1,
            truncated=False,
            signals=dict(signals[t]),
            obs_token_ids=tuple(next(token) for _ in range(obs_lens[t])),
            completion_token_ids=tuple(next(token) for _ in range(completion_lens[t])),
            completion_logprobs=tuple(-1.0 for _ in range(completion_lens[t])),
        )
        for t, r in enumerate(turn_rewards)
    ]
    return Trajectory(
        env_id="test/Env-v0",
        seed=0,
        task_id="task",
        group_id=group,
        opening=opening if opening is not None else [{"role": "user", "content": "go"}],
        prompt_token_ids=tuple(range(prompt_len)),
        turns=turns,
        outcome={"reward": float(outcome), "components": dict(components or {})},
        failures=[Failure(FailureKind.ENGINE, "Timeout", "slow")] if failed else [],
    )
