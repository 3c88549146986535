"""Runs with different seeds sample with disjoint seed streams, so seeds are independent units."""

import asyncio

from rlgym_llm.recipes.sft import SEED_STRIDE, held_out_seed_base
from rlgym_llm.rollout.policy import Completion, SamplingParams, SeededPolicy


class _Recorder:
    """A policy that records the sampling seed of every call."""

    def __init__(self):
        self.seeds = []

    async def generate(self, prompt_token_ids, sampling):
        self.seeds.append(sampling.seed)
        return Completion(token_ids=(1,), logprobs=(0.0,), text="", finish_reason="stop")


def _stream(base, calls=3000):
    rec = _Recorder()
    policy = SeededPolicy(rec, base)

    async def go():
        for _ in range(calls):
            await policy.generate([1], SamplingParams())

    asyncio.run(go())
    return rec.seeds


def test_held_out_streams_of_different_run_seeds_share_no_seed():
    streams = {s: set(_stream(held_out_seed_base(s))) for s in range(8)}
    for a in range(8):
        for b in range(a + 1, 8):
            assert not streams[a] & streams[b], (a, b)
    # nor with any run's training stream (base seed * SEED_STRIDE)
    training = set().union(*(_stream(s * SEED_STRIDE) for s in range(8)))
    assert not training & set().union(*streams.values())


def test_the_held_out_manager_samples_from_that_base():
    from rlgym_llm.config import load_config
    from rlgym_llm.recipes.sft import held_out_manager

    for seed in (0, 3):
        manager = held_out_manager(load_config("train", [f"seed={seed}"]), lambda: None, None, _Recorder())
        assert manager.policy.base == held_out_seed_base(seed)


def test_seed_0_keeps_its_stream_and_control_the_old_bases_overlapped():
    assert held_out_seed_base(0) == 7_777_777  # every seed-0 figure in the docs is unchanged
    old = [set(_stream(s + 7_777_777)) for s in (4, 5)]  # what the bases were: 1 apart
    assert len(old[0] & old[1]) == 2999  # all but one seed shared
