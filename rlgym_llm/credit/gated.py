"""Gated reward accumulation (G-RA; Sun et al. 2025, "Stabilizing Long-term Multi-turn Reinforcement
Learning with Gated Rewards", arXiv 2508.10548) and its ungated baseline (D-RA).

Immediate (step) rewards count only when the long-term reward reaches a threshold, so shaping
rewards cannot be farmed without doing the task. No official code exists; tau and the reward levels
are not public, so both are parameters here. The gate reads the env's ordered outcome level (the
last turn's `outcome_level` signal: SWE-v0 no submission 0 < empty patch 1 < patch fails tests 2 <
tests pass 3; Code-v0 no submission 0 < no hidden test passes 1 < some pass 2 < all pass 3) and
opens at level 2, where the paper's SWE gate sits (a non-empty patch was submitted); an env with
no level falls back to the outcome R against `outcome_tau`. Setting `tau` for an env that reports
no level is a `ConfigError` (it would have no effect), raised at the run's first credit assignment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.common import Ragged, as_array, discounted_returns, normalize, normalize_pooled
from rlgym_llm.credit.method import CreditMethod, Group, discount_problems, eps_problems
from rlgym_llm.credit.trajectories import turn_matrix


def priority_gates(levels: Sequence[float] | np.ndarray, thresholds: Sequence[float] | np.ndarray) -> np.ndarray:
    """The general multi-level gate: channel k counts only if every higher-priority channel j < k
    meets its threshold.

    gate_0 = 1;  gate_k = prod_{j < k} 1[level_j >= delta_j]

    Args:
        levels: each channel's value, highest priority first (e.g. [outcome, sum of format rewards]).
        thresholds: delta_j per channel (the last channel's threshold gates nothing below it).

    Returns:
        A bool array: whether each channel's reward is let through.
    """
    lv, th = as_array(levels), as_array(thresholds)
    if lv.shape != th.shape:
        raise ValueError(f"{lv.size} levels but {th.size} thresholds")
    met = lv >= th
    return np.concatenate([[True], np.cumprod(met[:-1]).astype(bool)])


def gated_turn_rewards(
    outcome: float,
    immediate: Sequence[Sequence[float]] | np.ndarray,
    *,
    tau: float,
    gate_level: float | None = None,
    weights: Sequence[float] | np.ndarray | float = 1.0,
    channel_thresholds: Sequence[float] | None = None,
    gated: bool = True,
    include_final: bool = False,
) -> np.ndarray:
    """Per-turn rewards of one trajectory under G-RA (or D-RA with gated=False).

    r~_t = sum_c gate_c * w_c * r_{t,c}  for the turns before the last (every turn with
    `include_final`),  plus R on the last turn, where
    gate_c = 1[L >= tau] * prod_{j < c} 1[sum_t r_{t,j} >= delta_j]   (`priority_gates` over
    [L, channel sums]), L the outcome level (`gate_level`, or R itself when None). With no channel
    thresholds (the G-RA form) every channel is gated on L alone.

    Args:
        outcome: R, the long-term (high-level) reward of the trajectory.
        immediate: r_{t,c}, shape (T,) for one channel or (T, C) for C channels in priority order.
        tau: the gate threshold on L.
        gate_level: L, the ordered outcome level the gate reads (None: R).
        weights: w_c, a scalar or one weight per channel.
        channel_thresholds: delta_j for channels 0..C-2 (their trajectory sums gate the channels
            after them); None leaves lower channels gated on L only.
        gated: False gives the ungated D-RA baseline (every immediate reward counts).
        include_final: also accumulate the last turn's immediate reward (the paper sums t < T).

    Returns:
        T per-turn rewards; their sum is the trajectory return G (see `gated_return`).
    """
    imm = np.asarray(immediate, dtype=np.float64)
    if imm.ndim == 1:
        imm = imm[:, None]
    if imm.ndim != 2:
        raise ValueError(f"immediate rewards must be (T,) or (T, C), got shape {imm.shape}")
    if imm.shape[0] == 0:
        return np.zeros(0)
    if not include_final:
        imm = imm.copy()
        imm[-1] = 0.0  # the final turn carries the outcome; its step reward is not accumulated
    n_ch = imm.shape[1]
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), (n_ch,))
    if not gated:
        gates = np.ones(n_ch, dtype=bool)
    else:
        deltas = [-np.inf] * max(n_ch - 1, 0) if channel_thresholds is None else list(channel_thresholds)
        if len(deltas) != max(n_ch - 1, 0):
            raise ValueError(f"{n_ch} channels need {n_ch - 1} channel thresholds, got {len(deltas)}")
        level = outcome if gate_level is None else gate_level
        levels = np.concatenate([[level], imm.sum(axis=0)])
        gates = priority_gates(levels, [tau, *deltas, -np.inf][: n_ch + 1])[1:]
    out = imm @ (w * gates)
    if out.size:
        out[-1] += outcome
    return out


def gated_return(outcome: float, immediate: Sequence[Sequence[float]] | np.ndarray, **kw) -> float:
    """G = R + 1[L >= tau] * sum_{t < T} sum_c w_c r_{t,c}  (D-RA: G = R + sum_{t < T} sum_c w_c r_{t,c}).

    Keyword arguments as in `gated_turn_rewards`. A trajectory with no turns returns R.
    """
    rewards = gated_turn_rewards(outcome, immediate, **kw)
    return float(rewards.sum()) if rewards.size else float(outcome)


def gated_advantages(
    immediate: Sequence[Sequence[Sequence[float]] | np.ndarray],
    outcomes: Sequence[float] | np.ndarray,
    *,
    tau: float,
    gate_levels: Sequence[float | None] | None = None,
    weights: Sequence[float] | np.ndarray | float = 1.0,
    channel_thresholds: Sequence[float] | None = None,
    gated: bool = True,
    include_final: bool = False,
    level: Literal["episode", "turn"] = "episode",
    gamma: float = 1.0,
    ddof: int = 0,
    eps: float = 1e-6,
) -> Ragged:
    """G-RA advantages for one group, normalised GRPO-style (the paper's RL algorithm is not public).

    episode (default): A_i = (G_i - mean_g G) / (std_g G + eps), the same value on every turn of i.
    turn: per-turn returns G_{i,t} = sum_{k >= t} gamma^(k - t) r~_{i,k} (the immediate terms of a turn
        count only when its trajectory's gate holds), z-scored pooled over all turns of the group.

    Args:
        immediate: per trajectory, (T_i,) or (T_i, C) immediate rewards.
        outcomes: per trajectory, the long-term reward R_i.
        tau: the gate threshold on the level.
        gate_levels: per trajectory, the outcome level the gate reads (None, or a None entry: R_i).
        weights, channel_thresholds, gated, include_final: as in `gated_turn_rewards`.
        level: `episode` or `turn`.
        gamma: discount of the per-turn returns (level="turn" only).
        ddof, eps: the std of the normalisation (see `normalize`).

    Returns:
        Per trajectory, one advantage per turn.
    """
    outs = as_array(outcomes)
    if len(immediate) != outs.size:
        raise ValueError(f"{len(immediate)} immediate-reward arrays for {outs.size} outcomes")
    levels = list(gate_levels) if gate_levels is not None else [None] * outs.size
    if len(levels) != outs.size:
        raise ValueError(f"{len(levels)} gate levels for {outs.size} outcomes")
    per_turn = [
        gated_turn_rewards(
            r,
            imm,
            tau=tau,
            gate_level=lv,
            weights=weights,
            channel_thresholds=channel_thresholds,
            gated=gated,
            include_final=include_final,
        )
        for r, imm, lv in zip(outs, immediate, levels)
    ]
    if level == "episode":
        returns = [float(r.sum()) if r.size else float(o) for r, o in zip(per_turn, outs)]
        adv = normalize(returns, ddof=ddof, eps=eps)
        return [np.full(r.size, a) for r, a in zip(per_turn, adv)]
    if level == "turn":
        return normalize_pooled([discounted_returns(r, gamma) for r in per_turn], ddof=ddof, eps=eps)
    raise ValueError(f"level must be 'episode' or 'turn', got {level!r}")


# --- registration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class GatedParams:
    """G-RA's parameters.

    Args:
        outcome: R_i: `reward`, or a named outcome component.
        gate: the per-turn signal holding the env's ordered outcome level L (read on the last turn);
            the gate opens when L >= tau. Envs that report none fall back to R_i >= outcome_tau.
        tau: the level threshold; null: `DEFAULT_TAU` (2, the paper's SWE gate: a non-empty patch
            was submitted): SWE-v0 no submission 0 < empty patch 1 < patch fails tests 2 < tests pass
            3; Code-v0 no submission 0 < no hidden test passes 1 < some pass 2 < all pass 3; BugFix-v0
            likewise. Set on an env that reports no level (Counter, Math, Ladder, TwentyQ), it would
            have no effect: a `ConfigError` (set `outcome_tau` there).
        outcome_tau: the threshold on R_i where the env reports no level (0.5: opens for an
            outcome of 1 and keeps it shut for 0, which on a binary outcome gates on success).
        immediate: immediate reward channels -> weight, in priority order (`reward_components`
            entries, or numeric signals such as `tool_ok`).
        channel_thresholds: delta_0, ... of the multi-level form (null: one gate, tau).
        gated: false gives the ungated baseline (D-RA; also `credit=dra`).
        include_final: also accumulate the last turn's immediate reward (the paper sums the turns
            before the final one, which carries the long-term reward).
        level: `episode` (one z-scored return per trajectory) or `turn` (z-scored per-turn returns).
        gamma: discount of the per-turn returns (`level: turn`).
        ddof, eps: the std of the normalisation.
    """

    outcome: str = "reward"
    gate: str = "outcome_level"
    tau: float | None = None
    outcome_tau: float = 0.5
    immediate: dict[str, float] = field(default_factory=lambda: {"tool_ok": 1.0})
    channel_thresholds: tuple[float, ...] | None = None
    gated: bool = True
    include_final: bool = False
    level: Literal["episode", "turn"] = "episode"
    gamma: float = 1.0
    ddof: Literal[0, 1] = 0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        problems = discount_problems(self.gamma) + eps_problems(self.eps)
        if not self.immediate:
            problems.append("immediate needs at least one channel, e.g. {tool_ok: 1.0}")
        n = len(self.immediate) - 1
        if self.channel_thresholds is not None and len(self.channel_thresholds) != n:
            problems.append(f"{len(self.immediate)} immediate channels need {n} channel_thresholds")
        if problems:
            raise ConfigError(problems)


@dataclass(frozen=True)
class DRAParams(GatedParams):
    """D-RA's parameters: G-RA's, with the gate off (`gated: false`); see `GatedParams`.

    Args:
        outcome, gate, tau, outcome_tau, immediate, channel_thresholds, include_final, level, gamma:
            as for G-RA (the gate settings are unused while gated is false).
        gated: false (true turns it into G-RA).
    """

    gated: bool = False


def gate_level(trajectory: Trajectory, signal: str) -> float | None:
    """The ordered outcome level L of a trajectory: its last turn's `signal`, None if not reported."""
    if not trajectory.turns:
        return None
    value = trajectory.turns[-1].signals.get(signal)
    return None if value is None or isinstance(value, bool) else float(value)


DEFAULT_TAU = 2.0
"""The level threshold when `tau` is not set: the paper's SWE gate (a non-empty patch was submitted)."""


def level_problems(trajectories: Sequence[Trajectory], p: GatedParams) -> list[str]:
    """Why `p` cannot gate these trajectories: an explicit `tau` where none reports the `gate` level.

    Trajectories without turns report nothing and are not counted; an empty list: fine.
    """
    played = [t for t in trajectories if t.turns]
    if p.tau is None or not p.gated or not played or any(gate_level(t, p.gate) is not None for t in played):
        return []
    env = played[0].env_id or "the env"
    return [
        f"credit.params.tau={p.tau:g} has no effect: {env} reports no `{p.gate}` signal, so G-RA gates on the "
        f"outcome (R >= outcome_tau={p.outcome_tau:g}); leave tau unset and set credit.params.outcome_tau, or "
        "use an env with outcome levels (SWE-v0, Code-v0, BugFix-v0)"
    ]


def _advantages(group: Group, p: GatedParams) -> Ragged:
    if problems := level_problems(group.trajectories, p):
        raise ConfigError(problems)
    imm = [turn_matrix(t, p.immediate) for t in group.trajectories]
    weights = np.array(list(p.immediate.values()), dtype=np.float64)
    levels = [gate_level(t, p.gate) for t in group.trajectories]
    tau: float
    if any(lv is None for lv in levels):  # no ordered level: gate on the outcome
        levels, tau = [None] * len(levels), p.outcome_tau
    else:
        tau = DEFAULT_TAU if p.tau is None else p.tau
    return gated_advantages(
        imm,
        group.outcomes,
        tau=tau,
        gate_levels=levels,
        weights=weights,
        channel_thresholds=p.channel_thresholds,
        gated=p.gated,
        include_final=p.include_final,
        level=p.level,
        gamma=p.gamma,
        ddof=p.ddof,
        eps=p.eps,
    )


_DEFAULT = (
    "The paper's G_i = R_i + 1[L_i >= tau] * sum_{t<T} w r_{i,t}: the immediate rewards of the turns before "
    "the last count when the outcome level L (the env's `outcome_level` signal) reaches tau = 2, the "
    "paper's SWE gate (a non-empty patch submitted); z-scored in the group (population std), the same value "
    "on every turn. Envs with no level gate on R_i >= 0.5 (`tau` set for such an env is an error: it would "
    "have no effect). Length effect by design: a gated-open success accumulates one reward per valid call."
)
_DIFFERENCES = (
    "No official code: tau, the reward values and the RL algorithm are not public; the group z-score "
    "(GRPO-style) is this library's choice. With a binary outcome and no level (gate = success), on an env "
    "where every success makes the same number of valid calls G-RA is an affine map of R, so exactly "
    "GRPO: `grpo_equal_share` in the metrics counts such groups, and the learning report gives no verdict."
)

METHODS = (
    CreditMethod(
        name="gated",
        params=GatedParams,
        advantages=_advantages,
        summary="G-RA (Sun et al. 2025)",
        unit="trajectory or turn",
        formula="G_i = R_i + 1[L_i >= tau] * sum_{t<T} w * r_{i,t}, then z-scored",
        needs="immediate reward channels, outcome, an ordered `outcome_level`",
        default=_DEFAULT,
        options=(
            "`gated: false` or `credit=dra` (D-RA, the paper's ungated baseline); `include_final: true`; "
            "`gate: <signal>` / `tau`; `channel_thresholds` (multi-level priority gates); `level: turn`."
        ),
        differences=_DIFFERENCES,
    ),
    CreditMethod(
        name="dra",
        params=DRAParams,
        advantages=_advantages,
        summary="D-RA, G-RA's ungated baseline (Sun et al. 2025)",
        unit="trajectory or turn",
        formula="G_i = R_i + sum_{t<T} w * r_{i,t}, then z-scored",
        needs="immediate reward channels, outcome",
        default=(
            "The paper's baseline G_i = R_i + sum_{t<T} w r_{i,t} (every immediate reward of the turns before "
            "the last), z-scored in the group; `credit=gated` with `gated: false`."
        ),
        options="`gated: true` (G-RA); `include_final: true`; `level: turn`.",
        differences="As for `gated`: reward values and the RL algorithm are not public.",
    ),
)
