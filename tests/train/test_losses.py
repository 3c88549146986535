"""Policy loss, KL estimators and aggregation against hand-computed values."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from rlgym_llm.train.losses import (  # noqa: E402
    AGG_MODES,
    BatchTotals,
    aggregate,
    entropy_from_logits,
    kl_penalty,
    policy_loss,
    token_logprobs,
)


def t(x):
    return torch.tensor(x, dtype=torch.float64)


def test_clipped_surrogate_by_hand():
    # one sequence, three policy tokens; eps_low = 0.2, eps_high = 0.28 (clip-higher)
    old = t([[0.0, 0.0, 0.0]])
    logp = t([[math.log(1.5), math.log(0.5), math.log(1.1)]])  # ratios 1.5, 0.5, 1.1
    adv = t([[1.0, -2.0, 1.0]])
    mask = t([[1, 1, 1]])
    out = policy_loss(logp, old, adv, mask, BatchTotals.of(mask), clip_low=0.2, clip_high=0.28)
    # token 1: A>0, ratio 1.5 -> clipped to 1.28 -> L = -1.28
    # token 2: A<0, ratio 0.5 -> max(-(-2)*0.5, -(-2)*0.8) = max(1.0, 1.6) = 1.6
    # token 3: A>0, ratio 1.1 inside the range -> L = -1.1
    assert out.loss.item() == pytest.approx((-1.28 + 1.6 - 1.1) / 3)
    assert out.clip_fraction.item() == pytest.approx(2 / 3)


def test_ratio_one_gives_minus_mean_advantage_and_the_grpo_gradient():
    logp = t([[-1.0, -2.0], [-0.5, -0.7]]).requires_grad_()
    adv = t([[0.5, 0.5], [-1.0, -1.0]])
    mask = t([[1, 1], [1, 0]])
    out = policy_loss(logp, logp.detach(), adv, mask, BatchTotals.of(mask))
    assert out.loss.item() == pytest.approx(-(0.5 + 0.5 - 1.0) / 3)
    out.loss.backward()
    # d/dlogp of -A * exp(logp - old) at ratio 1 is -A / n_tokens on policy tokens, 0 elsewhere
    assert torch.allclose(logp.grad, t([[-0.5 / 3, -0.5 / 3], [1.0 / 3, 0.0]]))


def test_truncated_importance_weight():
    old = t([[0.0, 0.0]])
    engine = t([[math.log(0.25), 0.0]])  # engine gave token 1 a much lower prob: w = min(4, 2) = 2
    out = policy_loss(old.clone(), old, t([[1.0, 1.0]]), t([[1, 1]]), BatchTotals(2, 1), engine_logp=engine, is_cap=2.0)
    assert out.loss.item() == pytest.approx(-(2.0 + 1.0) / 2)
    assert out.is_weight_mean.item() == pytest.approx(1.5)


def test_aggregation_modes_by_hand():
    values = t([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = t([[1, 1, 1], [1, 0, 0]])
    totals = BatchTotals.of(mask, norm_const=10.0)
    assert aggregate(values, mask, "token-mean", totals).item() == pytest.approx(10 / 4)
    assert aggregate(values, mask, "seq-mean-token-mean", totals).item() == pytest.approx((2.0 + 4.0) / 2)
    assert aggregate(values, mask, "seq-mean-token-sum", totals).item() == pytest.approx((6.0 + 4.0) / 2)
    assert aggregate(values, mask, "seq-mean-token-sum-norm", totals).item() == pytest.approx(10 / (2 * 10))
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        aggregate(values, mask, "mean", totals)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.sampled_from(AGG_MODES), st.integers(0, 10_000))
def test_micro_batch_shares_add_up_to_the_full_batch(batch, seq, mode, seed):
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(batch, seq, generator=g, dtype=torch.float64)
    mask = (torch.rand(batch, seq, generator=g) > 0.3).double()
    totals = BatchTotals.of(mask, norm_const=7.0)
    full = aggregate(values, mask, mode, totals)
    parts = sum(aggregate(values[i : i + 1], mask[i : i + 1], mode, totals) for i in range(batch))
    assert torch.allclose(full, parts)


def test_kl_estimators_by_hand():
    logp, ref = t([math.log(0.5)]), t([math.log(0.25)])  # d = ref - logp = -log 2
    d = -math.log(2)
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(-d)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(d * d / 2)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(math.exp(d) - d - 1)
    with pytest.raises(ValueError):
        kl_penalty(logp, ref, "k4")


@given(st.lists(st.floats(-5, 5), min_size=1, max_size=20), st.lists(st.floats(-5, 5), min_size=1, max_size=20))
def test_k3_and_k2_are_non_negative_and_zero_at_equality(a, b):
    n = min(len(a), len(b))
    logp, ref = t(a[:n]), t(b[:n])
    assert (kl_penalty(logp, ref, "k3") >= -1e-12).all() and (kl_penalty(logp, ref, "k2") >= 0).all()
    assert torch.allclose(kl_penalty(logp, logp, "k3"), torch.zeros(n, dtype=torch.float64))


def test_k3_is_an_unbiased_estimate_of_the_true_kl():
    p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    true_kl = (p * (p / q).log()).sum()
    expected_k3 = (p * kl_penalty(p.log(), q.log(), "k3")).sum()  # E_{y~p}[k3]
    expected_k1 = (p * kl_penalty(p.log(), q.log(), "k1")).sum()
    assert torch.allclose(expected_k3, true_kl) and torch.allclose(expected_k1, true_kl)


def test_entropy_and_token_logprobs():
    logits = torch.zeros(1, 2, 4)
    assert torch.allclose(entropy_from_logits(logits), torch.full((1, 2), math.log(4)))
    logits = torch.tensor([[[0.0, 0.0], [math.log(3.0), 0.0], [0.0, 0.0]]])
    ids = torch.tensor([[1, 0, 1]])
    lp = token_logprobs(logits, ids)
    assert lp.shape == (1, 3) and lp[0, 0] == 0
    assert lp[0, 1].item() == pytest.approx(math.log(0.5)) and lp[0, 2].item() == pytest.approx(math.log(0.25))
