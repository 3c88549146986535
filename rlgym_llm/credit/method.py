"""What a credit method declares about itself, in one record next to its estimator.

A module of `rlgym_llm.credit` registers methods by defining `METHODS`, a tuple of `CreditMethod`
records (see `registry.py`). A record says everything the rest of the library needs: the config
name, the parameters (a dataclass: names, defaults, choices, range checks in `__post_init__`), the
per-step inputs the trainer must compute for it, how to turn one group of trajectories into
per-turn advantages, and one row of the docs table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.common import Ragged


@dataclass(frozen=True)
class Group:
    """One group (the G rollouts of one task) as a method's adapter sees it; failed members are left out.

    Args:
        trajectories: the group's non-failed trajectories.
        outcomes: R_i of each, as the method's `outcome` parameter names it.
        inputs: the method's per-step inputs, name -> one entry per member (in member order).
        index: each member's position in the batch (for error messages).
    """

    trajectories: Sequence[Trajectory]
    outcomes: np.ndarray
    inputs: Mapping[str, Sequence[Any]]
    index: Sequence[int]


@dataclass(frozen=True)
class CreditMethod:
    """A credit-assignment method, as the registry, the config and the trainer know it.

    Args:
        name: the config name (`credit=<name>`).
        params: a dataclass of the method's settings: one field per parameter with its default
            (the authors' value where published), `Literal` choices, and range checks in its
            `__post_init__` (raising `ConfigError` with every problem). Its `outcome` field names R_i.
        advantages: (group, params) -> per-turn advantages of each member, in member order.
        inputs: names of the per-step inputs the trainer computes for each batch (e.g. IGPO's
            `answer_probs`); they are arguments of `compute_advantages`, never settings.
        summary: the paper, in a few words (docs table).
        unit: what one advantage belongs to: trajectory, turn or step.
        formula: the advantage of one group, in one line.
        needs: what the env (or the trainer) must provide.
        default: what the default parameters do, and whose scheme that is (docs table).
        options: the other conventions, as named parameter values (docs table; the parameter list
            with defaults is appended).
        differences: known differences of the default from the authors' code, and why (docs table).
        trainer: trainer settings that go with the method's advantage, nested as in the config's
            `trainer` section (e.g. Dr. GRPO's loss aggregation); `credit=<name>` sets them, and an
            explicit `trainer....` override still wins.
        step_group_sizes: for methods that form step groups: the members' trajectories ->
            {step-group size: count}, reported in the statistics.
    """

    name: str
    params: type
    advantages: Callable[[Group, Any], Ragged]
    inputs: tuple[str, ...] = ()
    summary: str = ""
    unit: str = "trajectory"
    formula: str = ""
    needs: str = ""
    default: str = ""
    options: str = ""
    differences: str = ""
    trainer: Mapping[str, Any] = field(default_factory=dict)
    step_group_sizes: Callable[[Sequence[Trajectory]], Mapping[int, int]] | None = None


def eps_problems(eps: float) -> list[str]:
    """The std stabiliser of methods that z-score (see `common.normalize`) must be >= 0."""
    return [] if eps >= 0 else [f"eps must be >= 0, got {eps}"]


def discount_problems(gamma: float) -> list[str]:
    """gamma must lie in [0, 1]."""
    return [] if 0.0 <= gamma <= 1.0 else [f"gamma must be in [0, 1], got {gamma}"]
