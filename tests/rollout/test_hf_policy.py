"""The local transformers policy on the project's tiny model."""

import asyncio
import functools

import numpy as np
import pytest

from rlgym_llm.rollout.errors import ContextOverflowError
from rlgym_llm.rollout.policy import Completion, SamplingParams


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="module")
def prompts(tiny_tokenizer):
    texts = ["What is 2+2?", "How many apples are left if you eat 3 of 10?", "x"]
    rendered = [
        tiny_tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=False)
        for t in texts
    ]
    return [tiny_tokenizer.encode(r, add_special_tokens=False) for r in rendered]


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(max_tokens=24, temperature=1.0),
        SamplingParams(max_tokens=24, temperature=0.7, top_k=50, top_p=0.9),
        SamplingParams(max_tokens=24, temperature=0.0),
    ],
    ids=["t1", "t0.7-topk-topp", "greedy"],
)
def test_logprobs_equal_teacher_forced_recomputation(policy, prompts, sampling):
    outs = policy.generate_batch(prompts, [sampling] * len(prompts))  # left-padded batch, KV cache
    for prompt, out in zip(prompts, outs):
        assert len(out.token_ids) == len(out.logprobs) > 0
        rescored = policy.score(prompt, out.token_ids)  # one unpadded forward pass
        assert np.max(np.abs(np.array(rescored) - np.array(out.logprobs))) < 1e-4


def test_seeded_sampling_is_reproducible_and_independent_of_batching(policy, prompts):
    sp = [SamplingParams(max_tokens=16, seed=s) for s in (1, 2, 3)]
    batched = policy.generate_batch(prompts, sp)
    alone = [policy.generate_batch([p], [s])[0] for p, s in zip(prompts, sp)]
    assert [o.token_ids for o in batched] == [o.token_ids for o in alone]
    other = policy.generate_batch(prompts[:1], [SamplingParams(max_tokens=16, seed=99)])[0]
    assert other.token_ids != batched[0].token_ids


def test_length_limit_and_stop_tokens(policy, prompts):
    out = policy.generate_batch(prompts[:1], [SamplingParams(max_tokens=5, temperature=0)])[0]
    assert len(out.token_ids) == 5 and out.finish_reason == "length"
    first = out.token_ids[0]
    stopped = policy.generate_batch(
        prompts[:1], [SamplingParams(max_tokens=5, temperature=0, stop_token_ids=(first,))]
    )[0]
    assert stopped.token_ids == (first,) and stopped.finish_reason == "stop"


def test_context_overflow_is_a_policy_error(policy):
    with pytest.raises(ContextOverflowError):
        policy.generate_batch([[1] * policy.max_context], [SamplingParams(max_tokens=4)])
    # the generation budget shrinks to what the context leaves
    out = policy.generate_batch([[1] * (policy.max_context - 3)], [SamplingParams(max_tokens=50, temperature=0)])[0]
    assert len(out.token_ids) <= 3


def test_concurrent_async_requests_are_batched_and_match_sync(policy, prompts):
    sp = [SamplingParams(max_tokens=12, seed=i) for i in range(9)]

    async def run():
        return await asyncio.gather(*[policy.generate(prompts[i % 3], sp[i]) for i in range(9)])

    outs = asyncio.run(run())
    assert all(isinstance(o, Completion) for o in outs)
    expected = [policy.generate_batch([prompts[i % 3]], [sp[i]])[0].token_ids for i in range(9)]
    assert [o.token_ids for o in outs] == expected


def test_sampling_params_validate():
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0)


def test_finished_rows_leave_the_batch_and_change_no_sample(policy, prompts, monkeypatch):
    """A row that stops (its length limit here) is dropped from the decode batch: later forward passes
    run on the rows still sampling, and every row samples exactly what it does in a full batch."""
    from transformers import cache_utils

    sp = [SamplingParams(max_tokens=n, seed=s) for n, s in ((3, 1), (20, 2), (9, 3))]
    widths: list[int] = []
    forward = policy.model.forward

    @functools.wraps(forward)  # the same signature: the policy reads the cache keyword from it
    def counting(*args, **kwargs):
        widths.append(kwargs["input_ids"].shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(policy.model, "forward", counting)
    compacted = policy.generate_batch(prompts, sp)
    assert widths[0] == 3 and widths[-1] == 1 and sorted(widths, reverse=True) == widths
    assert [len(o.token_ids) for o in compacted] == [3, 20, 9]

    widths.clear()  # control: a cache without row selection keeps every row to the end
    monkeypatch.delattr(cache_utils.Cache, "batch_select_indices")
    full = policy.generate_batch(prompts, sp)
    assert set(widths) == {3}
    assert [o.token_ids for o in full] == [o.token_ids for o in compacted]
    for a, b in zip(full, compacted):
        assert np.max(np.abs(np.array(a.logprobs) - np.array(b.logprobs))) < 1e-5


def _live_caches() -> int:
    import gc

    from transformers.cache_utils import Cache

    return sum(isinstance(o, Cache) for o in gc.get_objects())


def test_a_call_trims_the_heap_once_its_kv_cache_is_freed(policy, prompts, monkeypatch):
    """Each decoding step makes a new, longer KV tensor per layer; the freed ones stay resident in the
    C heap until trimmed (core/memory.py). On the CPU a call trims once, after its cache is gone."""
    from transformers.cache_utils import DynamicCache

    from rlgym_llm.rollout import hf_policy

    before = _live_caches()  # another test's objects, if any
    seen: list[int] = []
    monkeypatch.setattr(hf_policy, "trim_heap", lambda: seen.append(_live_caches()) or True)
    policy.generate_batch(prompts, [SamplingParams(max_tokens=8, seed=s) for s in range(3)])
    assert seen == [before]
    held = DynamicCache()  # control: the count sees a cache that is alive
    assert _live_caches() == before + 1
    del held


def _two_turns(policy, prompts, tiny_tokenizer, seed):
    """Turn 1 on each prompt, then turn 2 on prompt + completion + a user reply (as an episode does)."""
    first = policy.generate_batch(prompts, [SamplingParams(max_tokens=10, seed=seed + i) for i in range(3)])
    reply = tiny_tokenizer.encode("<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n")
    nexts = [[*p, *o.token_ids, *reply] for p, o in zip(prompts, first)]
    second = policy.generate_batch(nexts, [SamplingParams(max_tokens=10, seed=seed + 10 + i) for i in range(3)])
    return first, nexts, second


def test_the_next_turn_reuses_the_kv_of_the_last_and_samples_the_same(tiny_model_dir, prompts, tiny_tokenizer):
    """An episode's next prompt extends its last prompt and completion: their KV is kept and the prefill
    runs only the new tokens. The logprobs still equal a teacher-forced pass over the whole prompt, and
    the tokens are those of an engine that keeps nothing."""
    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    keeping = TransformersPolicy.from_pretrained(str(tiny_model_dir))
    plain = TransformersPolicy.from_pretrained(str(tiny_model_dir), prefix_tokens=0)
    assert plain.prefixes is None
    first, nexts, second = _two_turns(keeping, prompts, tiny_tokenizer, seed=5)
    store = keeping.prefixes
    assert store.hits == 3  # every row of turn 2 found its turn-1 KV
    # the kept part: each prompt and its completion but the last sampled token
    assert store.reused_tokens == sum(len(p) + len(o.token_ids) - 1 for p, o in zip(prompts, first))
    for prompt, out in zip(nexts, second):
        rescored = keeping.score(prompt, out.token_ids)
        assert np.max(np.abs(np.array(rescored) - np.array(out.logprobs))) < 1e-4
    _, _, control = _two_turns(plain, prompts, tiny_tokenizer, seed=5)
    assert [o.token_ids for o in control] == [o.token_ids for o in second]


def test_kept_kv_is_dropped_when_the_weights_change(tiny_model_dir, prompts, tiny_tokenizer):
    """KV computed before an optimizer step is stale after it: an in-place write to any parameter
    empties the store, so the next turn runs its whole prompt."""
    import torch

    from rlgym_llm.rollout.hf_policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(str(tiny_model_dir))
    first = policy.generate_batch(prompts[:1], [SamplingParams(max_tokens=6, seed=1)])[0]
    assert len(policy.prefixes) == 1
    with torch.no_grad():
        next(policy.model.parameters()).add_(0.0)  # an in-place write, as an optimizer step makes
    policy.generate_batch([[*prompts[0], *first.token_ids, 5]], [SamplingParams(max_tokens=6, seed=2)])
    assert policy.prefixes.hits == 0
    policy.release_cache()
    assert len(policy.prefixes) == 0 and policy.prefixes.tokens == 0


def test_the_store_keeps_the_longest_prefix_and_a_token_budget():
    from rlgym_llm.rollout.kv_cache import PrefixStore

    store = PrefixStore(max_tokens=10)
    store.put([1, 2], ["a"])
    store.put([1, 2, 3, 4], ["b"])
    assert store.take([1, 2, 3, 4]) == (2, ["a"])  # the whole prompt as a key would leave no token to run
    assert store.take([1, 2, 3, 4, 5]) == (4, ["b"])
    assert store.take([1, 2, 3, 4, 5]) is None  # taken entries are gone
    assert store.hits == 2 and store.reused_tokens == 6
    for k in range(4):
        store.put([k] * 3, [k])  # 12 tokens against a budget of 10: the oldest goes
    assert len(store) == 3 and store.tokens == 9 and store.take([0, 0, 0, 0]) is None
