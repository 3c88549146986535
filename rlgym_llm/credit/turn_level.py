"""Turn-level GRPO (MT-GRPO; Zeng et al. 2025, "Reinforcing Multi-Turn Reasoning in LLM Agents via
Turn-Level Credit Assignment", code SiliangZeng/Multi-Turn-RL-Agent).

Turn rewards and outcome rewards are normalised separately within the group, then combined per turn.
The authors' code (`mt_grpo_env_trainer.py`) is the default: turn rewards belong to the tool turns,
z-scored per turn index over the group with the sample std and eps 1e-4; a tool turn gets
A^O + lambda * A^T, the final (answer) turn gets A^O, and a rollout that never got a tool result
gets the combined z-score A^C = z(R^T + R^O) on every turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit.common import Ragged, as_array, discounted_returns, normalize
from rlgym_llm.credit.method import CreditMethod, Group, discount_problems, eps_problems
from rlgym_llm.credit.trajectories import turn_values

TurnNorm = Literal["per_index", "pooled"]


def normalize_turn_rewards(
    turn_rewards: Sequence[Sequence[float] | np.ndarray],
    *,
    norm: TurnNorm = "per_index",
    final_turn_reward: bool = False,
    ddof: int = 1,
    eps: float = 1e-4,
) -> Ragged:
    """Group z-scores of turn rewards: A^T_{i,t} (0 where a turn has no turn reward).

    Which turns carry a turn reward: with `final_turn_reward` False (the authors') only the tool
    turns, i.e. every turn but the last; a single-turn rollout (no tool turn) takes part in the
    turn-0 statistics with reward 0, as the authors' R^T of a rollout without a tool call is 0.
    With `final_turn_reward` True every turn's channel value is a turn reward.

    per_index (the authors'): A^T_{i,t} = (r_{i,t} - mean_j r_{j,t}) / (std_j r_{j,t} + eps) over the
        rollouts that have a turn reward at index t (the paper's two-turn form, generalised).
    pooled: one mean/std over every turn reward of the group. Per-index statistics are biased when
        the policy decides when to stop (verl RFC #7244); pooling is that RFC's alternative.
    """
    arrays = [as_array(r) for r in turn_rewards]
    # (trajectory, turn) of every turn reward, and the value that enters the statistics
    slots: list[tuple[int, int]] = []
    values: list[float] = []
    for i, r in enumerate(arrays):
        scored = r.size if final_turn_reward else r.size - 1
        for t in range(scored):
            slots.append((i, t))
            values.append(float(r[t]))
        if not final_turn_reward and r.size == 1:
            slots.append((i, -1))  # no tool turn: R^T = 0 in the turn-0 statistics, no advantage of its own
            values.append(0.0)
    out = [np.zeros_like(a) for a in arrays]
    if norm == "pooled":
        buckets = [list(range(len(slots)))]
    elif norm == "per_index":
        by_index: dict[int, list[int]] = {}
        for k, (_, t) in enumerate(slots):
            by_index.setdefault(max(t, 0), []).append(k)
        buckets = list(by_index.values())
    else:
        raise ValueError(f"norm must be 'per_index' or 'pooled', got {norm!r}")
    for bucket in buckets:
        normed = normalize([values[k] for k in bucket], ddof=ddof, eps=eps)
        for k, z in zip(bucket, normed):
            i, t = slots[k]
            if t >= 0:
                out[i][t] = z
    return out


def turn_grpo_advantages(
    turn_rewards: Sequence[Sequence[float] | np.ndarray],
    outcomes: Sequence[float] | np.ndarray,
    *,
    turn_coef: float = 1.0,
    gamma: float = 0.0,
    norm: TurnNorm = "per_index",
    final_turn_reward: bool = False,
    no_tool_fallback: bool = True,
    ddof: int = 1,
    eps: float = 1e-4,
) -> Ragged:
    """MT-GRPO per-turn advantages for one group.

    A^O_i = (R_i - mean_g R) / (std_g R + eps)
    A^T_{i,t} = group z-score of the turn reward r_{i,t} (see `normalize_turn_rewards`)
    A_{i,t} = A^O_i + lambda * sum_{k >= t} gamma^(k - t) A^T_{i,k}
    A^C_i = z(sum_{t < T_i - 1} r_{i,t} + R_i) on every turn of a single-turn rollout (`no_tool_fallback`)

    With the defaults (lambda 1, gamma 0, per-index, sample std, eps 1e-4) and two turns this is the
    authors' code: the tool turn gets A^O + A^T, the answer turn A^O, a rollout that answered without
    calling the tool A^C. The T-turn form (a turn reward on every turn but the last) generalises it.

    Args:
        turn_rewards: per trajectory, the channel value of each turn (r_{i,t}; the last turn's value
            is unused unless `final_turn_reward`).
        outcomes: per trajectory, the outcome reward R_i.
        turn_coef: lambda, the weight of the turn term.
        gamma: discount over later turns' turn advantages. 0 (default) keeps each turn's own; with
            gamma > 0 a z-scored turn reward is positive on every ordinary valid turn, so the sum
            grows with episode length and can credit a long failed episode above a short success.
        norm: `per_index` (the authors') or `pooled` normalisation of the turn rewards.
        final_turn_reward: also score the last turn's channel value as a turn reward (not the authors').
        no_tool_fallback: single-turn rollouts get A^C (the authors') instead of A^O.
        ddof, eps: the std of every normalisation (see `normalize`); the authors': 1 and 1e-4.

    Returns:
        Per trajectory, one advantage per turn.
    """
    rewards = [as_array(r) for r in turn_rewards]
    outs = as_array(outcomes)
    if len(rewards) != outs.size:
        raise ValueError(f"{len(rewards)} turn-reward arrays for {outs.size} outcomes")
    outcome_adv = normalize(outs, ddof=ddof, eps=eps)
    turn_adv = normalize_turn_rewards(turn_rewards, norm=norm, final_turn_reward=final_turn_reward, ddof=ddof, eps=eps)
    out = [a_o + turn_coef * discounted_returns(a_t, gamma) for a_o, a_t in zip(outcome_adv, turn_adv)]
    if no_tool_fallback and any(r.size == 1 for r in rewards):
        combined = normalize([float(r[:-1].sum()) + o for r, o in zip(rewards, outs)], ddof=ddof, eps=eps)
        for i, r in enumerate(rewards):
            if r.size == 1:
                out[i] = np.full(1, combined[i])
    return out


# --- registration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnGRPOParams:
    """MT-GRPO's parameters (defaults: the authors' code).

    Args:
        outcome: R_i: `reward`, or a named outcome component.
        turn_reward: the per-turn reward channel r_{i,t}: `reward` (the env's step reward), a
            `reward_components` entry, or a numeric signal such as `tool_ok` or `progress`.
        turn_coef: lambda, the weight of the turn term.
        gamma: discount over later turns' turn advantages (0, the authors': each turn's own).
        norm: `per_index` (the authors') or `pooled` normalisation of the turn rewards.
        final_turn_reward: also z-score the last turn's channel value as a turn reward (false: the
            answer turn gets A^O only, the authors').
        no_tool_fallback: a single-turn rollout gets the combined z-score A^C (the authors').
        ddof, eps: the std of the normalisations (the authors': sample std, 1e-4).
    """

    outcome: str = "reward"
    turn_reward: str = "tool_ok"
    turn_coef: float = 1.0
    gamma: float = 0.0
    norm: TurnNorm = "per_index"
    final_turn_reward: bool = False
    no_tool_fallback: bool = True
    ddof: Literal[0, 1] = 1
    eps: float = 1e-4

    def __post_init__(self) -> None:
        if problems := discount_problems(self.gamma) + eps_problems(self.eps):
            raise ConfigError(problems)


def _advantages(group: Group, p: TurnGRPOParams) -> Ragged:
    rewards = [turn_values(t, p.turn_reward) for t in group.trajectories]
    return turn_grpo_advantages(
        rewards,
        group.outcomes,
        turn_coef=p.turn_coef,
        gamma=p.gamma,
        norm=p.norm,
        final_turn_reward=p.final_turn_reward,
        no_tool_fallback=p.no_tool_fallback,
        ddof=p.ddof,
        eps=p.eps,
    )


METHODS = (
    CreditMethod(
        name="turn_grpo",
        params=TurnGRPOParams,
        advantages=_advantages,
        summary="MT-GRPO (Zeng et al. 2025)",
        unit="turn",
        formula="A_{i,t} = A^O_i + lambda * sum_{k>=t} gamma^{k-t} A^T_{i,k}",
        needs="a per-turn reward channel",
        default=(
            "The authors' code: every tool turn (all but the last) gets A^O + lambda A^T, with A^T its turn "
            "reward z-scored per turn index over the group; the final (answer) turn gets A^O; a rollout "
            "that never got a tool result gets A^C = z(R^T + R^O) on its turn. Sample std + 1e-4, lambda 1, "
            "no discount."
        ),
        options=(
            "`norm: pooled` (one mean/std over every turn reward of the group: verl RFC #7244's fix for the "
            "per-index bias when the policy decides when to stop); `final_turn_reward: true` (the last "
            "turn's channel value is z-scored too; with `norm: pooled` this library's earlier default, which "
            "gave the answer turn 0.32 where the authors give A^O = 1); `gamma > 0` (discounted sum of later "
            "turns' A^T); `no_tool_fallback: false`."
        ),
        differences=(
            "The authors have exactly two turns (tool, answer); T turns generalise it with a turn reward "
            "on every turn but the last. Their turn reward is 0.2 x tool success + 0.5 if the answer is in "
            "the results, their outcome exact match + format terms; here both are channels "
            "(`turn_reward: tool_ok`, `outcome: reward`)."
        ),
    ),
)
