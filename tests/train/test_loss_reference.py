"""Numeric agreement of our GRPO advantages and clipped policy loss with a reference computed by hand.

Formulas (shared/reference/credit-assignment.md):
    A_i   = (R_i - mean_g R) / (std_g R + eps)                                   (GRPO; population std here)
    L_k   = -min(ratio_k A_k, clip(ratio_k, 1 - eps_low, 1 + eps_high) A_k),   ratio_k = exp(logp_k - logp_old_k)
    token-mean: sum_k L_k / N;  seq-mean-token-mean: mean_i mean_{k in i} L_k;
    seq-mean-token-sum: mean_i sum_{k in i} L_k;  seq-mean-token-sum-norm: sum_i sum_{k in i} L_k / (B * C)
The trajectories go through the real path: `compute_advantages` -> token broadcast -> `policy_loss`.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from rlgym_llm.credit import compute_advantages  # noqa: E402
from rlgym_llm.train.losses import AGG_MODES, BatchTotals, policy_loss  # noqa: E402
from tests.credit.trajfactory import make_trajectory  # noqa: E402

# One group of G = 4; completion tokens per trajectory (turns): [2], [1], [1, 2], [2]; ratios per policy token.
OUTCOMES = [1.0, 0.0, 0.0, 1.0]
COMPLETIONS = [[2], [1], [1, 2], [2]]
RATIOS = [[1.5, 1.0], [0.5], [1.1, 0.7, 1.3], [0.9, 1.25]]
EPS_LOW, EPS_HIGH, NORM_CONST = 0.2, 0.28, 10.0


def group():
    return [
        make_trajectory([0.0] * len(c), r, completion_lens=c, obs_lens=[0] + [2] * (len(c) - 1))
        for r, c in zip(OUTCOMES, COMPLETIONS)
    ]


def tensors(trajs, token_adv, ratios, seed=0):
    """Right-padded (B, L) logp/old/adv/mask; off-mask log-probs are garbage that must not count."""
    rng = np.random.default_rng(seed)
    width = max(len(t.token_ids) for t in trajs)
    shape = (len(trajs), width)
    old = rng.normal(-2.0, 1.0, shape)
    logp = rng.normal(-2.0, 1.0, shape)
    adv = np.zeros(shape)
    mask = np.zeros(shape)
    for b, (t, a, r) in enumerate(zip(trajs, token_adv, ratios)):
        m = np.array(t.loss_mask, dtype=bool)
        adv[b, : len(a)] = a
        mask[b, : len(m)] = m
        pos = np.flatnonzero(m)
        logp[b, pos] = old[b, pos] + np.log(r)
    return [torch.tensor(x, dtype=torch.float64) for x in (logp, old, adv, mask)]


def loop_loss(ratios, advs, mode):
    """The formulas above, token by token, in plain Python."""
    per_seq = []
    for rs, as_ in zip(ratios, advs):
        per_seq.append([-min(r * a, min(max(r, 1 - EPS_LOW), 1 + EPS_HIGH) * a) for r, a in zip(rs, as_)])
    n_tok = sum(len(s) for s in per_seq)
    live = [s for s in per_seq if s]
    if mode == "token-mean":
        return sum(map(sum, per_seq)) / n_tok
    if mode == "seq-mean-token-mean":
        return sum(sum(s) / len(s) for s in live) / len(live)
    if mode == "seq-mean-token-sum":
        return sum(sum(s) for s in live) / len(live)
    return sum(sum(s) for s in live) / (len(live) * NORM_CONST)


def test_grpo_advantages_by_hand():
    # R = [1, 0, 0, 1]: mean 0.5, population std sqrt((4 * 0.25) / 4) = 0.5
    # A = (R - 0.5) / (0.5 + 1e-6) = +-0.999998, the same on every turn of a trajectory
    result = compute_advantages(group(), "grpo")
    a = 0.5 / (0.5 + 1e-6)
    for got, want, c in zip(result.turn_advantages, [a, -a, -a, a], COMPLETIONS):
        np.testing.assert_allclose(got, np.full(len(c), want), rtol=1e-12)
    # with the sample std (ddof = 1, verl/TRL): std = sqrt(1 / 3) -> A = +-0.5 * sqrt(3) = +-0.8660254
    sample = compute_advantages(group(), "grpo", ddof=1, eps=0.0)
    np.testing.assert_allclose(
        [x[0] for x in sample.turn_advantages], [0.8660254, -0.8660254, -0.8660254, 0.8660254], atol=1e-7
    )


def test_clipped_loss_by_hand():
    # A = +-1 (eps 0); eps_low 0.2, eps_high 0.28 -> clip range [0.8, 1.28]
    #   traj 0 (A +1): r 1.5 -> clipped 1.28 -> L -1.28;  r 1.0 -> -1.0            sum -2.28
    #   traj 1 (A -1): r 0.5 -> max(0.5, 0.8) -> L 0.8                              sum  0.8
    #   traj 2 (A -1): r 1.1 -> 1.1;  r 0.7 -> max(0.7, 0.8) = 0.8;  r 1.3 -> max(1.3, 1.28) = 1.3   sum 3.2
    #   traj 3 (A +1): r 0.9 -> -0.9;  r 1.25 -> -1.25                              sum -2.15
    # total -0.43 over 8 tokens and 4 sequences
    want = {
        "token-mean": -0.43 / 8,
        "seq-mean-token-mean": (-2.28 / 2 + 0.8 / 1 + 3.2 / 3 - 2.15 / 2) / 4,
        "seq-mean-token-sum": -0.43 / 4,
        "seq-mean-token-sum-norm": -0.43 / (4 * NORM_CONST),
    }
    trajs = group()
    result = compute_advantages(trajs, "grpo", eps=0.0)
    logp, old, adv, mask = tensors(trajs, result.token_advantages(trajs), RATIOS)
    for mode, value in want.items():
        out = policy_loss(logp, old, adv, mask, BatchTotals.of(mask, NORM_CONST), EPS_LOW, EPS_HIGH, mode)
        assert out.loss.item() == pytest.approx(value, abs=1e-12), mode
        # the clipped branch is taken on 3 of 8 tokens: r 1.5 (A > 0), r 0.5 and r 0.7 (A < 0)
        assert out.clip_fraction.item() == pytest.approx(3 / 8)


def test_gradient_by_hand():
    # token-mean: dL/dlogp_k = -A_k r_k / N where the unclipped branch is active, 0 where the clip is
    trajs = group()
    result = compute_advantages(trajs, "grpo", eps=0.0)
    logp, old, adv, mask = tensors(trajs, result.token_advantages(trajs), RATIOS)
    logp.requires_grad_(True)
    policy_loss(logp, old, adv, mask, BatchTotals.of(mask), EPS_LOW, EPS_HIGH).loss.backward()
    got = [logp.grad[b][mask[b].bool()].tolist() for b in range(4)]
    want = [[0.0, -1.0 / 8], [0.0], [1.1 / 8, 0.0, 1.3 / 8], [-0.9 / 8, -1.25 / 8]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.lists(st.integers(1, 3), min_size=1, max_size=3)), min_size=2, max_size=5),
    st.integers(0, 10_000),
)
def test_matches_plain_loop_on_random_groups(spec, seed):
    trajs = [make_trajectory([0.0] * len(c), r, completion_lens=c) for r, c in spec]
    rng = np.random.default_rng(seed)
    ratios = [list(rng.uniform(0.3, 3.0, sum(c))) for _, c in spec]
    result = compute_advantages(trajs, "grpo")
    # the advantages against the formula
    outs = [r for r, _ in spec]
    mean = sum(outs) / len(outs)
    std = math.sqrt(sum((o - mean) ** 2 for o in outs) / len(outs))
    advs = [0.0 if all(o == outs[0] for o in outs) else (o - mean) / (std + 1e-6) for o in outs]
    for got, a in zip(result.turn_advantages, advs):
        np.testing.assert_allclose(got, a, rtol=1e-9, atol=1e-12)
    token_adv = [[a] * sum(c) for a, (_, c) in zip(advs, spec)]
    logp, old, adv, mask = tensors(trajs, result.token_advantages(trajs), ratios, seed)
    for mode in AGG_MODES:
        out = policy_loss(logp, old, adv, mask, BatchTotals.of(mask, NORM_CONST), EPS_LOW, EPS_HIGH, mode)
        assert out.loss.item() == pytest.approx(loop_loss(ratios, token_adv, mode), rel=1e-9, abs=1e-12)


def test_drgrpo_aggregation_against_verls_normaliser_by_hand():
    # Dr. GRPO's loss: sum of token losses over a constant. Here (as TRL's dr_grpo): sum / (B * L_max).
    # verl's seq-mean-token-sum-norm divides each micro-batch's sum by L_max only and scales it by
    # 1 / (number of micro-batches): sum / (n_micro * L_max), i.e. this loss times B / n_micro.
    # Two micro-batches of two sequences, token losses [1, 2 | 3] [4 | 5, 6], L_max = 10:
    #   here: 21 / (4 * 10) = 0.525;  verl: (6 / 10 + 15 / 10) / 2 = 1.05 = 0.525 * 4 / 2
    from rlgym_llm.train.losses import aggregate

    values = torch.tensor([[1.0, 2.0], [3.0, 0.0], [4.0, 0.0], [5.0, 6.0]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 0], [1, 1]])
    totals = BatchTotals.of(mask, norm_const=10.0)
    ours = sum(
        float(aggregate(values[s], mask[s], "seq-mean-token-sum-norm", totals)) for s in (slice(0, 2), slice(2, 4))
    )
    assert ours == pytest.approx(0.525)
    verl = sum(float((values[s] * mask[s]).sum()) / 10.0 for s in (slice(0, 2), slice(2, 4))) / 2
    assert verl == pytest.approx(1.05) and verl / ours == pytest.approx(4 / 2)


def test_credit_drgrpo_sets_its_loss_aggregation():
    from rlgym_llm.config import load_config

    assert load_config("train", ["credit=drgrpo"]).trainer.loss.agg == "seq-mean-token-sum-norm"
    assert load_config("train", ["credit=drgrpo", "trainer.loss.agg=token-mean"]).trainer.loss.agg == "token-mean"
    assert load_config("train", ["credit=grpo"]).trainer.loss.agg == "token-mean"
