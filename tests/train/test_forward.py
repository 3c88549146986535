"""The lean update forward pass: LM head over the trained positions only, same numbers as the full head."""

import copy

import pytest

torch = pytest.importorskip("torch")

from batches import make_batch  # noqa: E402

from rlgym_llm.train.forward import _plain_head, masked_logprobs  # noqa: E402
from rlgym_llm.train.losses import entropy_from_logits, token_logprobs  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, PolicyTrainer  # noqa: E402


@pytest.fixture(scope="module")
def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def test_lean_and_full_heads_give_the_plain_loop_logprobs_and_entropies(base_model):
    batch = make_batch(base_model, n=4, seed=3)
    assert _plain_head(base_model) is not None  # the tiny model (Qwen2) takes the lean path
    lean = masked_logprobs(base_model, batch.input_ids, batch.attention_mask, batch.loss_mask)
    full = masked_logprobs(base_model, batch.input_ids, batch.attention_mask, batch.loss_mask, lean=False)
    # reference: every position's logits, then keep the masked ones
    logits = base_model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    ref_logp = token_logprobs(logits, batch.input_ids) * batch.loss_mask
    ref_ent = torch.nn.functional.pad(entropy_from_logits(logits[:, :-1]), (1, 0)) * batch.loss_mask
    for out in (lean, full):
        assert (out.logp - ref_logp).abs().max().item() < 1e-5
        assert (out.entropy - ref_ent).abs().max().item() < 1e-5
    assert bool((lean.logp[batch.loss_mask == 0] == 0).all())


def test_lean_head_gives_the_same_gradients(base_model):
    batch = make_batch(base_model, n=4, seed=4)
    grads = []
    for lean in (True, False):
        model = copy.deepcopy(base_model)
        PolicyTrainer(model, LossConfig(entropy_coef=0.01), micro_batch_size=2, lean_head=lean).accumulate(batch)
        grads.append([p.grad.detach().clone() for p in model.parameters()])
    scale = max(g.abs().max().item() for g in grads[1])
    assert max((a - b).abs().max().item() for a, b in zip(*grads)) < 1e-5 * scale


def test_the_entropy_has_no_graph_unless_a_bonus_needs_it(base_model):
    batch = make_batch(base_model, n=2, seed=5)
    args = (base_model, batch.input_ids, batch.attention_mask, batch.loss_mask)
    assert not masked_logprobs(*args).entropy.requires_grad
    assert masked_logprobs(*args, entropy_grad=True).entropy.requires_grad
    assert masked_logprobs(*args).logp.requires_grad


def test_peft_wrapped_models_take_the_lean_path(base_model):
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        copy.deepcopy(base_model), peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    assert _plain_head(model) is not None
    batch = make_batch(base_model, n=2, seed=6)
    lean = masked_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask)
    full = masked_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask, lean=False)
    assert (lean.logp - full.logp).abs().max().item() < 1e-5


def test_models_with_a_scaled_head_take_the_full_path():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()  # no dropout: two passes must agree
    assert _plain_head(model) is None  # not on the checked list: the full forward pass, same rows
    ids = torch.randint(0, 50, (2, 8))
    mask = torch.ones_like(ids, dtype=torch.float32)
    out = masked_logprobs(model, ids, torch.ones_like(ids), mask)
    ref = token_logprobs(model(input_ids=ids).logits, ids)
    assert (out.logp - ref).abs().max().item() < 1e-5
