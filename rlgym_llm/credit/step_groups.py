"""Step-level groups by anchor state (GiGPO; Feng et al. 2025, "Group-in-Group Policy Optimization for
LLM Agent Training", NeurIPS 2025, code langfengQ/verl-agent `gigpo/core_gigpo.py`).

Within a group of rollouts of one task, steps taken from the same state form a step group; a step's
discounted return is compared with the others of its step group. The anchor key must be history-free
(no step counters, timestamps, history) or every step group is a singleton and GiGPO reduces to GRPO.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.common import Ragged, Scale, as_array, discounted_returns, normalize
from rlgym_llm.credit.method import CreditMethod, Group, discount_problems, eps_problems
from rlgym_llm.credit.trajectories import anchor_keys as trajectory_anchors
from rlgym_llm.credit.trajectories import turn_values


def step_groups(anchor_keys: Sequence[Sequence[Hashable | None]]) -> list[list[tuple[int, int]]]:
    """The step groups of one group: lists of (trajectory, step) sharing an anchor key.

    A step with key None (the env reported no state) is a group of its own. Groups are ordered by
    first appearance.
    """
    by_key: dict[Hashable, list[tuple[int, int]]] = defaultdict(list)
    alone: list[list[tuple[int, int]]] = []
    for i, keys in enumerate(anchor_keys):
        for t, key in enumerate(keys):
            if key is None:
                alone.append([(i, t)])
            else:
                by_key[key].append((i, t))
    return [*by_key.values(), *alone]


def step_group_sizes(anchor_keys: Sequence[Sequence[Hashable | None]]) -> dict[int, int]:
    """Histogram of step-group sizes, {size: number of step groups}; size 1 are the singletons."""
    return dict(sorted(Counter(len(g) for g in step_groups(anchor_keys)).items()))


def gigpo_advantages(
    step_rewards: Sequence[Sequence[float] | np.ndarray],
    outcomes: Sequence[float] | np.ndarray,
    anchor_keys: Sequence[Sequence[Hashable | None]],
    *,
    gamma: float = 0.95,
    omega: float = 1.0,
    scale: Scale = "std",
    cross_steps: bool = True,
    ddof: int = 1,
    eps: float = 1e-6,
) -> Ragged:
    """GiGPO per-step advantages for one group.

    A^E_i = (R_i - mean_g R) / F                        (episode level, Eq. 3)
    R_{i,t} = sum_{k >= t} gamma^(k - t) r_{i,k}        (step returns, Eq. 5)
    A^S_{i,t} = (R_{i,t} - mean_{S(i,t)} R) / F         (S(i,t): steps from the same anchor state, Eq. 6-7)
    A_{i,t} = A^E_i + omega * A^S_{i,t}                 (Eq. 8)

    F is the std of the respective group + eps (scale="std", the authors' scripts) or 1 (scale="none",
    the yaml default). Singleton step groups and step groups with equal returns get A^S = 0. The
    sample std (ddof=1) is the authors' (`torch.std`).

    Episode statistics: with `cross_steps` (verl-agent's default, `compute_mean_std_cross_steps=True`)
    the mean and std of the episode level are taken over the group's step rows, each trajectory's R_i
    counted once per step, so longer trajectories weigh more; without it, once per trajectory.

    Args:
        step_rewards: per trajectory, the env reward of each step.
        outcomes: per trajectory, the episode reward R_i.
        anchor_keys: per trajectory, the key of the state each step was taken from (None: unknown).
        gamma: discount of the step returns [0.95].
        omega: weight of the step-level advantage [1.0].
        scale, ddof, eps: see `normalize`.
        cross_steps: episode statistics over step rows (True, the authors') or trajectories.

    Returns:
        Per trajectory, one advantage per step.
    """
    rewards = [as_array(r) for r in step_rewards]
    outs = as_array(outcomes)
    if cross_steps:
        episode = episode_advantages_cross_steps(outs, [r.size for r in rewards], scale=scale, ddof=ddof, eps=eps)
    else:
        episode = normalize(outs, scale=scale, ddof=ddof, eps=eps)
    if not len(rewards) == episode.size == len(anchor_keys):
        raise ValueError(f"{len(rewards)} reward arrays, {episode.size} outcomes, {len(anchor_keys)} key lists")
    for i, (r, keys) in enumerate(zip(rewards, anchor_keys)):
        if r.size != len(keys):
            raise ValueError(f"trajectory {i}: {r.size} step rewards but {len(keys)} anchor keys")
    returns = [discounted_returns(r, gamma) for r in rewards]
    step_adv = [np.zeros_like(r) for r in rewards]
    for members in step_groups(anchor_keys):
        if len(members) < 2:
            continue
        normed = normalize([returns[i][t] for i, t in members], scale=scale, ddof=ddof, eps=eps)
        for (i, t), a in zip(members, normed):
            step_adv[i][t] = a
    return [a_e + omega * a_s for a_e, a_s in zip(episode, step_adv)]


def episode_advantages_cross_steps(
    outcomes: np.ndarray, n_steps: Sequence[int], *, scale: Scale = "std", ddof: int = 1, eps: float = 1e-6
) -> np.ndarray:
    """A^E_i = (R_i - mean_rows) / (std_rows + eps), the statistics over step rows: R_i repeated T_i times."""
    if len(n_steps) != outcomes.size:
        raise ValueError(f"{outcomes.size} outcomes for {len(n_steps)} step counts")
    rows = np.repeat(outcomes, n_steps)
    if rows.size == 0 or np.all(rows == rows[0]):
        return np.zeros_like(outcomes)
    centred = outcomes - rows.mean()
    if scale == "none":
        return centred
    return centred / (rows.std(ddof=ddof if rows.size > ddof else 0) + eps)


# --- registration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GiGPOParams:
    """GiGPO's parameters.

    Args:
        outcome: R_i: `reward`, or a named outcome component.
        step_reward: the per-step reward channel r_{i,t} (`reward`: the env's step reward).
        gamma: discount of the step returns.
        omega: weight of the step-level advantage.
        scale: `std` (divide by std + eps, the authors' scripts) or `none`.
        cross_steps: episode mean/std over step rows (the authors' default) or over trajectories.
        ddof, eps: the std of the normalisation (the authors': sample std, 1e-6).
    """

    outcome: str = "reward"
    step_reward: str = "reward"
    gamma: float = 0.95
    omega: float = 1.0
    scale: Scale = "std"
    cross_steps: bool = True
    ddof: Literal[0, 1] = 1
    eps: float = 1e-6

    def __post_init__(self) -> None:
        if problems := discount_problems(self.gamma) + eps_problems(self.eps):
            raise ConfigError(problems)


def _advantages(group: Group, p: GiGPOParams) -> Ragged:
    rewards = [turn_values(t, p.step_reward) for t in group.trajectories]
    keys = [trajectory_anchors(t) for t in group.trajectories]
    return gigpo_advantages(
        rewards,
        group.outcomes,
        keys,
        gamma=p.gamma,
        omega=p.omega,
        scale=p.scale,
        cross_steps=p.cross_steps,
        ddof=p.ddof,
        eps=p.eps,
    )


def _step_group_sizes(trajectories: Sequence[Trajectory]) -> dict[int, int]:
    return step_group_sizes([trajectory_anchors(t) for t in trajectories])


METHODS = (
    CreditMethod(
        name="gigpo",
        params=GiGPOParams,
        advantages=_advantages,
        summary="GiGPO (Feng et al. 2025)",
        unit="step",
        formula="A_{i,t} = A^E_i + omega * A^S_{i,t} over same-state step groups",
        needs="`state_key`, step rewards",
        step_group_sizes=_step_group_sizes,
        default=(
            "verl-agent's GiGPO: A^E_i = (R_i - mean) / (std + 1e-6) with the episode statistics over the "
            "group's step rows (`cross_steps`, `compute_mean_std_cross_steps=True`: R_i once per step, so "
            "longer trajectories weigh more), plus omega = 1 times A^S, the discounted step return "
            "(gamma 0.95) z-scored within its step group (steps from the same `state_key`); sample std; "
            "singleton step groups get A^S = 0."
        ),
        options=(
            "`cross_steps: false` (episode statistics once per trajectory, the textbook form); `scale: none` "
            "(mean-only, the yaml's `mean_norm`); `ddof: 0`."
        ),
        differences=(
            "No invalid-action penalty (0.1 in the authors' scripts) and no similarity-based step grouping; "
            "the anchor is the env's `state_key`, not the raw observation."
        ),
    ),
)
