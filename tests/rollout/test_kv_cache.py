"""Incremental decoding passes the KV cache under the name the installed transformers takes, so it
warns nowhere (the old name warned once per generated token) and keeps working after the rename."""

import warnings

import numpy as np
import pytest

from rlgym_llm.rollout.kv_cache import cache_kwarg, cache_of, last_logits_kwargs
from rlgym_llm.rollout.policy import SamplingParams

DEPRECATED = r".*(past_key_values|cache_params).*"


class _Old:
    """A model of a transformers release before the rename."""

    def forward(self, input_ids=None, past_key_values=None, use_cache=None):
        return None


class _New:
    def forward(self, input_ids=None, cache=None, use_cache=None):
        return None


class _Wrapped:
    """A PEFT-style wrapper: its own forward takes anything, the base model's decides."""

    def __init__(self, base):
        self.base = base

    def get_base_model(self):
        return self.base

    def forward(self, *args, **kwargs):
        return None


def test_the_keyword_follows_the_model_and_looks_through_a_wrapper():
    assert cache_kwarg(_Old()) == "past_key_values"
    assert cache_kwarg(_New()) == "cache"
    assert cache_kwarg(_Wrapped(_Old())) == "past_key_values"
    assert cache_kwarg(_Wrapped(_New())) == "cache"


def test_the_cache_is_read_from_either_output_field():
    from dataclasses import dataclass

    @dataclass
    class OldOut:
        past_key_values: object = None

    @dataclass
    class NewOut:
        cache: object = None

    assert cache_of(OldOut("kv")) == "kv" and cache_of(NewOut("kv")) == "kv" and cache_of(object()) is None


def test_generation_raises_no_cache_deprecation_warning(tiny_model_dir, tiny_tokenizer):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(str(tiny_model_dir))
    text = tiny_tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True, tokenize=False
    )
    prompt = tiny_tokenizer.encode(text, add_special_tokens=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=DEPRECATED)
        out = policy.generate_batch([prompt, prompt], [SamplingParams(max_tokens=12, seed=s) for s in (1, 2)])
        # the cached path still gives the teacher-forced logprobs
        for o in out:
            assert len(o.token_ids) > 1
            assert np.max(np.abs(np.array(policy.score(prompt, o.token_ids)) - np.array(o.logprobs))) < 1e-4


def test_control_the_old_keyword_warns_on_this_transformers(tiny_model_dir):
    """Why the helper exists: where the model takes `cache`, the old keyword warns."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    if cache_kwarg(model) != "cache":
        pytest.skip("this transformers predates the rename: the old keyword is the current one")
    ids = torch.tensor([[1, 2, 3]])
    past = cache_of(model(input_ids=ids, use_cache=True))
    with pytest.warns(Warning, match=DEPRECATED):
        model(input_ids=torch.tensor([[4]]), past_key_values=past, use_cache=True)


class _KeepsLogits:
    def forward(self, input_ids=None, logits_to_keep=0):
        return None


class _KeepsLogitsOld:
    def forward(self, input_ids=None, num_logits_to_keep=0):
        return None


def test_the_prefill_asks_for_the_last_position_where_the_model_can():
    assert last_logits_kwargs(_KeepsLogits()) == {"logits_to_keep": 1}
    assert last_logits_kwargs(_KeepsLogitsOld()) == {"num_logits_to_keep": 1}
    assert last_logits_kwargs(_Wrapped(_KeepsLogits())) == {"logits_to_keep": 1}
    assert last_logits_kwargs(_New()) == {}  # a model without the keyword gets the full logits, as before


def test_the_prefill_computes_one_position_of_logits(tiny_model_dir, tiny_tokenizer, monkeypatch):
    """A batch's prefill computed batch x prompt x vocab logits to sample from the last position
    (2.5 GB for 32 SmolLM2 prompts of 400 tokens); it now computes one position per prompt, and the
    samples and logprobs are the same as from the full logits."""
    import rlgym_llm.rollout.hf_policy as hp

    prompts = [tiny_tokenizer.encode("What is 2+2? " * 20, add_special_tokens=False)]
    prompts.append(prompts[0][:30])
    vocab = None

    def run():
        policy = hp.TransformersPolicy.from_pretrained(str(tiny_model_dir))
        shapes = []
        hook = policy.model.register_forward_hook(lambda m, a, out: shapes.append(tuple(out.logits.shape)))
        try:
            out = policy.generate_batch(prompts, [SamplingParams(max_tokens=4, seed=s) for s in (1, 2)])
        finally:
            hook.remove()
        return out, shapes[0], policy.model.config.vocab_size

    out, prefill, vocab = run()
    assert prefill == (2, 1, vocab)  # not (2, prompt length, vocab)
    monkeypatch.setattr(hp, "last_logits_kwargs", lambda model: {})  # control: every position's logits
    ref, prefill_full, _ = run()
    assert prefill_full == (2, len(prompts[0]), vocab)
    for a, b in zip(out, ref):
        assert a.token_ids == b.token_ids
        assert np.max(np.abs(np.array(a.logprobs) - np.array(b.logprobs))) < 1e-4
