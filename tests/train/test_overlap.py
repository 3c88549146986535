"""Rollouts sampled ahead (`trainer.off_policy_steps`): the staleness bound, behaviour logprobs from
the weights version that sampled them, the synchronous loop unchanged at 0, failures that surface,
and an exact resume with batches in flight. Tiny model, toy Counter env."""

import copy
import re
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlgym_llm  # noqa: E402
from rlgym_llm.core.errors import ConfigError  # noqa: E402
from rlgym_llm.rollout.errors import TooManyFailuresError  # noqa: E402
from rlgym_llm.rollout.hf_policy import TransformersPolicy  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.policy import SamplingParams, SeededPolicy  # noqa: E402
from rlgym_llm.testing.policies import FaultyPolicy, ScriptedPolicy  # noqa: E402
from rlgym_llm.train.collect import VERSION_KEY, Ahead  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.credit_inputs import CreditAssigner  # noqa: E402
from rlgym_llm.train.loop import RunParts, task_seeds, train  # noqa: E402
from rlgym_llm.train.losses import token_logprobs  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer, TrainBatch  # noqa: E402

ENV = "test/OverlapCounter-v0"


@pytest.fixture(scope="module")
def base(tiny_model_dir, tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    if ENV not in rlgym_llm.list_envs():
        rlgym_llm.register(ENV, "rlgym_llm.testing.toy:CounterEnv", max_turns=2)
    torch.manual_seed(0)
    return TransformersPolicy.from_pretrained(str(tiny_model_dir)), ToolCallingAgent(tiny_tokenizer)


class _Scripted(ScriptedPolicy):
    """Counter played right on two calls of three (groups differ in reward); records the snapshots."""

    def __init__(self, tokenizer):
        self.turns = iter(range(10**6))
        self.synced: list[dict] = []
        self.fail_sync: Exception | None = None
        super().__init__(tokenizer, self._respond)

    def _respond(self, prompt: str) -> str:
        target = int(re.findall(r"to exactly (\d+)", prompt)[0])
        done = "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]
        if next(self.turns) % 3 == 2 or done:
            return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target) + "}}</tool_call>"

    def sync_weights(self, model):
        if self.fail_sync is not None:
            raise self.fail_sync
        self.synced.append(model)

    async def close(self):
        pass


def _parts(base, engine=None, inner=None, max_tokens=24, lr=1e-4):
    """A run on a copy of the tiny model; `engine` samples (default: a `TransformersPolicy` over a copy
    of that copy, the rollout side's own weights)."""
    policy, agent = base
    model = copy.deepcopy(policy.model)
    own = engine or TransformersPolicy(copy.deepcopy(model), policy.tokenizer)
    config = RolloutConfig(
        group_size=2,
        max_turns=2,
        max_context=512,
        sampling=SamplingParams(max_tokens=max_tokens),
        token_check="off",
        env_in_thread=False,
    )
    manager = RolloutManager(ENV, agent, SeededPolicy(inner(own) if inner else own, 0), config, {"max_target": 2})
    # the entropy bonus moves the weights on every step, so every version differs from the last
    loss = LossConfig(recompute_old_logp=True, entropy_coef=0.01)
    trainer = PolicyTrainer(model, loss, OptimConfig(lr=lr), micro_batch_size=4)
    return RunParts(manager, trainer, own, CreditAssigner("grpo", {}), pad_id=policy.pad_id), model


def _cfg(**kw):
    return TrainerConfig(**{"tasks_per_step": 2, "filter_zero_variance": False, "eval_tasks": 0, "save_every": 0, **kw})


def test_off_policy_steps_is_validated_and_needs_the_hf_engine():
    with pytest.raises(ConfigError, match="off_policy_steps must be >= 0"):
        TrainerConfig(off_policy_steps=-1)
    from rlgym_llm.config import load_config

    with pytest.raises(ConfigError, match="only policy=hf supports it"):
        load_config("train", ["policy=vllm", "trainer.off_policy_steps=1", "out_dir=/tmp/never-written"])
    cfg = load_config("train", ["trainer.off_policy_steps=1", "out_dir=/tmp/never-written"])
    assert cfg.trainer.off_policy_steps == 1


def test_sampling_ahead_needs_weights_of_its_own_and_the_recomputed_old_policy(base):
    run, model = _parts(base)
    shared = TransformersPolicy(model, base[0].tokenizer)
    with pytest.raises(ValueError, match="weights of its own"):
        Ahead(RunParts(run.rollouts, run.trainer, shared, run.credit, run.pad_id), 1, 3, lambda s: [s])
    run.trainer.loss_cfg = LossConfig(recompute_old_logp=False)
    with pytest.raises(ValueError, match="recompute_old_logp"):
        Ahead(run, 1, 3, lambda s: [s])


@pytest.mark.parametrize("k", [1, 2])
def test_staleness_is_bounded_by_off_policy_steps(base, tmp_path, k):
    engine = _Scripted(base[0].tokenizer)
    run, _ = _parts(base, engine=engine)
    steps = 4
    batches: list[list] = []
    real = run.trainer.update
    run.trainer.update = lambda batch: batches.append(batch) or real(batch)
    records = train(run, _cfg(steps=steps, off_policy_steps=k), tmp_path, resume=False)["records"]
    # step s trains on rollouts of version max(s - k, 0): sampled before the update of step s - k
    assert [r["staleness_max"] for r in records] == [min(s, k) for s in range(steps)]
    assert [r["staleness"] for r in records] == [float(min(s, k)) for s in range(steps)]
    assert all(r["staleness_max"] <= k and not r["skipped_update"] for r in records)
    # one snapshot per version the engine sampled from, each a consistent copy (not the live weights)
    assert len(engine.synced) == steps - k
    live = {name: t.data_ptr() for name, t in run.trainer.model.state_dict().items()}
    assert all(t.data_ptr() != live[name] for snap in engine.synced for name, t in snap.items())
    assert len(batches) == steps


def test_behaviour_logprobs_come_from_the_weights_version_that_sampled_them(base, tmp_path):
    run, model = _parts(base, max_tokens=6, lr=3e-3)
    versions: list[dict] = []  # the trainer's weights at the start of each step's update
    seen: list[TrainBatch] = []
    real = run.trainer.update

    def update(batch):
        versions.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        seen.append(batch)
        return real(batch)

    run.trainer.update = update
    records = train(run, _cfg(steps=3, off_policy_steps=1), tmp_path, resume=False)["records"]
    assert [r["staleness_max"] for r in records] == [0, 1, 1]
    scorer = copy.deepcopy(model).eval()

    def teacher_forced(weights, batch):
        scorer.load_state_dict(weights)
        with torch.no_grad():
            logits = scorer(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        return token_logprobs(logits, batch.input_ids)

    for step in range(1, 3):
        batch, mask = seen[step], seen[step].loss_mask.bool()
        behaviour = teacher_forced(versions[step - 1], batch)[mask]  # the version that sampled them
        current = teacher_forced(versions[step], batch)[mask]  # the weights the update starts from
        recorded = batch.engine_logp[mask]
        assert torch.allclose(recorded, behaviour, atol=2e-4), (recorded - behaviour).abs().max()
        assert (recorded - current).abs().max() > 10 * (recorded - behaviour).abs().max()
    # the truncated IS weight corrects the lag: it moved away from 1 once the batches were stale
    assert records[0]["is_weight"] == pytest.approx(1.0, abs=1e-4)
    assert any(abs(r["is_weight"] - 1.0) > 1e-4 for r in records[1:])


def _reference_sync_loop(run: RunParts, cfg: TrainerConfig) -> list[float]:
    """The synchronous algorithm written out: collect, credit, one update, sync; returns the losses."""
    losses = []
    for step in range(cfg.steps):
        trajs = run.rollouts.run_sync(task_seeds(run.train_seed_start, cfg.tasks_per_step, step))
        credit = run.credit(trajs)
        batch = TrainBatch.from_trajectories(trajs, credit.token_advantages(trajs), run.pad_id)
        losses.append(run.trainer.update(batch)["loss"])
        run.policy.sync_weights(run.trainer.model)
    return losses


def test_off_policy_steps_0_is_the_synchronous_loop_bit_for_bit(base, tmp_path):
    cfg = _cfg(steps=2, off_policy_steps=0)
    torch.manual_seed(1)
    run, model = _parts(base, max_tokens=6, lr=3e-3)
    records = train(run, cfg, tmp_path, resume=False)["records"]
    torch.manual_seed(1)
    ref_run, ref_model = _parts(base, max_tokens=6, lr=3e-3)
    losses = _reference_sync_loop(ref_run, cfg)
    assert [r["loss"] for r in records] == losses
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), ref_model.parameters()))
    assert all(r["staleness"] == 0.0 and r["staleness_max"] == 0 for r in records)
    assert run.rollouts.policy.calls == ref_run.rollouts.policy.calls


def test_a_failure_in_the_background_thread_surfaces(base, tmp_path):
    engine = _Scripted(base[0].tokenizer)
    run, _ = _parts(base, engine=engine)
    engine.fail_sync = RuntimeError("engine lost its weights")
    with pytest.raises(RuntimeError, match="engine lost its weights"):
        train(run, _cfg(steps=3, off_policy_steps=1), tmp_path, resume=False)
    assert not [t for t in threading.enumerate() if t.name.startswith("rlgym-rollouts-ahead")]  # joined


def test_failed_episodes_sampled_ahead_are_counted_and_stop_the_run_as_today(base, tmp_path):
    # call 5 fails for good: one episode sampled in the background thread fails, the others train
    run, _ = _parts(base, engine=_Scripted(base[0].tokenizer), inner=lambda p: FaultyPolicy(p, {5: ValueError("x")}))
    records = train(run, _cfg(steps=3, off_policy_steps=1), tmp_path / "a", resume=False)["records"]
    assert sum(r.get("failures/engine", 0) for r in records) == 1
    assert sum(r["failed"] for r in records) == 1 and sum(r["trained_on"] for r in records) == 11
    # every call fails: more than max_failed_share of the batch, the run stops with the error
    everything = {i: ValueError("engine down") for i in range(10**3)}
    run, _ = _parts(base, engine=_Scripted(base[0].tokenizer), inner=lambda p: FaultyPolicy(p, everything))
    with pytest.raises(TooManyFailuresError, match="RL step 1"):
        train(run, _cfg(steps=3, off_policy_steps=1), tmp_path / "b", resume=False)


def test_skipped_updates_are_counted_with_overlap(base, tmp_path):
    # the untrained model never solves Counter: every group ties, the filter leaves nothing to train
    run, model = _parts(base, max_tokens=6)
    before = [p.detach().clone() for p in model.parameters()]
    summary = train(run, _cfg(steps=2, off_policy_steps=1, filter_zero_variance=True), tmp_path, resume=False)
    assert summary["updates"]["skipped"] == 2
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_a_resumed_overlapped_run_trains_on_the_saved_batches_exactly(base, tmp_path):
    cfg = _cfg(steps=3, off_policy_steps=1, save_every=1, keep_checkpoints=5)
    torch.manual_seed(2)
    straight, straight_model = _parts(base, max_tokens=6, lr=3e-3)
    a = train(straight, cfg, tmp_path / "a", resume=False)["records"]
    torch.manual_seed(2)
    first, _ = _parts(base, max_tokens=6, lr=3e-3)
    train(first, cfg, tmp_path / "b", resume=False, stop_after=1)
    torch.manual_seed(2)
    again, again_model = _parts(base, max_tokens=6, lr=3e-3)  # a fresh process: nothing in memory
    b = train(again, cfg, tmp_path / "b", resume=True)["records"]
    timing = ("time_", "cpu_", "tokens_per_s")
    strip = [{k: v for k, v in r.items() if not (k.startswith(timing) or k.endswith(timing))} for r in a]
    assert strip == [{k: v for k, v in r.items() if not (k.startswith(timing) or k.endswith(timing))} for r in b]
    assert all(torch.equal(x, y) for x, y in zip(straight_model.parameters(), again_model.parameters()))
    saved = torch.load(tmp_path / "b" / "checkpoints" / "step_000001" / "trainer.pt", weights_only=False)
    ahead = saved["extra"]["ahead"]
    assert list(ahead) == [1] and ahead[1].version == 0  # step 2's batch, sampled with step 1's weights
    assert all(t.metadata[VERSION_KEY] == 0 for t in ahead[1].trajectories)
    assert np.isfinite([r["loss"] for r in b]).all()


def _same(got, want):
    """The same tokens and text, and logprobs equal to float32 rounding: the child's shared-memory
    weights may sit at other alignments, and the prefill's one-row head product (`logits_to_keep=1`)
    can then round its last bit differently."""
    assert [(c.token_ids, c.text, c.finish_reason) for c in got] == [
        (c.token_ids, c.text, c.finish_reason) for c in want
    ]
    for a, b in zip(got, want):
        assert max((abs(x - y) for x, y in zip(a.logprobs, b.logprobs)), default=0.0) < 1e-4


def test_the_sampling_process_samples_what_the_in_process_engine_samples(base):
    from rlgym_llm.rollout.errors import ContextOverflowError
    from rlgym_llm.rollout.hf_process import ProcessPolicy

    policy = base[0]
    here = TransformersPolicy(copy.deepcopy(policy.model), policy.tokenizer)
    child = ProcessPolicy(copy.deepcopy(policy.model), policy.tokenizer, threads=torch.get_num_threads())
    try:
        prompts = [[5, 6, 7, 8], [9, 10, 11]]
        samplings = [SamplingParams(max_tokens=8, seed=3), SamplingParams(max_tokens=8)]  # seeded, counter-seeded
        for _ in range(2):  # the unseeded draw follows the engine's call counter, in the child too
            before = here.generate_batch(prompts, samplings)
            _same(child.generate_batch(prompts, samplings), before)
        # a weight sync is a copy into the shared tensors: the child samples from the new weights
        with torch.no_grad():
            for p in here.model.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        child.sync_weights(here.model.state_dict())
        after = here.generate_batch(prompts, samplings)
        _same(child.generate_batch(prompts, samplings), after)
        assert [c.token_ids for c in after] != [c.token_ids for c in before]
        # the next turn of an episode sampled before the sync: the KV the child kept of it is stale (the
        # parent's copy bumps no version counter in the child), so the child runs it afresh, as here
        nxt = [[*p, *c.token_ids, 12] for p, c in zip(prompts, before)]
        _same(child.generate_batch(nxt, samplings), here.generate_batch(nxt, samplings))
        # the child's errors reach the caller with their type (the rollout manager classifies them)
        with pytest.raises(ContextOverflowError, match="fills the"):
            child.generate_batch([[1] * (child.max_context + 1)], samplings[:1])
        # detached(0): an in-process copy of the child's current weights (a seeded draw: a new engine
        # starts its own call counter)
        copied = child.detached(0)
        assert type(copied) is TransformersPolicy
        _same(copied.generate_batch(prompts[:1], samplings[:1]), here.generate_batch(prompts[:1], samplings[:1]))
    finally:
        child.shutdown()
    assert not child._proc.is_alive() and child._proc.exitcode == 0
    with pytest.raises(RuntimeError, match="sampling process has exited"):
        child.generate_batch([[1, 2]], [SamplingParams(max_tokens=2)])


@pytest.mark.slow  # two short runs and a process start (~1 min idle)
def test_sampling_ahead_in_a_process_trains_exactly_as_in_a_thread(base, tmp_path):
    """The child process changes where the batch is sampled, not what: same rollouts, same updates.

    One request per batch in both engines: which requests share a batch follows wall-clock timing
    (the batcher waits `batch_wait_s` for them), and a row's logits in a batch of 4 differ from its
    logits alone in the last float bits, enough to move the truncated-IS weights and the gradient.
    A CI run under load once batched a turn differently in the two runs (is_weight 0.97805852 against
    0.97805840). The KV budget keeps every turn, so no eviction order decides a reuse either."""
    from rlgym_llm.rollout.hf_process import ProcessPolicy

    policy = base[0]
    one_at_a_time = {"max_batch_size": 1, "prefix_tokens": 1 << 16}
    results = []
    for in_child in (False, True):
        model = copy.deepcopy(policy.model)
        if in_child:
            engine = ProcessPolicy(model, policy.tokenizer, threads=torch.get_num_threads(), **one_at_a_time)
        else:
            engine = TransformersPolicy(model, policy.tokenizer, **one_at_a_time)
        try:
            torch.manual_seed(1)
            run, model = _parts(base, engine=engine, max_tokens=6, lr=3e-3)
            records = train(run, _cfg(steps=3, off_policy_steps=1), tmp_path / str(in_child), resume=False)["records"]
        finally:
            if in_child:
                engine.shutdown()
        results.append((records, model))
    (thread_records, thread_model), (child_records, child_model) = results
    assert [r["staleness_max"] for r in child_records] == [0, 1, 1]
    for key in ("loss", "is_weight", "staleness", "grad_norm", "entropy"):
        assert [r[key] for r in child_records] == [r[key] for r in thread_records], key
    assert all(torch.equal(a, b) for a, b in zip(child_model.parameters(), thread_model.parameters()))


def test_off_policy_threads_is_validated():
    from rlgym_llm.config import load_config

    with pytest.raises(ConfigError, match="off_policy_threads must be >= 0"):
        TrainerConfig(off_policy_threads=-1)
    cfg = load_config("train", ["trainer.off_policy_steps=1", "trainer.off_policy_threads=2", "out_dir=/tmp/x"])
    assert cfg.trainer.off_policy_threads == 2
    assert TrainerConfig().off_policy_threads == 0  # the default: a thread of the trainer's process
