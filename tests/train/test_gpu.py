"""The trainer and the transformers policy on a GPU (`-m gpu`; never in CI, which has none):
the same model and batch give the same logprobs, loss and gradients on CPU and CUDA in float32,
close ones in bfloat16, the same greedy tokens, and `rlgym train` (SFT, then RL) runs on cuda in
bfloat16. `scripts/gpu_check.sh` runs this file on a GPU machine."""

import copy
import json
import time

import pytest

torch = pytest.importorskip("torch")

from batches import make_batch  # noqa: E402

from rlgym_llm.rollout.device import Compute  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
CPU = Compute(torch.device("cpu"))
CUDA = Compute(torch.device("cuda"))
CUDA_BF16 = Compute(torch.device("cuda"), torch.bfloat16)


@pytest.fixture(scope="module")
def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def _one_update(base_model, batch, compute):
    model = copy.deepcopy(base_model).to(compute.device)
    trainer = PolicyTrainer(model, LossConfig(), OptimConfig(lr=1e-3), micro_batch_size=2, compute=compute)
    old = trainer._old_logp(batch).cpu()
    metrics = trainer.accumulate(batch)
    # a copy: on CPU .float().cpu() is the same tensor, which gradient clipping then scales in place
    grads = [p.grad.detach().float().cpu().clone() for p in model.parameters()]
    metrics.update(trainer.apply_gradients())
    return old, metrics, grads, [p.detach().cpu() for p in model.parameters()]


def test_cpu_and_cuda_agree_on_logprobs_loss_gradients_and_update(base_model, record_property):
    torch.backends.cuda.matmul.allow_tf32 = False  # the comparison is of float32 arithmetic
    batch = make_batch(base_model, n=6, seed=5)
    mask = batch.loss_mask.bool()
    old_c, m_c, g_c, w_c = _one_update(base_model, batch, CPU)
    old_g, m_g, g_g, w_g = _one_update(base_model, batch, CUDA)
    old_b, m_b, _, w_b = _one_update(base_model, batch, CUDA_BF16)
    logp_diff = (old_c - old_g)[mask].abs().max().item()
    # over the whole gradient: some tensors' gradients are zero up to rounding (Qwen2's k_proj bias
    # cannot change a softmax over keys), where a per-tensor ratio would compare noise with noise
    diff = sum((a - b).pow(2).sum().item() for a, b in zip(g_c, g_g)) ** 0.5
    grad_rel = diff / sum(a.pow(2).sum().item() for a in g_c) ** 0.5
    bf16_diff = (old_c - old_b)[mask].abs().max().item()
    record_property(
        "figures",
        {
            "fp32_logp_max_abs_diff": logp_diff,
            "fp32_grad_max_rel_diff": grad_rel,
            "bf16_logp_max_abs_diff": bf16_diff,
            "loss_cpu": m_c["loss"],
            "loss_cuda_fp32": m_g["loss"],
            "loss_cuda_bf16": m_b["loss"],
        },
    )
    assert logp_diff < 1e-4
    assert m_c["loss"] == pytest.approx(m_g["loss"], abs=1e-5)
    assert grad_rel < 1e-3
    # the update as a whole: Adam divides by sqrt(v), so where a gradient is rounding noise (above)
    # the two devices' steps differ by up to ~10% of lr entry by entry; the update vector agrees
    w0 = [p.detach() for p in base_model.parameters()]
    step = sum((a - z).pow(2).sum().item() for a, z in zip(w_c, w0)) ** 0.5
    update_rel = sum((a - b).pow(2).sum().item() for a, b in zip(w_c, w_g)) ** 0.5 / step
    record_property("update_rel", update_rel)
    assert update_rel < 1e-2
    assert bf16_diff < 0.15 and m_b["loss"] == pytest.approx(m_c["loss"], abs=2e-2)
    assert all(w.dtype == torch.float32 for w in w_b)  # float32 master weights under bf16 autocast


def test_the_policy_samples_the_same_greedy_tokens_on_cpu_and_cuda(base_model, tiny_tokenizer):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.policy import SamplingParams

    prompts = [
        tiny_tokenizer.encode(f"<|im_start|>user\nwhat is {a} + {b}?<|im_end|>\n<|im_start|>assistant\n")
        for a, b in ((2, 3), (10, 7), (4, 40))
    ]
    greedy = [SamplingParams(temperature=0.0, max_tokens=16)] * len(prompts)
    cpu = TransformersPolicy(base_model, tiny_tokenizer).generate_batch(prompts, greedy)
    cuda_model = copy.deepcopy(base_model).to("cuda")
    gpu = TransformersPolicy(cuda_model, tiny_tokenizer, compute=CUDA).generate_batch(prompts, greedy)
    assert [c.token_ids for c in cpu] == [g.token_ids for g in gpu]
    for c, g in zip(cpu, gpu):
        assert max(abs(x - y) for x, y in zip(c.logprobs, g.logprobs)) < 1e-3
    sampled = TransformersPolicy(cuda_model, tiny_tokenizer, compute=CUDA_BF16).generate_batch(
        prompts, [SamplingParams(temperature=1.0, max_tokens=16, seed=1)] * len(prompts)
    )
    assert all(len(s.token_ids) > 0 for s in sampled)


def test_rlgym_train_sft_then_rl_on_cuda_in_bf16(tmp_path, record_property):
    from rlgym_llm.cli.main import main

    args = ["train", f"out_dir={tmp_path}", "progress=false", "trainer.device=cuda", "trainer.dtype=bfloat16"]
    # the demo's warm-up (a noisy teacher's clone that fails often), so RL has groups to learn from
    args += ["trainer.steps=2", "trainer.tasks_per_step=6", "trainer.group_size=8"]
    args += ["trainer.eval_tasks=32", "trainer.eval_every=0"]
    t0 = time.perf_counter()
    assert main(args) == 0
    seconds = time.perf_counter() - t0
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((tmp_path / "summary.json").read_text())
    keys = ("before", "after", "sft", "updates")
    record_property("figures", {"seconds": seconds, "summary": {k: summary[k] for k in keys}})
    assert [r["step"] for r in records] == [1, 2]
    assert summary["updates"]["done"] >= 1  # a real bf16 update on the GPU, not only skipped steps
    assert summary["sft"]["loss_last"] < summary["sft"]["loss_first"]
    assert (tmp_path / "checkpoints" / "step_000002" / "trainer.pt").exists()
