"""Models by Hub id: resolved through a Hugging Face cache laid out as the Hub's (offline), with the
chat template and stop tokens from the model's own files, and the ChatML tool template as fallback."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from huggingface_hub import constants

from rlgym_llm.config import PolicyConfig
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import parts
from rlgym_llm.rollout.chat_template import CHATML_TOOLS_TEMPLATE

REV = "0123456789abcdef0123456789abcdef01234567"
# A model's own template with its own tool format: tools listed under "Available functions:".
OWN_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nAvailable functions:\n{% for t in tools %}- {{ t.function.name }}\n"
    "{% endfor %}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _cache_model(cache: Path, repo: str, src: Path, template: str | None, extra_eos: str | None = None) -> Path:
    """Lay `src` out in `cache` as the Hub does: models--org--name/{refs/main, snapshots/REV/}."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snap = root / "snapshots" / REV
    shutil.copytree(src, snap)
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(REV)
    (snap / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((snap / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    if template is not None:
        config["chat_template"] = template
    (snap / "tokenizer_config.json").write_text(json.dumps(config))
    if extra_eos is not None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(src)
        gen = {"eos_token_id": [tok.eos_token_id, tok.convert_tokens_to_ids(extra_eos)]}
        (snap / "generation_config.json").write_text(json.dumps(gen))
    return snap


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory, tiny_model_dir):
    cache = tmp_path_factory.mktemp("hub")
    _cache_model(cache, "acme/tiny-chat", tiny_model_dir, OWN_TEMPLATE, extra_eos="<|im_start|>")
    _cache_model(cache, "acme/tiny-base", tiny_model_dir, None)
    return cache


@pytest.fixture
def offline(hub_cache, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return hub_cache


def test_a_hub_id_resolves_to_its_cached_snapshot(offline):
    folder = parts.model_dir(PolicyConfig(model="acme/tiny-chat"))
    assert folder == offline / "models--acme--tiny-chat" / "snapshots" / REV
    assert parts.model_dir(PolicyConfig(model=f"acme/tiny-chat@{REV}")) == folder


def test_an_uncached_id_offline_says_where_it_looked_and_what_to_do(offline):
    with pytest.raises(ConfigError, match="not in the Hugging Face cache") as e:
        parts.model_dir(PolicyConfig(model="acme/missing"))
    assert str(offline) in str(e.value) and "HF_HUB_OFFLINE" in str(e.value)
    with pytest.raises(ConfigError, match="not tiny, smollm2, a Hugging Face model folder or a Hub id"):
        parts.model_dir(PolicyConfig(model="no such thing"))


def test_the_models_own_template_tool_format_and_stop_tokens_are_used(offline):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    model, tokenizer = parts.load_model(parts.model_dir(PolicyConfig(model="acme/tiny-chat")))
    assert tokenizer.chat_template == OWN_TEMPLATE
    agent = parts.build_agent(parts.AgentConfig(), tokenizer)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    text = agent.render_text([{"role": "user", "content": "go"}], tools, generation_prompt=True)
    assert "Available functions:\n- add\n" in text  # the model's tool format, not the project's
    policy = TransformersPolicy(model, tokenizer)
    assert tokenizer.convert_tokens_to_ids("<|im_start|>") in policy.eos_ids  # from generation_config.json


def test_a_model_without_a_template_gets_the_chatml_tool_template(offline):
    _, tokenizer = parts.load_model(parts.model_dir(PolicyConfig(model="acme/tiny-base")))
    assert tokenizer.chat_template == CHATML_TOOLS_TEMPLATE


def test_rlgym_eval_takes_a_hub_id_offline(hub_cache, tmp_path):
    env = {**os.environ, "HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    args = ["env=counter", "policy.model=acme/tiny-chat", "tasks=2", "samples=1", "ks=[1]", "progress=false"]
    args += ["policy.sampling.temperature=0", "bootstrap_reps=10", f"out_dir={tmp_path}"]
    run = subprocess.run(
        [sys.executable, "-m", "rlgym_llm.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads((tmp_path / "eval.json").read_text())
    assert result["config"]["model_dir"].endswith(f"models--acme--tiny-chat/snapshots/{REV}")
