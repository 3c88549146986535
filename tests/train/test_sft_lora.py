"""`sft.lora=true`: the warm-up trains LoRA adapters of trainer.lora's shape and saves them merged into
a plain model folder (no adapter keys), which transformers loads and RL starts from."""

import pytest

torch = pytest.importorskip("torch")
safetensors = pytest.importorskip("safetensors.torch")


def _weights(folder):
    return safetensors.load_file(str(folder / "model.safetensors"))


@pytest.mark.slow  # a 3-step warm-up each
def test_a_lora_warm_up_saves_merged_weights_that_moved(tmp_path, tiny_model_dir):
    from pathlib import Path

    from transformers import AutoModelForCausalLM

    from rlgym_llm.cli.main import main

    out = tmp_path / "run"
    args = ["sft", "sft.steps=3", "sft.episodes=4", "sft.batch_size=2", "sft.lr=1e-2", "progress=false"]
    assert main([*args, "sft.lora=true", "trainer.lora.r=4", f"out_dir={out}"]) == 0
    saved = _weights(out / "sft_model")
    assert not [k for k in saved if "lora_" in k or "base_layer" in k]  # a plain model, adapters merged
    base = _weights(Path(tiny_model_dir))
    assert saved.keys() == base.keys()
    moved = {k for k in base if not torch.equal(base[k], saved[k])}
    # trainer.lora's default targets are the attention projections: only those weights change
    assert moved and all(k.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "o_proj") for k in moved)
    AutoModelForCausalLM.from_pretrained(out / "sft_model")  # loads as it is


@pytest.mark.slow
def test_without_lora_every_weight_may_move(tmp_path, tiny_model_dir):
    from pathlib import Path

    from rlgym_llm.cli.main import main

    out = tmp_path / "run"
    args = ["sft", "sft.steps=3", "sft.episodes=4", "sft.batch_size=2", "sft.lr=1e-2", "progress=false"]
    assert main([*args, f"out_dir={out}"]) == 0  # the control: full fine-tuning
    saved, base = _weights(out / "sft_model"), _weights(Path(tiny_model_dir))
    moved = {k for k in base if not torch.equal(base[k], saved[k])}
    assert any("mlp" in k for k in moved)
