"""Outcome baselines: one advantage per trajectory from its group's final rewards.

GRPO (Shao et al. 2024, DeepSeekMath), Dr. GRPO (Liu et al. 2025, "Understanding R1-Zero-like
training"), RLOO (Ahmadian et al. 2024), and DAPO's dynamic-sampling filter (Yu et al. 2025).
Each function takes the G outcome rewards of one group and returns G advantages.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlgym_llm.credit.common import as_array, is_constant, normalize


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


def dynamic_sampling_keep(groups: Sequence[Sequence[float] | np.ndarray], *, min_size: int = 2) -> np.ndarray:
    """DAPO dynamic sampling: keep only groups whose rewards are not all equal.

    DAPO drops such groups and samples more prompts until the batch is full; this returns the keep
    mask, the refilling is the trainer's job.

    Args:
        groups: the outcome rewards of each group.
        min_size: groups smaller than this (e.g. after dropping failed episodes) are dropped too,
            since they carry no group-relative signal.

    Returns:
        A bool array, True for the groups to keep.
    """
    sizes = np.array([len(g) for g in groups], dtype=int)
    return ~zero_variance(groups) & (sizes >= min_size)
