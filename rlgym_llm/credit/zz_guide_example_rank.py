"""Centred group ranks: A_i = rank(R_i) / (G - 1) - 1/2, ties averaged (fitness shaping as in
evolution strategies; invariant to any monotone transform of the reward)."""

from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit.common import Ragged, as_array
from rlgym_llm.credit.method import CreditMethod, Group


def rank_advantages(rewards, *, scale: float = 1.0) -> np.ndarray:
    """Centred ranks of one group's outcomes, in [-scale/2, scale/2]; 0 for a group of one."""
    r = as_array(rewards)
    if r.size < 2:
        return np.zeros_like(r)
    ranks = np.array([(r < x).sum() + ((r == x).sum() - 1) / 2 for x in r], dtype=np.float64)
    return scale * (ranks / (r.size - 1) - 0.5)


@dataclass(frozen=True)
class RankParams:
    """The rank method's parameters.

    Args:
        outcome: R_i: `reward`, or a named outcome component.
        scale: the advantage spread.
        ties: how equal outcomes rank (only `average` is implemented).
    """

    outcome: str = "reward"
    scale: float = 1.0
    ties: Literal["average"] = "average"

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ConfigError([f"scale must be > 0, got {self.scale}"])


def _advantages(group: Group, p: RankParams) -> Ragged:
    adv = rank_advantages(group.outcomes, scale=p.scale)
    return [np.full(len(t.turns), a) for t, a in zip(group.trajectories, adv)]


METHODS = (
    CreditMethod(
        name="rank",
        params=RankParams,
        advantages=_advantages,
        summary="centred ranks (fitness shaping)",
        formula="A_i = rank(R_i) / (G - 1) - 1/2",
        needs="outcome",
    ),
)
