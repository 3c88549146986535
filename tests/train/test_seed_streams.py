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


def test_server_backends_and_several_processes_key_seeds_by_episode():
    from rlgym_llm.config import load_config

    def kind(*overrides):
        return load_config("train", list(overrides)).episode_seeds

    assert not kind()  # one hf process: its call order is the same every run
    assert kind("policy=vllm")
    assert kind("trainer.nproc=2")
    assert kind("trainer.sampling_seeds=episode")
    assert not kind("policy=vllm", "trainer.sampling_seeds=calls")  # asked for explicitly


def test_the_held_out_manager_of_a_vllm_run_keys_its_seeds_by_episode():
    from rlgym_llm.config import load_config
    from rlgym_llm.recipes.sft import held_out_manager
    from rlgym_llm.rollout.policy import EpisodeSeededPolicy

    manager = held_out_manager(load_config("train", ["policy=vllm", "seed=2"]), lambda: None, None, _Recorder())
    assert isinstance(manager.policy, EpisodeSeededPolicy) and manager.policy.base == held_out_seed_base(2)
    control = held_out_manager(load_config("train", ["seed=2"]), lambda: None, None, _Recorder())
    assert isinstance(control.policy, SeededPolicy)


class _Slow:
    """A server-like policy: each call of episode e answers after `delays[e]` seconds, so the order
    in which the episodes' next calls arrive depends on those delays, as a server's timing decides."""

    def __init__(self, delays):
        self.delays, self.seeds = delays, {}

    async def generate(self, prompt_token_ids, sampling):
        episode = prompt_token_ids[0]
        self.seeds.setdefault(episode, []).append(sampling.seed)
        await asyncio.sleep(self.delays[episode])
        return Completion(token_ids=(1,), logprobs=(0.0,), text="", finish_reason="stop")


def _episodes_seeds(delays, keyed):
    """Three episodes of three calls each, run concurrently; the seeds each episode drew."""
    from rlgym_llm.rollout.policy import Episode, EpisodeSeededPolicy

    inner = _Slow(delays)

    async def episode(e, policy):
        for _ in range(3):
            await policy.generate([e], SamplingParams())

    async def go():
        if keyed:
            seeded = EpisodeSeededPolicy(inner, held_out_seed_base(0))
            policies = [seeded.start(Episode(env=None, seed=100 + e, messages=[])) for e in range(3)]
        else:
            shared = SeededPolicy(inner, held_out_seed_base(0))
            policies = [shared] * 3
        await asyncio.gather(*(episode(e, p) for e, p in enumerate(policies)))

    asyncio.run(go())
    return inner.seeds


def test_episode_keyed_seeds_do_not_depend_on_the_answer_order_and_control_call_counters_do():
    fast_first, slow_first = [0.001, 0.005, 0.009], [0.009, 0.005, 0.001]
    assert _episodes_seeds(fast_first, keyed=True) == _episodes_seeds(slow_first, keyed=True)
    assert _episodes_seeds(fast_first, keyed=False) != _episodes_seeds(slow_first, keyed=False)
