"""Outcome baselines: one advantage per trajectory from its group's final rewards.

GRPO (Shao et al. 2024, DeepSeekMath), Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like
training") and RLOO (Ahmadian et al. 2024). Each function takes the G outcome rewards of one group
and returns G advantages; the same value goes to every turn of the trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit.common import Ragged, as_array, is_constant, normalize
from rlgym_llm.credit.method import CreditMethod, Group, eps_problems


def grpo_advantages(rewards: Sequence[float] | np.ndarray, *, ddof: int = 0, eps: float = 1e-6) -> np.ndarray:
    """GRPO group-normalised advantages.

    A_i = (R_i - mean_g R) / (std_g R + eps)

    Args:
        rewards: the G outcome rewards of one group.
        ddof: 0 (default) uses the population std, as IGPO's code does; 1 uses the sample std,
            as verl (`torch.std`) and TRL do. With small G the two differ by sqrt(G / (G - 1)).
        eps: stabiliser added to the std (verl: 1e-6, TRL/MT-GRPO: 1e-4).

    Returns:
        G advantages; exactly 0 for a group whose rewards are all equal.
    """
    return normalize(rewards, scale="std", ddof=ddof, eps=eps)


def drgrpo_advantages(rewards: Sequence[float] | np.ndarray) -> np.ndarray:
    """Dr. GRPO advantages: the group mean is subtracted, with no division by the std.

    A_i = R_i - mean_g R

    Dropping the std removes GRPO's up-weighting of near-constant (too easy / too hard) groups;
    the matching loss aggregation (token sums over a constant) lives in the trainer.
    """
    return normalize(rewards, scale="none")


def rloo_advantages(rewards: Sequence[float] | np.ndarray) -> np.ndarray:
    """REINFORCE leave-one-out advantages.

    A_i = R_i - (1 / (G - 1)) * sum_{j != i} R_j  =  G / (G - 1) * (R_i - mean_g R)

    A group of one has no baseline to leave out and gets 0.
    """
    r = as_array(rewards)
    if r.size < 2 or is_constant(r):
        return np.zeros_like(r)
    return (r - (r.sum() - r) / (r.size - 1)).astype(np.float64)


def zero_variance(groups: Sequence[Sequence[float] | np.ndarray]) -> np.ndarray:
    """Which groups have all-equal rewards (the "advantage collapse" groups: every outcome advantage is 0).

    Returns:
        A bool array, one entry per group.
    """
    return np.array([is_constant(as_array(g)) for g in groups], dtype=bool)


# --- registration ------------------------------------------------------------------------------


def _per_turn(group: Group, advantages: np.ndarray) -> Ragged:
    return [np.full(len(t.turns), a) for t, a in zip(group.trajectories, advantages)]


@dataclass(frozen=True)
class GRPOParams:
    """GRPO's parameters.

    Args:
        outcome: R_i: `reward`, or a named outcome component (e.g. `f1`).
        ddof: 0 divides by the population std, 1 by the sample std (verl, TRL).
        eps: added to the std.
    """

    outcome: str = "reward"
    ddof: Literal[0, 1] = 0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if problems := eps_problems(self.eps):
            raise ConfigError(problems)


@dataclass(frozen=True)
class OutcomeParams:
    """The parameters of Dr. GRPO and RLOO.

    Args:
        outcome: R_i: `reward`, or a named outcome component (e.g. `f1`).
    """

    outcome: str = "reward"


METHODS = (
    CreditMethod(
        name="grpo",
        params=GRPOParams,
        advantages=lambda g, p: _per_turn(g, grpo_advantages(g.outcomes, ddof=p.ddof, eps=p.eps)),
        summary="GRPO (Shao et al. 2024)",
        formula="A_i = (R_i - mean R) / (std R + eps)",
        needs="outcome",
    ),
    CreditMethod(
        name="drgrpo",
        params=OutcomeParams,
        advantages=lambda g, p: _per_turn(g, drgrpo_advantages(g.outcomes)),
        summary="Dr. GRPO (Liu et al. 2025)",
        formula="A_i = R_i - mean R",
        needs="outcome",
        default=(
            "The paper's pair: A_i = R_i - mean R (no std) with its unbiased loss, which `credit=drgrpo` sets: "
            "`trainer.loss.agg: seq-mean-token-sum-norm`, token sums over a constant, "
            "sum_i sum_k L_{i,k} / (N_seq x L_max), L_max = `trainer.loss.norm_const` (default: "
            "`policy.sampling.max_tokens` x `env.max_turns`)."
        ),
        options="`trainer.loss.agg=token-mean` (or any mode) overrides the paired aggregation.",
        differences=(
            "verl's `seq-mean-token-sum-norm` as the reference reads it (b178a3c) divides a micro-batch's token "
            "sum by `loss_scale_factor` (the max response length) only, then scales by 1 / grad-accumulation "
            "steps: its loss is this one times B / n_micro (sequences per micro-batch; hand case in "
            "tests/train/test_loss_reference.py). Later verl (seq-mean over the global batch) and TRL's "
            "`dr_grpo` (B x max_completion_length) equal this one. A constant factor: with Adam it matters "
            "only through eps and gradient clipping."
        ),
        trainer={"loss": {"agg": "seq-mean-token-sum-norm"}},
    ),
    CreditMethod(
        name="rloo",
        params=OutcomeParams,
        advantages=lambda g, p: _per_turn(g, rloo_advantages(g.outcomes)),
        summary="RLOO (Ahmadian et al. 2024)",
        formula="A_i = R_i - mean_{j != i} R_j",
        needs="outcome",
    ),
)
