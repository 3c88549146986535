"""Stepwise progress attribution (SPA-RL; Wang et al. 2025, "SPA-RL: Reinforcing LLM Agents via
Stepwise Progress Attribution", arXiv 2505.20732, code WangHanLinHenry/SPA-RL-Agent).

A progress estimator (trained elsewhere, on explored trajectories) splits each trajectory's outcome
into per-step contributions c_t; a grounding bonus rewards executable actions. The paper trains with
PPO and a value head (GAE, gamma 0.99, lambda 0.95); here, critic-free, each step's reward is
z-scored over the group's steps and is the step's advantage (gamma 0): the estimator is trained so
that the contributions add up to the outcome, so c_t already plays the part of the TD error
V(s_{t+1}) - V(s_t) that GAE sums, and a return summed over later steps would grow with the
number of steps. This is the library's choice, not the paper's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit.common import Ragged, as_array, discounted_returns, normalize_pooled
from rlgym_llm.credit.method import CreditMethod, Group, discount_problems, eps_problems


def grounding_rewards(tool_ok: Sequence[bool | None], *, bonus: float = 0.5) -> np.ndarray:
    """g_t = bonus if step t's action executed (tool_ok is True) else 0; the last step always gets bonus.

    The authors' g_t is 0.5 when the next observation is not ALFWorld's "Nothing happens"; here the
    env's `tool_ok` signal plays that role (None, no tool called, counts as not executed).
    """
    g = np.array([bonus if ok is True else 0.0 for ok in tool_ok], dtype=np.float64)
    if g.size:
        g[-1] = bonus
    return g


def spa_step_rewards(
    contributions: Sequence[float] | np.ndarray, tool_ok: Sequence[bool | None], *, bonus: float = 0.5
) -> np.ndarray:
    """r~_t = c_t + g_t, the intermediate reward of each step.

    Uses the estimator's c_t, as the paper describes; the released RL-data script overwrites c_t with
    a leave-one-out trajectory advantage, an artefact not copied here.
    """
    c = as_array(contributions)
    g = grounding_rewards(tool_ok, bonus=bonus)
    if c.size != g.size:
        raise ValueError(f"{c.size} contributions for {g.size} steps")
    return c + g


def spa_advantages(
    contributions: Sequence[Sequence[float] | np.ndarray],
    tool_ok: Sequence[Sequence[bool | None]],
    *,
    bonus: float = 0.5,
    gamma: float = 0.0,
    ddof: int = 0,
    eps: float = 1e-6,
) -> Ragged:
    """Critic-free SPA advantages for one group.

    r~_{i,t} = c_{i,t} + g_{i,t};  z-score r~ pooled over every step of the group;
    A_{i,t} = sum_{k >= t} gamma^(k - t) z(r~)_{i,k}   (gamma 0: A_{i,t} = z(r~)_{i,t}).

    With gamma 0 a step's advantage depends only on its own reward and the group's step statistics,
    so two trajectories that differ only in length are not ranked by length. With gamma > 0 the sum
    of centred rewards over later steps grows (or shrinks) with the number of steps.

    Args:
        contributions: per trajectory, the estimator's c_{i,t}.
        tool_ok: per trajectory, whether each step's action executed.
        bonus: the grounding reward [0.5].
        gamma: discount of the sum over later steps [0: none; the paper's PPO uses 0.99 with a critic].
        ddof, eps: the std of the normalisation (see `normalize`).

    Returns:
        Per trajectory, one advantage per step.
    """
    if len(contributions) != len(tool_ok):
        raise ValueError(f"{len(contributions)} contribution arrays for {len(tool_ok)} tool_ok arrays")
    rewards = [spa_step_rewards(c, ok, bonus=bonus) for c, ok in zip(contributions, tool_ok)]
    return [discounted_returns(r, gamma) for r in normalize_pooled(rewards, ddof=ddof, eps=eps)]


def progress_estimator_loss(
    contributions: Sequence[Sequence[float] | np.ndarray], outcomes: Sequence[float] | np.ndarray
) -> float:
    """The estimator's training loss, mean over trajectories: L = mean_i (sum_t c_{i,t} - R_i)^2.

    A numpy reference for the torch estimator in `train/`, which must agree with it.
    """
    outs = as_array(outcomes)
    if len(contributions) != outs.size:
        raise ValueError(f"{len(contributions)} contribution arrays for {outs.size} outcomes")
    if outs.size == 0:
        raise ValueError("no trajectories")
    preds = np.array([as_array(c).sum() for c in contributions])
    return float(np.mean((preds - outs) ** 2))


# --- registration ------------------------------------------------------------------------------


PRIVILEGED_SIGNALS = frozenset({"progress", "subgoals", "tests", "outcome_level"})
"""Signals that measure task completion itself: features of the estimator only with `privileged: true`."""


@dataclass(frozen=True)
class SPAParams:
    """SPA's parameters (its per-step input, `contributions`, comes from the trainer's progress estimator).

    Args:
        outcome: R_i, the outcome the estimator's contributions add up to.
        estimator: `offline` (the paper's protocol: fit on warm-up explorations, then freeze) or
            `online` (refit on every training batch, then score it).
        features: `hidden` (the last-token hidden state of each turn under a frozen copy of the
            starting policy: the paper's estimator reads the SFT model) or `signals` (env signals).
        signals: the per-turn signals read with `features: signals`.
        privileged: allow signals that measure task completion itself (`progress`, `subgoals`,
            `tests`, `outcome_level`) as features.
        explore_tasks: warm-up tasks (each rolled out group_size times by the starting policy) the
            offline estimator is fitted on (0: the first training batch).
        epochs: training passes of each fit.
        head_hidden: width of the estimator's MLP head (0: linear, as the authors' head).
        bonus: the grounding reward of a step whose tool call ran.
        gamma: discount of the sum over later steps' z-scored rewards (0: each step its own; > 0
            reintroduces a length effect).
        ddof, eps: the std of the normalisation.
    """

    outcome: str = "reward"
    estimator: Literal["offline", "online"] = "offline"
    features: Literal["hidden", "signals"] = "hidden"
    signals: tuple[str, ...] = ("tool_ok",)
    privileged: bool = False
    explore_tasks: int = 16
    epochs: int = 200
    head_hidden: int = 64
    bonus: float = 0.5
    gamma: float = 0.0
    ddof: Literal[0, 1] = 0
    eps: float = 1e-6

    def __post_init__(self) -> None:
        problems = discount_problems(self.gamma) + eps_problems(self.eps)
        leaked = sorted(PRIVILEGED_SIGNALS & set(self.signals))
        if leaked and not self.privileged:
            problems.append(
                f"signals {leaked} measure task completion itself (privileged); drop them, or set "
                "privileged: true to let the estimator read them"
            )
        if self.features == "signals" and not self.signals:
            problems.append("features: signals needs at least one signal, e.g. [tool_ok]")
        problems += [f"{k} must be >= 0" for k in ("explore_tasks", "head_hidden") if getattr(self, k) < 0]
        if self.epochs < 1:
            problems.append(f"epochs must be >= 1, got {self.epochs}")
        if problems:
            raise ConfigError(problems)


def _advantages(group: Group, p: SPAParams) -> Ragged:
    tool_ok = [[turn.signals.get("tool_ok") for turn in t.turns] for t in group.trajectories]
    contributions = list(group.inputs["contributions"])
    return spa_advantages(contributions, tool_ok, bonus=p.bonus, gamma=p.gamma, ddof=p.ddof, eps=p.eps)


METHODS = (
    CreditMethod(
        name="spa",
        params=SPAParams,
        advantages=_advantages,
        inputs=("contributions",),
        summary="SPA-RL (Wang et al. 2025)",
        unit="step",
        formula="r_{i,t} = c_{i,t} + g_{i,t}; z-scored; discounted",
        needs="`tool_ok`, a progress estimator",
        default=(
            "The paper's protocol: the progress estimator (an MLP head on the last-token hidden state of each "
            "turn under a frozen copy of the starting policy) is fitted once on warm-up explorations "
            "(`explore_tasks` x group size episodes of the starting policy) with L = (sum_t c_t - R)^2, then "
            "frozen. r~_{i,t} = c_{i,t} + g_{i,t} (g = 0.5 if the step's tool call ran, always on the last "
            "step), z-scored over every step of the group; each step's advantage is its own z-score (gamma 0), "
            "so two successes that differ only in length are not ranked by length."
        ),
        options=(
            "`estimator: online` (refit on every batch, then score it: this library's earlier default); "
            "`features: signals` with `signals: [...]` (env signals; privileged ones such as `progress` only "
            "with `privileged: true`); `explore_tasks: 0` (the first training batch is the exploration set); "
            "`gamma > 0` (sum of later steps' z-scored rewards: Monte Carlo returns, length-dependent)."
        ),
        differences=(
            "The paper runs PPO with a value head (GAE, gamma 0.99, lambda 0.95); this trainer is critic-free. "
            "The authors fine-tune the whole SFT model with a linear head on its output logits; here the "
            "backbone is frozen and only an MLP head on its hidden states is trained. "
            "Not copied from the released code: c_t overwritten by a leave-one-out advantage, and the step "
            "weight (n - t - 1) that zeroes the last step."
        ),
    ),
)
