"""PolicyTrainer on the tiny model: exact gradient accumulation, schedules, KL and learning direction."""

import copy

import pytest

torch = pytest.importorskip("torch")

from batches import make_batch  # noqa: E402

from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer  # noqa: E402


@pytest.fixture(scope="module")
def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def gradients_of(base_model, batch, micro, **loss):
    model = copy.deepcopy(base_model)
    trainer = PolicyTrainer(model, LossConfig(**loss), micro_batch_size=micro)
    metrics = trainer.accumulate(batch)
    return [p.grad.detach().clone() for p in model.parameters()], metrics, trainer


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_one_micro_batch_of_8_equals_8_of_1(base_model, agg):
    batch = make_batch(base_model)
    norm = {"norm_const": 512.0} if agg == "seq-mean-token-sum-norm" else {}
    g1, m1, t1 = gradients_of(base_model, batch, micro=8, agg=agg, **norm)
    g8, m8, t8 = gradients_of(base_model, batch, micro=1, agg=agg, **norm)
    assert m1["loss"] == pytest.approx(m8["loss"], abs=1e-6)
    scale = max(g.abs().max().item() for g in g1)
    assert max((a - b).abs().max().item() for a, b in zip(g1, g8)) < 1e-5 * scale
    # and so the optimizer step is the same update
    t1.apply_gradients(), t8.apply_gradients()
    drift = max((a - b).abs().max().item() for a, b in zip(t1.model.parameters(), t8.model.parameters()))
    step = max((a - b).abs().max().item() for a, b in zip(t1.model.parameters(), base_model.parameters()))
    # Adam divides by sqrt(v): for parameters whose gradient is ~0, fp32 rounding of the summation
    # order shows up at a few percent of the step size (up to 7% seen on another CPU and BLAS build);
    # everywhere else the updates agree exactly.
    assert drift < 1e-1 * step


def test_recomputed_old_logprobs_match_the_engine_logprobs_in_process(base_model):
    batch = make_batch(base_model, n=4, seed=1)
    trainer = PolicyTrainer(copy.deepcopy(base_model), micro_batch_size=2)
    old = trainer._old_logp(batch)
    assert ((old - batch.engine_logp).abs() * batch.loss_mask).max().item() < 1e-4
    metrics = trainer.update(batch)
    assert metrics["clip_frac"] == 0.0 and metrics["approx_kl"] < 1e-8  # ratio is 1 on a fresh batch


def test_the_recomputed_old_policy_is_the_update_pass_itself_with_the_stale_logprobs_in_the_is_weight(base_model):
    # behaviour logprobs of older weights (as rollouts sampled ahead bring): pi_old is recomputed
    # from the update's own forward pass, and min(pi_old / pi_behaviour, cap) weighs each token
    batch = make_batch(base_model, n=4, seed=3)
    batch.engine_logp = batch.engine_logp - 0.3 * batch.loss_mask * torch.rand_like(batch.engine_logp)
    fused = PolicyTrainer(copy.deepcopy(base_model), LossConfig(recompute_old_logp=True), micro_batch_size=2)
    old = fused._old_logp(batch)
    weight = torch.exp(old - batch.engine_logp).clamp(max=fused.loss_cfg.is_cap) * batch.loss_mask
    metrics = fused.update(batch)
    # the same update written out: the IS weight folded into the advantages, pi_old = the two-pass recompute
    ref_batch = copy.deepcopy(batch)
    ref_batch.advantages, ref_batch.engine_logp = batch.advantages * weight, old
    ref = PolicyTrainer(copy.deepcopy(base_model), LossConfig(), micro_batch_size=2)
    ref_metrics = ref.update(ref_batch)
    assert metrics["is_weight"] > 1.05 and metrics["clip_frac"] == 0.0
    assert metrics["pg_loss"] == pytest.approx(ref_metrics["pg_loss"], rel=1e-5, abs=1e-7)
    drift = max((a - b).abs().max().item() for a, b in zip(fused.model.parameters(), ref.model.parameters()))
    step = max((a - b).abs().max().item() for a, b in zip(fused.model.parameters(), base_model.parameters()))
    assert drift < 1e-1 * step  # Adam's rounding where the gradient is ~0, as in the micro-batch test above


def test_positive_advantages_raise_the_probability_of_their_tokens(base_model):
    batch = make_batch(base_model, n=4, seed=2)
    batch.advantages = batch.loss_mask.clone()  # every policy token gets A = +1
    model = copy.deepcopy(base_model)
    trainer = PolicyTrainer(model, LossConfig(), OptimConfig(lr=1e-3), micro_batch_size=4)
    before = (batch.engine_logp * batch.loss_mask).sum().item()
    for _ in range(3):
        trainer.update(batch)
    after = (trainer._old_logp(batch) * batch.loss_mask).sum().item()
    assert after > before


def test_kl_needs_a_reference_model_and_is_zero_against_itself(base_model):
    with pytest.raises(ValueError, match="reference model"):
        PolicyTrainer(copy.deepcopy(base_model), LossConfig(kl_coef=0.1))
    model = copy.deepcopy(base_model)
    trainer = PolicyTrainer(model, LossConfig(kl_coef=0.1), ref_model=copy.deepcopy(base_model))
    assert trainer.update(make_batch(base_model, n=2))["kl"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
    ("schedule", "expected"),
    [
        ("constant", [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]),
        ("linear", [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]),
        ("cosine", [0.5, 1.0, 1.0, 0.8535534, 0.5, 0.1464466]),
    ],
)
def test_lr_schedules(base_model, schedule, expected):
    optim = OptimConfig(lr=1.0, warmup_steps=2, schedule=schedule, total_steps=6)
    trainer = PolicyTrainer(copy.deepcopy(base_model), optim=optim)
    assert [trainer._lr_factor(s) for s in range(6)] == pytest.approx(expected)


def test_settings_that_a_mode_needs_are_asked_for(base_model):
    with pytest.raises(ValueError, match="norm_const"):
        PolicyTrainer(copy.deepcopy(base_model), LossConfig(agg="seq-mean-token-sum-norm"))
    with pytest.raises(ValueError, match="total_steps"):
        PolicyTrainer(copy.deepcopy(base_model), optim=OptimConfig(schedule="cosine"))


def test_adam_eps_keeps_weights_with_tiny_gradients_nearly_still(base_model):
    """`optim.eps` reaches AdamW: with the default, a weight whose gradient is ~1e-9 moves by ~lr on
    the first step like any other; with eps far above that gradient it barely moves (control: the
    same batch, the default eps)."""
    batch = make_batch(base_model, n=4, seed=2)
    batch.advantages = batch.loss_mask.clone() * 1e-6  # every gradient far below 1e-3

    def max_step(eps):
        model = copy.deepcopy(base_model)
        trainer = PolicyTrainer(model, LossConfig(), OptimConfig(lr=1e-3, eps=eps), micro_batch_size=4)
        assert trainer.optimizer.param_groups[0]["eps"] == eps
        trainer.update(batch)
        return max((a - b).abs().max().item() for a, b in zip(model.parameters(), base_model.parameters()))

    assert max_step(1e-8) > 0.5e-3  # Adam's first step: ~lr whatever the gradient's size
    assert max_step(1e-3) < 1e-5
    with pytest.raises(ValueError, match="eps must be > 0"):
        OptimConfig(eps=0.0)


@pytest.mark.parametrize("recompute", [False, True])
def test_mini_batches_are_optimizer_steps_from_one_old_policy(base_model, recompute):
    # the plain loop: split the batch in consecutive halves, each one optimizer step whose pi_old is
    # the weights before the first (the engine's logprobs here, equal to a recompute in process)
    batch = make_batch(base_model, n=6, seed=4)
    loss = LossConfig(recompute_old_logp=recompute, clip_low=0.01, clip_high=0.01)
    optim = OptimConfig(lr=1e-2, warmup_steps=0)
    trainer = PolicyTrainer(copy.deepcopy(base_model), loss, optim, micro_batch_size=2, mini_batches=2)
    ref = PolicyTrainer(copy.deepcopy(base_model), loss, optim, micro_batch_size=2)
    old = ref._old_logp(batch)
    norms = []
    for a, b in ((0, 3), (3, 6)):
        half = batch.slice(a, b)
        half.old_logp = old[a:b, : half.input_ids.shape[1]]
        m = ref.accumulate(half)
        norms.append(ref._optimizer_step())
    metrics = trainer.update(batch)
    assert metrics["optimizer_steps"] == 2 and trainer.step == 1
    assert metrics["grad_norm"] == pytest.approx(sum(norms) / 2, rel=1e-4)
    drift = max((a - b).abs().max().item() for a, b in zip(trainer.model.parameters(), ref.model.parameters()))
    moved = max((a - b).abs().max().item() for a, b in zip(trainer.model.parameters(), base_model.parameters()))
    # the same updates up to fp32 rounding (the recomputed and the engine's logprobs differ < 1e-4)
    assert moved > 1e-3 and drift < 2e-2 * moved
    # the second half trained away from pi_old: its ratio left the (tight) clip range
    assert m["clip_frac"] > 0 and metrics["clip_frac"] > 0
    # the schedule steps once per update (per RL step), not per mini-batch
    assert trainer.scheduler.last_epoch == 1


def test_more_mini_batches_than_rows_take_a_step_per_row(base_model):
    batch = make_batch(base_model, n=2, seed=5)
    trainer = PolicyTrainer(copy.deepcopy(base_model), micro_batch_size=2, mini_batches=4)
    assert trainer.update(batch)["optimizer_steps"] == 2
    with pytest.raises(ValueError, match="mini_batches"):
        PolicyTrainer(copy.deepcopy(base_model), mini_batches=0)
