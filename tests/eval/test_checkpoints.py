"""`rlgym eval checkpoint=...`: weights of `rlgym train` checkpoints (full and LoRA) reach the evaluated model."""

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
pytestmark = pytest.mark.slow

from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.recipes.export import load_weights as _load_checkpoint  # noqa: E402
from rlgym_llm.train import checkpoint  # noqa: E402


def _load(path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype="float32").eval()


def _save(run, model):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    return checkpoint.save(run / "checkpoints", 3, model, opt, sched)


IDS = torch.tensor([[5, 6, 7, 8, 9, 10]])


def test_full_checkpoint_of_a_run_folder(tiny_model_dir, tmp_path):
    trained = _load(tiny_model_dir)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.01 * torch.randn_like(p))
    _save(tmp_path, trained)
    loaded = _load_checkpoint(_load(tiny_model_dir), tmp_path)  # the run folder: its newest step_*
    with torch.no_grad():
        assert torch.allclose(loaded(IDS).logits, trained(IDS).logits, atol=1e-5)
        assert not torch.allclose(loaded(IDS).logits, _load(tiny_model_dir)(IDS).logits, atol=1e-3)


def test_lora_checkpoint_is_merged_with_the_shape_from_the_runs_config(tiny_model_dir, tmp_path):
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    trained = peft.get_peft_model(_load(tiny_model_dir), cfg)
    with torch.no_grad():
        for name, p in trained.named_parameters():
            if "lora_B" in name:  # zero at init: give the adapters an effect
                p.add_(0.05 * torch.randn_like(p))
    trained.eval()
    step = _save(tmp_path, trained)
    with pytest.raises(ConfigError, match=r"config\.yaml"):
        _load_checkpoint(_load(tiny_model_dir), step)
    lora = "policy:\n  model: tiny\ntrainer:\n  lora:\n    r: 4\n    alpha: 8\n    target_modules: [q_proj, v_proj]\n"
    (tmp_path / "config.yaml").write_text(lora)
    loaded = _load_checkpoint(_load(tiny_model_dir), step)
    assert not isinstance(loaded, peft.PeftModel)  # merged: plain weights for sampling
    with torch.no_grad():
        assert torch.allclose(loaded(IDS).logits, trained(IDS).logits, atol=1e-4)


def test_a_folder_without_checkpoints_is_a_config_error(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="no complete step"):
        _load_checkpoint(_load(tiny_model_dir), tmp_path)
