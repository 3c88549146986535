"""Read the arrays the estimators need from `Trajectory` records: groups, outcomes, turn channels, anchors."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rlgym_llm.core.types import Trajectory, Turn

TurnSource = str | Callable[[Turn], float]
"""Where a per-turn value comes from: a channel name (see `turn_channel`) or a function of the turn."""


def group_key(trajectory: Trajectory) -> str:
    """The trajectory's group: its `group_id`, or (env, task, seed) when none was set.

    Rollouts of one task reset with one seed start identically, which is what makes them a group.
    """
    if trajectory.group_id:
        return trajectory.group_id
    return f"{trajectory.env_id}|{trajectory.task_id}|{trajectory.seed}"


def group_indices(trajectories: Sequence[Trajectory]) -> tuple[dict[str, list[int]], list[int]]:
    """Indices of the non-failed trajectories per group (in first-seen order), and of the failed ones.

    Failed episodes are kept as data but must not enter a group's statistics: a crash is not a
    low reward.
    """
    groups: dict[str, list[int]] = {}
    failed: list[int] = []
    for i, traj in enumerate(trajectories):
        if traj.failed:
            failed.append(i)
        else:
            groups.setdefault(group_key(traj), []).append(i)
    return groups, failed


def outcome_value(trajectory: Trajectory, name: str = "reward") -> float:
    """R_i: `outcome["reward"]` for name="reward", else the named outcome component (e.g. "f1").

    Raises:
        KeyError: the outcome has no such component.
    """
    if name == "reward":
        return trajectory.reward
    comps = trajectory.outcome.get("components") or {}
    if name not in comps:
        raise KeyError(
            f"trajectory {trajectory.task_id!r} has no outcome component {name!r} (has {sorted(comps)}); "
            "pass outcome='reward' or a component the env reports"
        )
    return float(comps[name])


def turn_channel(turn: Turn, name: str) -> float:
    """A numeric per-turn value by name.

    "reward" is the env's step reward; otherwise a `reward_components` entry of the turn's signals if
    present, else the signal itself (`tool_ok`, `progress`, or an env-specific numeric extra). A
    missing or None value reads as 0 (e.g. tool_ok None: no tool was called).

    Raises:
        TypeError: the signal is present but not a number or bool.
    """
    if name == "reward":
        return float(turn.reward)
    comps = turn.signals.get("reward_components") or {}
    if name in comps:
        return float(comps[name])
    value = turn.signals.get(name)
    if value is None:
        return 0.0
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"signal {name!r} of turn {turn.index} is {type(value).__name__}, not a number")
    return float(value)


def turn_values(trajectory: Trajectory, source: TurnSource) -> np.ndarray:
    """One value per turn from a channel name or a function of the turn."""
    fn = source if callable(source) else (lambda turn: turn_channel(turn, source))
    return np.array([fn(turn) for turn in trajectory.turns], dtype=np.float64)


def turn_matrix(trajectory: Trajectory, channels: Mapping[str, float] | Sequence[str]) -> np.ndarray:
    """(T, C) values of the named channels, in the given order."""
    names = list(channels)
    return np.array([[turn_channel(t, n) for n in names] for t in trajectory.turns], dtype=np.float64).reshape(
        len(trajectory.turns), len(names)
    )


def opening_key(trajectory: Trajectory) -> str:
    """The anchor of the reset state: `metadata["state_key"]` when the rollout stored the reset's
    state key there, else a hash of the opening messages (the whole group shares them)."""
    key = trajectory.metadata.get("state_key")
    if isinstance(key, str):
        return key
    blob = json.dumps(trajectory.opening, sort_keys=True, ensure_ascii=False, default=str)
    return "opening:" + hashlib.sha256(blob.encode()).hexdigest()[:32]


def anchor_keys(trajectory: Trajectory) -> list[str | None]:
    """The key of the state each turn was taken FROM (GiGPO's anchor), one per turn.

    Turn t's signals report the state AFTER turn t, so turn t starts from the state in turn t-1's
    `state_key`; turn 0 starts from the reset state (`opening_key`). None where the env reported no
    key: such a step forms a step group of its own.
    """
    keys: list[str | None] = [opening_key(trajectory)] if trajectory.turns else []
    for turn in trajectory.turns[:-1]:
        key = turn.signals.get("state_key")
        keys.append(key if isinstance(key, str) else None)
    return keys
