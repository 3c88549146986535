"""Information-gain turn rewards (IGPO; Wang et al. 2025, "Information Gain-based Policy Optimization",
arXiv 2510.14967, code GuoqingWang1/IGPO at its 2026-02 update).

After each turn the policy scores the gold answer a* teacher-forced behind a fixed "answer now"
template; the rise of that probability is the turn's reward. The scoring pass itself runs in the
trainer; this module builds its inputs (token ids) and turns its outputs into advantages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.common import (
    Ragged,
    as_array,
    discounted_returns,
    normalize,
    normalize_per_index,
    normalize_pooled,
)
from rlgym_llm.credit.method import CreditMethod, Group, discount_problems, eps_problems

GainKind = Literal["prob_diff", "log_prob_diff"]
IGNorm = Literal["joint", "separate", "per_index"]

_TINY = 1e-30  # floor for log p: a probability that underflowed to 0 still has a finite log


@dataclass(frozen=True)
class AnswerProbe:
    """One teacher-forced scoring input: context + template prefix + answer + template suffix.

    Args:
        input_ids: the full token sequence to run through the policy (no sampling, no gradient).
        answer_start: index of the first answer token in `input_ids`.
        answer_end: one past the last answer token.
    """

    input_ids: tuple[int, ...]
    answer_start: int
    answer_end: int

    def answer_prob(self, token_logprobs: Sequence[float] | np.ndarray) -> float:
        """p = exp(mean_j log pi(a*_j | context, a*_<j)) from the per-token log-probs of `input_ids`.

        Args:
            token_logprobs: aligned with `input_ids`: entry k is log pi(input_ids[k] | input_ids[:k])
                (entry 0 is unused). A scorer that returns len-1 shifted log-probs must pad one in front.
        """
        lp = as_array(token_logprobs)
        if lp.size != len(self.input_ids):
            raise ValueError(f"{lp.size} log-probs for {len(self.input_ids)} probe tokens")
        return answer_prob(lp[self.answer_start : self.answer_end])


def answer_prob(answer_logprobs: Sequence[float] | np.ndarray) -> float:
    """The length-normalised (geometric-mean) answer probability: exp((1/m) sum_j log pi(a*_j | ...))."""
    lp = as_array(answer_logprobs)
    if lp.size == 0:
        raise ValueError("the answer has no tokens to score")
    return float(np.exp(lp.mean()))


def build_answer_probe(
    prefix_ids: Sequence[int],
    answer_ids: Sequence[int],
    *,
    template_prefix_ids: Sequence[int] = (),
    template_suffix_ids: Sequence[int] = (),
) -> AnswerProbe:
    """The scoring input for one context.

    The authors' template (Qwen) is "\\nNow there's enough information to answer\\n</think>\\n<answer>\\n"
    + a* + "\\n</answer><|im_end|>", appended after the context and "<think>"; pass its tokenised
    halves as `template_prefix_ids` / `template_suffix_ids`. The suffix is scored but not averaged.
    """
    if not answer_ids:
        raise ValueError("answer_ids is empty: the gold answer must tokenise to at least one token")
    start = len(prefix_ids) + len(template_prefix_ids)
    ids = (*prefix_ids, *template_prefix_ids, *answer_ids, *template_suffix_ids)
    return AnswerProbe(tuple(int(i) for i in ids), start, start + len(answer_ids))


def probe_prefixes(trajectory: Trajectory) -> list[tuple[int, ...]]:
    """The contexts p_0..p_{T-1} are scored on: the token ids up to the start of each turn's completion.

    Context t ends where turn t+1's completion starts, so it holds turn t's tool response and the
    generation prompt, exactly as the authors probe before each generation step. p_T (after the last
    turn) is never needed: the last turn is rewarded with the outcome instead.
    """
    ids = trajectory.token_ids
    return [tuple(ids[:start]) for start, _ in trajectory.turn_spans]


def answer_probes(trajectory: Trajectory, answer_ids: Sequence[int], **template: Sequence[int]) -> list[AnswerProbe]:
    """One probe per turn of `trajectory` (see `probe_prefixes`); template keywords as in `build_answer_probe`."""
    return [build_answer_probe(prefix, answer_ids, **template) for prefix in probe_prefixes(trajectory)]


def info_gain_turn_rewards(
    probs: Sequence[float] | np.ndarray, outcome: float, *, kind: GainKind = "prob_diff"
) -> np.ndarray:
    """Turn rewards of one trajectory with T = len(probs) turns.

    IG_t = p_{t+1} - p_t  for turns t = 0..T-2 (0-based; p_{t+1} is scored after turn t's tool response)
    ("log_prob_diff": log p_{t+1} - log p_t, the variant of the authors' train.sh)
    r_{T-1} = outcome (F1 in the paper; the authors' code gives -2 to a malformed answer).

    Args:
        probs: p_0..p_{T-1}, answer probabilities before each turn's completion (`probe_prefixes`).
        outcome: the final turn's reward.
        kind: `prob_diff` (the paper) or `log_prob_diff`.
    """
    p = as_array(probs)
    if p.size == 0:
        return p
    if kind == "prob_diff":
        gains = np.diff(p)
    elif kind == "log_prob_diff":
        gains = np.diff(np.log(np.maximum(p, _TINY)))
    else:
        raise ValueError(f"kind must be 'prob_diff' or 'log_prob_diff', got {kind!r}")
    return np.append(gains, outcome)


def igpo_advantages(
    probs: Sequence[Sequence[float] | np.ndarray],
    outcomes: Sequence[float] | np.ndarray,
    *,
    kind: GainKind = "prob_diff",
    norm: IGNorm = "joint",
    gamma: float = 1.0,
    ddof: int = 0,
    eps: float = 1e-6,
) -> Ragged:
    """IGPO per-turn advantages for one group.

    r~ = z-scores of the group's turn rewards (`info_gain_turn_rewards`), then
    A_{i,t} = sum_{k >= t} gamma^(k - t) r~_{i,k}.

    Args:
        probs: per trajectory, p_0..p_{T_i-1} (one per turn).
        outcomes: per trajectory, the final-turn reward.
        kind: `prob_diff` or `log_prob_diff`.
        norm: `joint` (the paper: one mean/std over every IG and outcome of the group, population std),
            `separate` (outcomes among themselves, IGs among themselves: the authors' train.sh) or
            `per_index` (per (prompt, turn index), as A2TGPO proposes).
        gamma: discount over later turns [1.0].
        ddof, eps: the std of the normalisation (see `normalize`). The authors divide by
            sqrt(var + 1e-8) + 1e-6; with eps 1e-6 the two agree to ~1e-8 for non-constant groups.

    Returns:
        Per trajectory, one advantage per turn. Groups whose outcomes are all equal still get signal
        from the information gains: the point of IGPO.
    """
    outs = as_array(outcomes)
    if len(probs) != outs.size:
        raise ValueError(f"{len(probs)} probability arrays for {outs.size} outcomes")
    rewards = [info_gain_turn_rewards(p, o, kind=kind) for p, o in zip(probs, outs)]
    if norm == "joint":
        normed = normalize_pooled(rewards, ddof=ddof, eps=eps)
    elif norm == "per_index":
        normed = normalize_per_index(rewards, ddof=ddof, eps=eps)
    elif norm == "separate":
        finals = [i for i, r in enumerate(rewards) if r.size]
        final_adv = normalize([rewards[i][-1] for i in finals], ddof=ddof, eps=eps)
        gains = normalize_pooled([r[:-1] for r in rewards], ddof=ddof, eps=eps)
        normed = [np.append(g, 0.0) if r.size else g for g, r in zip(gains, rewards)]
        for i, a in zip(finals, final_adv):
            normed[i][-1] = a
    else:
        raise ValueError(f"norm must be 'joint', 'separate' or 'per_index', got {norm!r}")
    return [discounted_returns(r, gamma) for r in normed]


# --- registration ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IGPOParams:
    """IGPO's parameters (its per-step input, `answer_probs`, comes from the trainer's scoring pass).

    Args:
        outcome: R_i, the last turn's reward (F1 in the paper): `reward` or an outcome component
            (`f1` on Search-v0, whose reward is exact match).
        format_penalty: the last turn's reward instead of R_i when the episode did not end with a
            well-formed answer (its last turn did not end the episode, or its tool call failed); the
            authors' code gives -2.0 for unbalanced tags or no <answer>. null: off (the paper's form).
        kind: `prob_diff` (r = p_{t+1} - p_t) or `log_prob_diff` (log p).
        norm: `joint`, `separate` or `per_index` (see `igpo_advantages`).
        gamma: discount over later turns.
        ddof, eps: the std of the normalisation.
        probe: how the gold answer is written after the context: `authors` (the authors' "answer now"
            template), or `<tool>.<argument>` (the answer as that tool's call in the Hermes format,
            e.g. `answer.n`), for a policy that answers with a tool call and never saw the template.
    """

    outcome: str = "reward"
    format_penalty: float | None = None
    kind: GainKind = "prob_diff"
    norm: IGNorm = "joint"
    gamma: float = 1.0
    ddof: Literal[0, 1] = 0
    eps: float = 1e-6
    probe: str = "authors"

    def __post_init__(self) -> None:
        problems = discount_problems(self.gamma) + eps_problems(self.eps)
        if self.probe != "authors" and len(self.probe.split(".")) != 2:
            problems.append(f"probe must be `authors` or `<tool>.<argument>` (e.g. answer.n), got {self.probe!r}")
        if problems:
            raise ConfigError(problems)


def _advantages(group: Group, p: IGPOParams) -> Ragged:
    probs = []
    for i, t, row in zip(group.index, group.trajectories, group.inputs["answer_probs"]):
        arr = np.asarray(row, dtype=np.float64)
        if arr.size not in (len(t.turns), len(t.turns) + 1):
            raise ValueError(
                f"trajectory {i}: {arr.size} answer probabilities for {len(t.turns)} turns (need T or T+1)"
            )
        probs.append(arr[: len(t.turns)])
    outcomes = np.array(group.outcomes, dtype=np.float64)
    if p.format_penalty is not None:
        for i, t in enumerate(group.trajectories):
            if not well_formed(t):
                outcomes[i] = p.format_penalty
    return igpo_advantages(probs, outcomes, kind=p.kind, norm=p.norm, gamma=p.gamma, ddof=p.ddof, eps=p.eps)


def well_formed(trajectory: Trajectory) -> bool:
    """The episode ended with an answer the env accepted: its last turn terminated it and that turn's
    tool call ran (`tool_ok` not False). The counterpart of the authors' tag check."""
    if not trajectory.turns:
        return False
    last = trajectory.turns[-1]
    return bool(last.terminated) and last.signals.get("tool_ok") is not False


METHODS = (
    CreditMethod(
        name="igpo",
        params=IGPOParams,
        advantages=_advantages,
        inputs=("answer_probs",),
        summary="IGPO (Wang et al. 2025)",
        unit="turn",
        formula="r_{i,t} = p_{i,t+1} - p_{i,t}, last turn R_i; z-scored; discounted",
        needs="gold answer (trainer side), scoring pass",
        default=(
            "The paper's: r = p_{t+1} - p_t on every turn but the last, R_i (F1 in the paper) on the last; "
            "every turn reward of the group z-scored in one pool (`norm: joint`, population std, as the "
            "authors' `compute_grpo_outcome_advantage`); A_{i,t} = sum_{k>=t} gamma^{k-t} r~_{i,k}, gamma 1. "
            "Length effect by design: a success that spreads the same information gain over more turns "
            "sums more centred terms (hand case in tests/credit/test_length.py: first-turn 1.76 vs 0)."
        ),
        options=(
            "`outcome: f1` (the paper's F1; set by `+experiment=search_igpo`); `format_penalty: -2.0` (the "
            "authors' code: the answer turn's reward when the episode did not end with an accepted answer); "
            "`norm: separate` (outcomes and gains z-scored apart: the authors' train.sh); `norm: per_index` "
            "(per prompt and turn index, A2TGPO); `kind: log_prob_diff` (the train.sh's gain); `gamma < 1`; "
            "`probe: answer.n` (the answer probed as the policy's own `answer(n=...)` tool call)."
        ),
        differences=(
            "The authors divide by sqrt(var + 1e-8) + 1e-6 (eps 1e-6 here: equal to ~1e-8); a turn whose "
            "normalised reward is exactly 0 merges with the next in their code, not here; the F1 curriculum "
            "is not implemented."
        ),
    ),
)
