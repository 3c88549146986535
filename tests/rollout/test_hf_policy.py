"""The local transformers policy on the project's tiny model."""

import asyncio

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
