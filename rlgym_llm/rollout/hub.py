"""Models by Hugging Face Hub id, and their chat templates.

`resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")` finds the model where transformers does: in
the Hugging Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`),
laid out as `models--<org>--<name>/snapshots/<revision>/` with `refs/main` naming the revision.
A cached model is used without touching the network; one not cached is downloaded, unless
`HF_HUB_OFFLINE=1`, where the error says so. `org/name@revision` picks a branch, tag or commit.

`ensure_chat_template(tokenizer)` keeps the model's own chat template (and so its tool format) when
it has one that renders tool schemas; a tokenizer without a template, or a ChatML template that drops
tools, gets the project's ChatML tool template (`chat_template.CHATML_TOOLS_TEMPLATE`). Stop tokens
come from the model's own files: the tokenizer's EOS and `generation_config.json`'s `eos_token_id`
(which `TransformersPolicy` and vLLM both honour).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.rollout.chat_template import CHATML_TOOLS_TEMPLATE

logger = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+(@[\w./-]+)?$")
# What a causal LM folder needs; the rest of a hub repo (other formats, ONNX, GGUF...) is skipped.
_MODEL_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]
_PROBE_NAME = "rlgym_probe_tool"
_PROBE_TOOL = {
    "type": "function",
    "function": {"name": _PROBE_NAME, "description": "probe", "parameters": {"type": "object"}},
}


def is_hub_id(name: str) -> bool:
    """`org/name` or `org/name@revision` (and not an existing local path)."""
    return bool(_HUB_ID.match(name)) and not Path(name).expanduser().exists()


def resolve_model(name: str) -> Path:
    """The local folder of a model given as a folder or a Hub id (see the module docstring).

    Raises:
        ConfigError: not a model folder, or a Hub id that is neither cached nor downloadable.
    """
    path = Path(name).expanduser()
    if (path / "config.json").exists():
        return path
    if not is_hub_id(name):
        raise ConfigError(
            [f"policy.model={name!r} is not tiny, smollm2, a Hugging Face model folder or a Hub id (org/name)"]
        )
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo_id, _, revision = name.partition("@")
    try:  # the cache first, as transformers does: no network for a cached model
        folder = snapshot_download(repo_id, revision=revision or None, local_files_only=True)
    except LocalEntryNotFoundError:
        if constants.HF_HUB_OFFLINE:
            raise ConfigError(
                [
                    f"policy.model={name!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and "
                    "HF_HUB_OFFLINE is set: download it where there is a network "
                    f"(`huggingface-cli download {repo_id}`) or point HF_HUB_CACHE at a cache that holds it"
                ]
            ) from None
        try:
            folder = snapshot_download(repo_id, revision=revision or None, allow_patterns=_MODEL_FILES)
        except Exception as e:  # network, auth, unknown repo: one message with the cause
            raise ConfigError([f"policy.model={name!r}: cannot download it from the Hub: {e}"]) from e
    if not (Path(folder) / "config.json").exists():
        raise ConfigError([f"policy.model={name!r}: {folder} holds no config.json (not a transformers model)"])
    return Path(folder)


def renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template writes tool schemas into the prompt."""
    try:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "hi"}], tools=[_PROBE_TOOL], tokenize=False, add_generation_prompt=True
        )
    except Exception:  # a template that rejects tools= (jinja errors of any kind)
        return False
    return _PROBE_NAME in text


def ensure_chat_template(tokenizer: Any) -> str:
    """Give `tokenizer` a chat template that renders tools, keeping the model's own where it does.

    Returns:
        "model" (its own template), or "fallback" (the project's ChatML tool template was set).
    """
    own = getattr(tokenizer, "chat_template", None)
    if own and (renders_tools(tokenizer) or "<|im_start|>" not in own):
        if not renders_tools(tokenizer):
            logger.warning(
                "the model's chat template does not render tool schemas; the env's prompt must describe them"
            )
        return "model"
    tokenizer.chat_template = CHATML_TOOLS_TEMPLATE
    logger.info(
        "the model has %s; using the project's ChatML tool template",
        "no chat template" if not own else "a ChatML template without tools",
    )
    return "fallback"
