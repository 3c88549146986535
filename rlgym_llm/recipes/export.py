"""`rlgym export RUN --out DIR`: the weights of a training run as a Hugging Face folder.

    folder = export(Path("runs/train"), Path("exported"))            # LoRA merged: a plain model
    folder = export(Path("runs/train"), Path("adapter"), adapter=True)  # a peft adapter folder

RUN is a run folder (its newest checkpoint), a `step_*` checkpoint, or a folder `export` wrote.
The merged folder is what `save_pretrained` writes (config, safetensors, generation config) plus the
tokenizer with the chat template the run rendered with, so transformers loads it
(`AutoModelForCausalLM.from_pretrained`) and a vLLM server serves it. An adapter folder holds the
LoRA adapters only; its `base_model_name_or_path` is the model the adapters were trained on (the
run's SFT weights when it had a warm-up). Either folder gets `rlgym_run.yaml`, the run's config,
so `rlgym eval checkpoint=FOLDER` renders prompts as the run did. `rlgym train` exports its last
step to `RUN/final_model` (merged).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from rlgym_llm.config import PolicyConfig
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import parts

RUN_CONFIG = "rlgym_run.yaml"
"""The run's config, copied into every exported folder."""


def run_config(path: Path) -> dict[str, Any] | None:
    """The config of the run that wrote `path` (its `config.yaml`, or an export's `rlgym_run.yaml`,
    looked up in `path` and its parents), as plain data; None when there is none."""
    from omegaconf import OmegaConf

    for folder in (path, *path.parents):
        for name in (RUN_CONFIG, "config.yaml"):
            if (folder / name).exists():
                data = OmegaConf.to_container(OmegaConf.load(folder / name))
                if isinstance(data, dict) and "policy" in data:
                    return {str(k): v for k, v in data.items()}
    return None


def _step(path: Path) -> Path | None:
    from rlgym_llm.train import checkpoint

    if (path / "trainer.pt").exists():
        return path
    return checkpoint.latest(path) or checkpoint.latest(path / "checkpoints")


def load_weights(model: Any, path: Path, merge: bool = True) -> Any:
    """`model` with the weights of `path` (a Hugging Face folder, a `step_*` checkpoint, or a run
    folder: its newest checkpoint), in eval mode. LoRA adapters are merged unless `merge=False`,
    which returns the peft model.

    Raises:
        ConfigError: no weights at `path`, or LoRA adapters whose run config is missing.
    """
    if (path / "config.json").exists():  # a Hugging Face folder: its weights, same architecture
        from transformers import AutoModelForCausalLM

        model.load_state_dict(AutoModelForCausalLM.from_pretrained(path, dtype="float32").state_dict())
        return model.eval()
    import torch

    step = _step(path)
    if step is None:
        raise ConfigError([f"`{path}` holds no model folder and no complete step_* checkpoint"])
    # mmap: the checkpoint's tensors are read from the file as they are copied into the model, not
    # first loaded whole (its optimizer state included) beside the run's own weights
    state = torch.load(step / "trainer.pt", weights_only=False, map_location="cpu", mmap=True).get("model")
    if state is None:  # trainer.strategy=fsdp: the weights are sharded under dcp/, read whole here
        from rlgym_llm.train.strategy import read_sharded_model

        if any("lora_" in k for k in read_sharded_model(step, None)):
            adapted = _with_lora(model, step)
            adapted.load_state_dict(read_sharded_model(step, adapted.state_dict()))
            return (adapted.merge_and_unload() if merge else adapted).eval()
        state = read_sharded_model(step, model.state_dict())
    if any("lora_" in k for k in state):
        adapted = _with_lora(model, step)
        adapted.load_state_dict(state)
        # merged: plain weights again, sampling needs no adapter code
        model = adapted.merge_and_unload() if merge else adapted
    else:
        model.load_state_dict(state)
    return model.eval()


def _with_lora(model: Any, step: Path) -> Any:
    """Wrap `model` with the adapters of the run that wrote `step` (its config: trainer.lora)."""
    from peft import LoraConfig, get_peft_model

    config = run_config(step)
    if config is None:
        raise ConfigError([f"{step} holds LoRA adapters but no config.yaml of its run says their shape"])
    lora = config["trainer"]["lora"]
    peft_config = LoraConfig(
        r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=0.0, target_modules=list(lora["target_modules"])
    )
    return get_peft_model(model, peft_config)


def _base_folder(run: Path, config: dict[str, Any]) -> Path:
    """The weights a run started RL from: its SFT warm-up (`sft.init` or `sft_model/`), else its model."""
    sft = config.get("sft", {})
    root = next((d for d in (run, *run.parents) if (d / "config.yaml").exists()), run)
    for folder in (sft.get("init"), root / "sft_model" if sft.get("enabled") else None):
        if folder and (Path(folder) / "config.json").exists():
            return Path(folder)
    return parts.model_dir(PolicyConfig(model=config["policy"]["model"]))


def export(run: Path, out: Path, adapter: bool = False) -> Path:
    """Write the weights of `run` to `out` as a Hugging Face folder (see the module docstring).

    Raises:
        ConfigError: no run config or no weights at `run`; `adapter=True` for a run without LoRA.
    """
    config = run_config(run)
    if config is None:
        raise ConfigError([f"`{run}` is not in a run folder of `rlgym train` (no config.yaml above it)"])
    model, tokenizer = parts.load_model(parts.model_dir(PolicyConfig(model=config["policy"]["model"])))
    weights = load_weights(model, run, merge=not adapter)
    if adapter:
        if not hasattr(weights, "peft_config"):
            raise ConfigError([f"`{run}` was trained without LoRA: it has no adapter to export (drop --adapter)"])
        weights.peft_config["default"].base_model_name_or_path = str(_base_folder(run, config).resolve())
    out.mkdir(parents=True, exist_ok=True)
    weights.save_pretrained(out)
    tokenizer.save_pretrained(out)
    source = next((d / "config.yaml" for d in (run, *run.parents) if (d / "config.yaml").exists()), None)
    if source is not None:
        shutil.copyfile(source, out / RUN_CONFIG)
    else:  # exporting an export: its copy of the run config travels on
        from omegaconf import OmegaConf

        OmegaConf.save(OmegaConf.create(config), out / RUN_CONFIG)
    return out
