"""One entry point for the trainer: trajectories in, per-turn advantages and statistics out.

    result = compute_advantages(trajectories, "grpo")
    token_adv = result.token_advantages(trajectories)   # aligned with each trajectory's token_ids

Trajectories are grouped by `group_id`; failed ones are left out of every group, get zero advantages
and are counted. `METHOD_PARAMS` lists each method's parameters and defaults (the authors' values).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.broadcast import token_advantages
from rlgym_llm.credit.common import Ragged, is_constant
from rlgym_llm.credit.gated import gated_advantages
from rlgym_llm.credit.info_gain import igpo_advantages
from rlgym_llm.credit.outcome import drgrpo_advantages, grpo_advantages, rloo_advantages
from rlgym_llm.credit.step_attribution import spa_advantages
from rlgym_llm.credit.step_groups import gigpo_advantages, step_group_sizes
from rlgym_llm.credit.trajectories import anchor_keys, group_indices, outcome_value, turn_matrix, turn_values
from rlgym_llm.credit.turn_level import turn_grpo_advantages

logger = logging.getLogger(__name__)

REQUIRED = object()
"""Marks a parameter with no default (a threshold the paper does not publish, or a per-trajectory input)."""

_STD = {"ddof": 0, "eps": 1e-6}
METHOD_PARAMS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "grpo": {"outcome": "reward", **_STD},
        "drgrpo": {"outcome": "reward"},
        "rloo": {"outcome": "reward"},
        "turn_grpo": {
            "outcome": "reward",
            "turn_reward": "tool_ok",
            "turn_coef": 1.0,
            "gamma": 0.0,  # the authors'; gamma > 0 sums positive turn z-scores, rewarding length
            "norm": "pooled",
            **_STD,
        },
        "gated": {
            "outcome": "reward",
            "tau": REQUIRED,
            "immediate": {"tool_ok": 1.0},
            "channel_thresholds": None,
            "gated": True,
            "level": "episode",
            "gamma": 1.0,
            **_STD,
        },
        "igpo": {
            "outcome": "reward",
            "answer_probs": REQUIRED,
            "kind": "prob_diff",
            "norm": "joint",
            "gamma": 1.0,
            **_STD,
        },
        "spa": {"outcome": "reward", "contributions": REQUIRED, "bonus": 0.5, "gamma": 0.99, **_STD},
        "gigpo": {"outcome": "reward", "step_reward": "reward", "gamma": 0.95, "omega": 1.0, "scale": "std", **_STD},
    }
)
"""Per method, its keyword parameters and defaults. Shared ones: `outcome` names R_i ("reward" or an
outcome component such as "f1"); `ddof`/`eps` choose the std (population by default) and its stabiliser."""


@dataclass(frozen=True)
class CreditStats:
    """What credit assignment saw and produced, for the metrics stream.

    Args:
        method: the estimator.
        n_trajectories, n_failed: all trajectories, and the failed ones (excluded, advantage 0).
        n_groups: groups with at least one non-failed trajectory.
        n_singleton_groups: groups left with one trajectory (no group-relative signal).
        n_zero_variance_groups: groups whose outcomes are all equal ("advantage collapse" for
            outcome methods; IGPO and GiGPO may still give them signal).
        n_zero_advantage_groups: groups whose every computed advantage is exactly 0.
        reward_mean, reward_std: of the outcomes of non-failed trajectories.
        adv_mean, adv_std, adv_abs_max: over all turns of non-failed trajectories.
        step_group_sizes: GiGPO only: {step-group size: count}; size 1 are singletons.
    """

    method: str
    n_trajectories: int
    n_failed: int
    n_groups: int
    n_singleton_groups: int
    n_zero_variance_groups: int
    n_zero_advantage_groups: int
    reward_mean: float
    reward_std: float
    adv_mean: float
    adv_std: float
    adv_abs_max: float
    step_group_sizes: Mapping[int, int] = field(default_factory=dict)

    @property
    def n_singleton_step_groups(self) -> int:
        return int(self.step_group_sizes.get(1, 0))

    def to_dict(self) -> dict[str, Any]:
        """Flat metrics (step-group sizes as `step_groups_size_<n>`)."""
        d = asdict(self)
        sizes = d.pop("step_group_sizes")
        d.update({f"step_groups_size_{k}": v for k, v in sizes.items()})
        if sizes:
            d["n_singleton_step_groups"] = self.n_singleton_step_groups
        return d


@dataclass(frozen=True)
class CreditResult:
    """Per-turn advantages (one array per trajectory, in input order) and statistics.

    Args:
        turn_advantages: A_{i,t} for every turn of every trajectory (zeros for failed ones).
        keep: per trajectory, False if it failed or its group's advantages are all 0: dropping those
            is DAPO's dynamic sampling (the trainer refills the batch). For outcome methods this is
            exactly the zero-variance filter; IGPO/GiGPO keep collapsed groups that still carry signal.
        stats: see `CreditStats`.
    """

    turn_advantages: list[np.ndarray]
    keep: np.ndarray
    stats: CreditStats

    def token_advantages(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """Per-token advantages aligned with each trajectory's `token_ids` (0 off the loss mask)."""
        return [token_advantages(t, a) for t, a in zip(trajectories, self.turn_advantages)]


def _per_trajectory(values: Any, name: str, n: int) -> Sequence[Any]:
    if values is None or len(values) != n:
        raise ValueError(
            f"`{name}` must hold one entry per trajectory ({n}), got {None if values is None else len(values)}"
        )
    return values


def _outcome_method(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Ragged]:
    def run(trajs: list[Trajectory], outs: np.ndarray, idx: list[int], p: dict[str, Any]) -> Ragged:
        kw = {k: p[k] for k in ("ddof", "eps") if k in p}
        return [np.full(len(t.turns), a) for t, a in zip(trajs, fn(outs, **kw))]

    return run


def _turn_grpo(trajs, outs, idx, p):
    rewards = [turn_values(t, p["turn_reward"]) for t in trajs]
    kw = {k: p[k] for k in ("turn_coef", "gamma", "norm", "ddof", "eps")}
    return turn_grpo_advantages(rewards, outs, **kw)


def _gated(trajs, outs, idx, p):
    channels = dict(p["immediate"])
    imm = [turn_matrix(t, channels) for t in trajs]
    kw = {k: p[k] for k in ("tau", "channel_thresholds", "gated", "level", "gamma", "ddof", "eps")}
    return gated_advantages(imm, outs, weights=np.array(list(channels.values()), dtype=np.float64), **kw)


def _igpo(trajs, outs, idx, p):
    probs = []
    for i, t in zip(idx, trajs):
        row = np.asarray(p["answer_probs"][i], dtype=np.float64)
        if row.size not in (len(t.turns), len(t.turns) + 1):
            raise ValueError(
                f"trajectory {i}: {row.size} answer probabilities for {len(t.turns)} turns (need T or T+1)"
            )
        probs.append(row[: len(t.turns)])
    return igpo_advantages(probs, outs, **{k: p[k] for k in ("kind", "norm", "gamma", "ddof", "eps")})


def _spa(trajs, outs, idx, p):
    contribs = [p["contributions"][i] for i in idx]
    tool_ok = [[turn.signals.get("tool_ok") for turn in t.turns] for t in trajs]
    return spa_advantages(contribs, tool_ok, **{k: p[k] for k in ("bonus", "gamma", "ddof", "eps")})


def _gigpo(trajs, outs, idx, p):
    rewards = [turn_values(t, p["step_reward"]) for t in trajs]
    keys = [anchor_keys(t) for t in trajs]
    return gigpo_advantages(rewards, outs, keys, **{k: p[k] for k in ("gamma", "omega", "scale", "ddof", "eps")})


_RUN: dict[str, Callable[..., Ragged]] = {
    "grpo": _outcome_method(grpo_advantages),
    "drgrpo": _outcome_method(drgrpo_advantages),
    "rloo": _outcome_method(rloo_advantages),
    "turn_grpo": _turn_grpo,
    "gated": _gated,
    "igpo": _igpo,
    "spa": _spa,
    "gigpo": _gigpo,
}


def resolve_params(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The method's parameters with defaults filled in.

    Raises:
        ConfigError: unknown method, unknown parameters or missing required ones, all listed at once.
    """
    if method not in METHOD_PARAMS:
        raise ConfigError([f"unknown credit method {method!r}; choose one of {', '.join(METHOD_PARAMS)}"])
    spec = METHOD_PARAMS[method]
    problems = [
        f"{method} has no parameter {k!r}; its parameters are {', '.join(spec)}" for k in params if k not in spec
    ]
    merged = {**spec, **params}
    problems += [f"{method} needs `{k}=` (no default)" for k, v in merged.items() if v is REQUIRED]
    if problems:
        raise ConfigError(problems)
    return merged


def compute_advantages(trajectories: Sequence[Trajectory], method: str, **params: Any) -> CreditResult:
    """Per-turn advantages for every trajectory with the named estimator.

    Args:
        trajectories: a batch, any number of groups (grouped by `group_id`, see `group_key`).
        method: grpo, drgrpo, rloo, turn_grpo, gated, igpo, spa or gigpo.
        **params: the method's parameters (`METHOD_PARAMS`). igpo needs `answer_probs` (per
            trajectory, p_0..p_{T-1} from the scoring pass over `info_gain.answer_probes`), spa needs
            `contributions` (per trajectory, the progress estimator's c_t); both are aligned with
            `trajectories` (entries of failed trajectories are ignored). gated needs `tau`.

    Returns:
        A `CreditResult`.
    """
    p = resolve_params(method, params)
    trajs = list(trajectories)
    for name in ("answer_probs", "contributions"):
        if name in p:
            _per_trajectory(p[name], name, len(trajs))
    groups, failed = group_indices(trajs)
    advantages: list[np.ndarray] = [np.zeros(len(t.turns)) for t in trajs]
    keep = np.zeros(len(trajs), dtype=bool)
    all_outs: list[float] = []
    sizes: dict[int, int] = {}
    n_singleton = n_zero_var = n_zero_adv = 0
    for idx in groups.values():
        members = [trajs[i] for i in idx]
        outs = np.array([outcome_value(t, p["outcome"]) for t in members], dtype=np.float64)
        all_outs.extend(outs)
        group_adv = _RUN[method](members, outs, idx, p)
        for i, a in zip(idx, group_adv):
            advantages[i] = np.asarray(a, dtype=np.float64)
        n_singleton += len(idx) == 1
        n_zero_var += is_constant(outs)
        dead = all(not np.any(a) for a in group_adv)
        n_zero_adv += dead
        keep[idx] = not dead
        if method == "gigpo":
            for size, count in step_group_sizes([anchor_keys(t) for t in members]).items():
                sizes[size] = sizes.get(size, 0) + count
    if sizes and set(sizes) == {1}:
        logger.warning(
            "gigpo: all %d step groups are singletons, so GiGPO reduces to GRPO; is the env's state_key "
            "history-free (no step counters, history or timestamps)?",
            sizes[1],
        )
    live = [advantages[i] for idx in groups.values() for i in idx]
    flat = np.concatenate(live) if live else np.zeros(0)
    stats = CreditStats(
        method=method,
        n_trajectories=len(trajs),
        n_failed=len(failed),
        n_groups=len(groups),
        n_singleton_groups=n_singleton,
        n_zero_variance_groups=n_zero_var,
        n_zero_advantage_groups=n_zero_adv,
        reward_mean=float(np.mean(all_outs)) if all_outs else 0.0,
        reward_std=float(np.std(all_outs)) if all_outs else 0.0,
        adv_mean=float(flat.mean()) if flat.size else 0.0,
        adv_std=float(flat.std()) if flat.size else 0.0,
        adv_abs_max=float(np.abs(flat).max()) if flat.size else 0.0,
        step_group_sizes=dict(sorted(sizes.items())),
    )
    if failed:
        logger.info("credit: %d of %d trajectories failed and get zero advantage", len(failed), len(trajs))
    return CreditResult(advantages, keep, stats)
