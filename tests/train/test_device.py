"""Device and precision (`trainer.device`, `trainer.dtype`): resolution, bf16 autocast with float32
master weights in the trainer, SFT and the transformers policy, all exercised on CPU; a run of
`rlgym train` in bfloat16. The same code on a GPU is `tests/train/test_gpu.py` (`-m gpu`)."""

import copy

import pytest

torch = pytest.importorskip("torch")

from batches import make_batch, make_trajectories  # noqa: E402

from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.rollout.device import Compute, resolve  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer  # noqa: E402

CPU_BF16 = Compute(torch.device("cpu"), torch.bfloat16)


@pytest.fixture(scope="module")
def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def test_auto_resolves_to_the_device_torch_sees():
    got = resolve("auto", "auto")
    if torch.cuda.is_available():
        assert got == Compute(torch.device("cuda"), torch.bfloat16)
    else:
        assert got == Compute(torch.device("cpu"), torch.float32)
    assert resolve("cpu", "bfloat16") == CPU_BF16


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_config_error_that_says_what_to_do():
    with pytest.raises(ConfigError, match="sees no GPU; use device=cpu"):
        resolve("cuda", "auto")


def test_unknown_names_are_reported_together():
    with pytest.raises(ConfigError) as e:
        resolve("tpu", "fp8")
    assert len(e.value.problems) == 2


def test_the_config_takes_device_and_dtype(tmp_path):
    from rlgym_llm.config import load_config

    cfg = load_config("train", ["trainer.device=cpu", "trainer.dtype=bfloat16", "policy.tensor_parallel_size=2"])
    assert (cfg.trainer.device, cfg.trainer.dtype, cfg.policy.tensor_parallel_size) == ("cpu", "bfloat16", 2)
    assert load_config("eval", ["device=cpu", "dtype=float32"]).dtype == "float32"
    with pytest.raises(ConfigError, match="did you mean"):
        load_config("train", ["trainer.dtype=bfloat61"])


def test_bf16_autocast_keeps_float32_master_weights_and_tracks_the_float32_update(base_model):
    batch = make_batch(base_model, n=4, seed=3)
    runs = {}
    for name, compute in (("fp32", None), ("bf16", CPU_BF16)):
        model = copy.deepcopy(base_model)
        trainer = PolicyTrainer(model, LossConfig(), OptimConfig(lr=1e-3), micro_batch_size=2, compute=compute)
        old = trainer._old_logp(batch)
        metrics = trainer.update(batch)
        runs[name] = (old, metrics, model)
    (old32, m32, w32), (old16, m16, w16) = runs["fp32"], runs["bf16"]
    assert all(p.dtype == torch.float32 for p in w16.parameters())  # the optimizer steps float32 weights
    assert old16.dtype == torch.float32
    mask = batch.loss_mask.bool()
    # bf16 products differ from fp32 (8-bit mantissa), but only a little, on every token
    diff = (old16 - old32)[mask].abs()
    assert 0 < diff.max().item() < 0.15, diff.max().item()
    assert m16["loss"] == pytest.approx(m32["loss"], abs=2e-2)
    # the bf16 run updates the weights in the direction of the float32 update
    base = torch.cat([p.flatten() for p in base_model.parameters()])
    d16 = torch.cat([p.detach().flatten() for p in w16.parameters()]) - base
    d32 = torch.cat([p.detach().flatten() for p in w32.parameters()]) - base
    assert d16.abs().max().item() > 1e-4
    assert torch.nn.functional.cosine_similarity(d16, d32, dim=0).item() > 0.9


def test_sft_in_bf16_lowers_its_loss(base_model):
    import numpy as np

    from rlgym_llm.train.sft import sft

    trajs = make_trajectories(base_model, n=4, seed=4)
    model = copy.deepcopy(base_model)
    losses = sft(model, trajs, pad_id=0, steps=8, batch_size=4, lr=3e-3, compute=CPU_BF16)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_transformers_policy_samples_in_bf16_with_float32_logprobs(base_model, tiny_tokenizer):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.policy import SamplingParams

    prompt = tiny_tokenizer.encode("<|im_start|>user\nwhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n")
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    fp32 = TransformersPolicy(base_model, tiny_tokenizer)
    bf16 = TransformersPolicy(base_model, tiny_tokenizer, compute=CPU_BF16)
    a = fp32.generate_batch([prompt], [greedy])[0]
    b = bf16.generate_batch([prompt], [greedy])[0]
    assert len(b.token_ids) > 0 and all(isinstance(x, float) for x in b.logprobs)
    # the bf16 logprobs of its own tokens are close to what float32 scores for them
    ref = fp32.score(prompt, b.token_ids)
    assert max(abs(x - y) for x, y in zip(ref, b.logprobs)) < 0.15
    assert a.token_ids[:1] == b.token_ids[:1]  # the first greedy choice survives the rounding


@pytest.mark.slow
def test_rlgym_train_runs_in_bf16_on_cpu(tmp_path):
    import json

    from rlgym_llm.cli.main import main

    args = ["train", f"out_dir={tmp_path}", "sft.enabled=false", "progress=false", "trainer.steps=1"]
    args += ["trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0", "trainer.threads=1"]
    args += [
        "trainer.device=cpu",
        "trainer.dtype=bfloat16",
        "trainer.loss.entropy_coef=0.01",
        "trainer.filter_zero_variance=false",
    ]
    assert main(args) == 0
    record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert record["step"] == 1 and record["grad_norm"] > 0
    assert "dtype: bfloat16" in (tmp_path / "config.yaml").read_text()


def test_the_vllm_server_gets_the_gpu_options_on_cuda_only(tiny_model_dir):
    import sys

    from rlgym_llm.config import load_config
    from rlgym_llm.recipes.parts import vllm_server_kwargs
    from rlgym_llm.rollout.vllm_server import VLLMServer

    cfg = load_config(
        "train",
        [
            "policy=vllm",
            "policy.gpu_memory_utilization=0.4",
            "policy.tensor_parallel_size=2",
            "policy.data_parallel_size=3",
            "policy.server_gpus=[1,2]",
        ],
    )
    on_gpu = vllm_server_kwargs(cfg.policy, Compute(torch.device("cuda"), torch.bfloat16))
    assert on_gpu == {
        "max_model_len": 1024,
        "device": "cuda",
        "dtype": "bfloat16",
        "gpu_memory_utilization": 0.4,
        "tensor_parallel_size": 2,
        "data_parallel_size": 3,
        "env": {"CUDA_VISIBLE_DEVICES": "1,2"},
    }
    server = VLLMServer(tiny_model_dir, port=8000, python=sys.executable, **on_gpu)
    cmd = " ".join(server.command())
    assert "--tensor-parallel-size 2 --data-parallel-size 3 --gpu-memory-utilization 0.4" in cmd
    assert "--dtype bfloat16" in cmd
    # the parallel sizes go through on CPU too; the GPU memory share does not
    cpu = VLLMServer(tiny_model_dir, port=8000, python=sys.executable, **vllm_server_kwargs(cfg.policy, CPU_BF16))
    cpu_cmd = " ".join(cpu.command())
    assert "--tensor-parallel-size 2 --data-parallel-size 3" in cpu_cmd and "--gpu-memory-utilization" not in cpu_cmd
    with pytest.raises(ConfigError) as e:
        load_config("train", ["policy=vllm", "policy.data_parallel_size=0", "policy.tensor_parallel_size=0"])
    assert e.value.problems == [
        "policy.tensor_parallel_size=0 must be >= 1",
        "policy.data_parallel_size=0 must be >= 1",
    ]
