"""`rlgym export RUN --out DIR`: a run's weights as a Hugging Face folder (LoRA merged, or the
adapter) that transformers loads; `rlgym eval checkpoint=RUN` takes the run's prompt settings;
`rlgym train` exports its last step to RUN/final_model (slow); vLLM serves an export (vllm)."""

import asyncio

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from rlgym_llm.cli.main import main  # noqa: E402
from rlgym_llm.config import load_config  # noqa: E402
from rlgym_llm.recipes import parts  # noqa: E402
from rlgym_llm.recipes.eval import with_run_settings  # noqa: E402
from rlgym_llm.train import checkpoint  # noqa: E402

IDS = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])
LORA = ["trainer.lora.enabled=true", "trainer.lora.r=4", "sft.enabled=false"]


def _run(tmp_path, tiny_model_dir, overrides):
    """A run folder as `rlgym train` leaves it: config.yaml and a checkpoint of trained weights."""
    cfg = load_config("train", overrides)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(parts.config_yaml(cfg))
    model, _ = parts.load_model(tiny_model_dir)
    if cfg.trainer.lora.enabled:
        model = parts.add_lora(model, cfg.trainer.lora)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:  # LoRA's B is zero at init: give every trained weight an effect
                p.add_(0.05 * torch.randn_like(p))
    model.eval()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    checkpoint.save(run / "checkpoints", 2, model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0))
    with torch.no_grad():
        return run, model(IDS).logits


def test_a_lora_run_exports_merged_weights_that_transformers_loads(tmp_path, tiny_model_dir, capsys):
    run, logits = _run(tmp_path, tiny_model_dir, LORA)
    assert main(["export", str(run), "--out", str(tmp_path / "out")]) == 0
    assert "written to" in capsys.readouterr().out
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert not any("lora" in k for k in loaded.state_dict())  # plain weights
    with torch.no_grad():
        assert torch.allclose(loaded(IDS).logits, logits, atol=1e-4)
        assert not torch.allclose(AutoModelForCausalLM.from_pretrained(tiny_model_dir)(IDS).logits, logits, atol=1e-3)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tokenizer.chat_template == AutoTokenizer.from_pretrained(tiny_model_dir).chat_template
    assert (tmp_path / "out" / "rlgym_run.yaml").exists()


def test_a_lora_run_exports_its_adapter(tmp_path, tiny_model_dir):
    run, logits = _run(tmp_path, tiny_model_dir, LORA)
    assert main(["export", str(run), "--out", str(tmp_path / "adapter"), "--adapter"]) == 0
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    assert not (tmp_path / "adapter" / "model.safetensors").exists()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    adapted = peft.PeftModel.from_pretrained(base, tmp_path / "adapter").eval()
    with torch.no_grad():
        assert torch.allclose(adapted(IDS).logits, logits, atol=1e-4)


def test_a_full_weight_run_exports_and_has_no_adapter(tmp_path, tiny_model_dir, capsys):
    run, logits = _run(tmp_path, tiny_model_dir, ["sft.enabled=false"])
    step = run / "checkpoints" / "step_000002"
    assert main(["export", str(step), "--out", str(tmp_path / "out")]) == 0
    with torch.no_grad():
        assert torch.allclose(AutoModelForCausalLM.from_pretrained(tmp_path / "out")(IDS).logits, logits, atol=1e-5)
    assert main(["export", str(run), "--out", str(tmp_path / "a"), "--adapter"]) == 2
    assert "without LoRA" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "b")]) == 2


def test_eval_of_a_checkpoint_renders_prompts_as_the_run_did(tmp_path, tiny_model_dir):
    overrides = ["sft.enabled=false", "agent.system_prompt=Be brief.", "agent.tool_schemas=true"]
    run, _ = _run(tmp_path, tiny_model_dir, [*overrides, "policy.sampling.max_tokens=40"])
    plain = load_config("eval", [])
    # eval's own defaults (the Math preset) differ from the run's prompt settings and budget
    assert not plain.agent.tool_schemas and plain.policy.sampling.max_tokens == 48
    cfg = with_run_settings(load_config("eval", [f"checkpoint={run}", "policy.sampling.max_tokens=48"]))
    assert cfg.agent.tool_schemas and cfg.agent.system_prompt == "Be brief."
    assert cfg.policy.sampling.max_tokens == 40 and cfg.policy.model == "tiny"
    assert main(["export", str(run), "--out", str(tmp_path / "out")]) == 0
    exported = with_run_settings(load_config("eval", [f"checkpoint={tmp_path / 'out'}"]))
    assert exported.agent == cfg.agent  # an exported folder carries the run's settings


@pytest.mark.slow
def test_rlgym_train_writes_its_final_model(tmp_path):
    args = ["train", f"out_dir={tmp_path}", "sft.enabled=false", "progress=false", "trainer.steps=1"]
    args += ["trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0", "trainer.threads=1"]
    assert main([*args, "trainer.lora.enabled=true"]) == 0
    from rlgym_llm.recipes.export import load_weights

    final = AutoModelForCausalLM.from_pretrained(tmp_path / "final_model")
    from_checkpoint = load_weights(parts.load_model(parts.model_dir(load_config("train", []).policy))[0], tmp_path)
    with torch.no_grad():
        assert torch.allclose(final(IDS).logits, from_checkpoint(IDS).logits, atol=1e-5)


@pytest.mark.vllm
def test_vllm_serves_an_exported_run_with_its_logprobs(tmp_path, tiny_model_dir, vllm_python):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy
    from rlgym_llm.rollout.policy import SamplingParams
    from rlgym_llm.rollout.vllm_server import VLLMServer

    run, _ = _run(tmp_path, tiny_model_dir, LORA)
    assert main(["export", str(run), "--out", str(tmp_path / "out")]) == 0
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "out")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "what is 2 + 2?"}], add_generation_prompt=True, tokenize=True, return_dict=False
    )

    async def ask(server):
        async with OpenAICompatiblePolicy(server.base_url, model=server.model_name, timeout_s=60) as policy:
            return await policy.generate(list(prompt), SamplingParams(max_tokens=12, temperature=0))

    with VLLMServer(tmp_path / "out", max_model_len=512, python=vllm_python) as server:
        completion = asyncio.run(ask(server))
    expected = TransformersPolicy.from_pretrained(str(tmp_path / "out")).score(list(prompt), completion.token_ids)
    assert max(abs(a - b) for a, b in zip(completion.logprobs, expected)) < 1e-3
