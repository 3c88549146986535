"""One entry point for the trainer: trajectories in, per-turn advantages and statistics out.

    result = compute_advantages(trajectories, "grpo")
    token_adv = result.token_advantages(trajectories)   # aligned with each trajectory's token_ids

Trajectories are grouped by `group_id`; failed ones are left out of every group, get zero advantages
and are counted. The methods, their parameters and defaults are in `registry.METHODS`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlgym_llm.core import validation
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.broadcast import token_advantages
from rlgym_llm.credit.common import is_constant, normalize
from rlgym_llm.credit.method import CreditMethod, Group
from rlgym_llm.credit.registry import METHODS
from rlgym_llm.credit.trajectories import group_indices, outcome_value

logger = logging.getLogger(__name__)


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
        n_grpo_equal_groups: groups whose advantages equal GRPO's on their outcomes (every turn of
            trajectory i gets z(R)_i, to 1e-4 relative: the std eps breaks exact affine invariance): where a method is GRPO in disguise.
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
    n_grpo_equal_groups: int
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
            is DAPO's dynamic sampling (the trainer refills the batch up to `trainer.max_draws` draws). For outcome methods this is
            exactly the zero-variance filter; IGPO/GiGPO keep collapsed groups that still carry signal.
        stats: see `CreditStats`.
    """

    turn_advantages: list[np.ndarray]
    keep: np.ndarray
    stats: CreditStats

    def token_advantages(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """Per-token advantages aligned with each trajectory's `token_ids` (0 off the loss mask)."""
        return [token_advantages(t, a) for t, a in zip(trajectories, self.turn_advantages)]


def get_method(name: str) -> CreditMethod:
    """The registered method `name`.

    Raises:
        ConfigError: no method of that name (with the closest one).
    """
    if name not in METHODS:
        raise ConfigError(
            [
                f"unknown credit method {name!r}{validation.did_you_mean(name, METHODS)}; choose one of {', '.join(METHODS)}"
            ]
        )
    return METHODS[name]


def resolve_params(name: str, params: Mapping[str, Any], path: str = "") -> Any:
    """The method's parameters (its `params` dataclass), defaults filled in.

    Args:
        name: the method.
        params: the settings to override, e.g. `{"tau": 0.75}`.
        path: prefix of the keys in messages, e.g. `credit.params.`.

    Raises:
        ConfigError: an unknown method, unknown parameters (with the closest name), values of the
            wrong type or outside their choices, failed range checks, or a per-step input set as a
            parameter: all of them at once.
    """
    m = get_method(name)
    misplaced = [
        f"`{path}{k}` is not a setting: {name}'s trainer computes this per-step input for every batch"
        for k in params
        if k in m.inputs
    ]
    settings = {k: v for k, v in params.items() if k not in m.inputs}
    try:
        resolved: Any = validation.load(settings, m.params, path)
    except ConfigError as e:
        raise ConfigError(misplaced + e.problems) from None
    if misplaced:
        raise ConfigError(misplaced)
    return resolved


def compute_advantages(trajectories: Sequence[Trajectory], method: str, **kwargs: Any) -> CreditResult:
    """Per-turn advantages for every trajectory with the named estimator.

    Args:
        trajectories: a batch, any number of groups (grouped by `group_id`, see `group_key`).
        method: a registered method (`registry.METHODS`): grpo, turn_grpo, gated, igpo, ...
        **kwargs: the method's parameters (its `params` dataclass's fields; defaults for the rest),
            and its per-step inputs, each one entry per trajectory aligned with `trajectories`
            (entries of failed trajectories are ignored): igpo's `answer_probs` (p_0..p_{T-1}
            from the scoring pass over `info_gain.answer_probes`), spa's `contributions` (the
            progress estimator's c_t).

    Returns:
        A `CreditResult`.

    Raises:
        ConfigError: bad parameters (see `resolve_params`).
        ValueError: a per-step input is missing or has the wrong length.
    """
    m = get_method(method)
    p = resolve_params(method, {k: v for k, v in kwargs.items() if k not in m.inputs})
    trajs = list(trajectories)
    inputs = {}
    for name in m.inputs:
        values = kwargs.get(name)
        if values is None or len(values) != len(trajs):
            got = "none" if values is None else len(values)
            raise ValueError(f"{method}'s input `{name}` must hold one entry per trajectory ({len(trajs)}), got {got}")
        inputs[name] = values
    groups, failed = group_indices(trajs)
    advantages: list[np.ndarray] = [np.zeros(len(t.turns)) for t in trajs]
    keep = np.zeros(len(trajs), dtype=bool)
    all_outs: list[float] = []
    sizes: dict[int, int] = {}
    n_singleton = n_zero_var = n_zero_adv = n_grpo_equal = 0
    for idx in groups.values():
        members = [trajs[i] for i in idx]
        outs = np.array([outcome_value(t, p.outcome) for t in members], dtype=np.float64)
        all_outs.extend(outs)
        group = Group(members, outs, {name: [v[i] for i in idx] for name, v in inputs.items()}, idx)
        group_adv = m.advantages(group, p)
        for i, a in zip(idx, group_adv):
            advantages[i] = np.asarray(a, dtype=np.float64)
        n_singleton += len(idx) == 1
        n_zero_var += is_constant(outs)
        dead = all(not np.any(a) for a in group_adv)
        n_zero_adv += dead
        grpo = normalize(outs)
        n_grpo_equal += all(np.allclose(a, g, rtol=1e-4, atol=1e-6) for a, g in zip(group_adv, grpo))
        keep[idx] = not dead
        if m.step_group_sizes is not None:
            for size, count in m.step_group_sizes(members).items():
                sizes[size] = sizes.get(size, 0) + count
    if sizes and set(sizes) == {1}:
        logger.warning(
            "%s: all %d step groups are singletons, so it reduces to GRPO; is the env's state_key "
            "history-free (no step counters, history or timestamps)?",
            method,
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
        n_grpo_equal_groups=n_grpo_equal,
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
