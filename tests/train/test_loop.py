"""The training loop's pieces on the tiny model and the toy Counter env: seeds, weight sync, metrics,
failed and zero-variance trajectories kept out of the loss, and one real step end to end."""

import asyncio
import copy
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlgym_llm  # noqa: E402
from rlgym_llm.rollout.hf_policy import TransformersPolicy  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.policy import SamplingParams, SeededPolicy, TrainablePolicy  # noqa: E402
from rlgym_llm.testing.policies import FaultyPolicy, ScriptedPolicy  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.credit_inputs import CreditAssigner  # noqa: E402
from rlgym_llm.train.loop import RunParts, refill_seeds, step_once, task_seeds, train  # noqa: E402
from rlgym_llm.train.metrics import MetricsLog  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, PolicyTrainer  # noqa: E402

ENV = "test/LoopCounter-v0"


@pytest.fixture(scope="module")
def parts(tiny_model_dir, tiny_tokenizer):
    from rlgym_agents.tool_calling import ToolCallingAgent

    if ENV not in rlgym_llm.list_envs():
        rlgym_llm.register(ENV, "rlgym_llm.testing.toy:CounterEnv", max_turns=2)
    torch.manual_seed(0)
    policy = TransformersPolicy.from_pretrained(str(tiny_model_dir))
    return policy, ToolCallingAgent(tiny_tokenizer)


def _scripted(tokenizer):
    """Plays Counter well on two of every three calls and submits at once on the third, so groups
    get different rewards."""
    calls = iter(range(10**6))

    def respond(prompt: str) -> str:
        target = int(re.findall(r"to exactly (\d+)", prompt)[0])
        done = "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]
        if next(calls) % 3 == 2 or done:
            return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target) + "}}</tool_call>"

    class Synced(ScriptedPolicy):
        syncs = 0

        def sync_weights(self, model):  # a scripted engine has no weights; count the calls
            self.syncs += 1

        async def close(self):
            pass

    return Synced(tokenizer, respond)


def _run(parts, inner=None, group_size=2, scripted=True, credit="grpo"):
    policy, agent = parts
    model = copy.deepcopy(policy.model)
    own = _scripted(policy.tokenizer) if scripted else TransformersPolicy(model, policy.tokenizer)
    config = RolloutConfig(
        group_size=group_size,
        max_turns=2,
        max_context=512,
        sampling=SamplingParams(max_tokens=24 if scripted else 6),
        token_check="off",
        env_in_thread=False,
    )
    engine = SeededPolicy(inner(own) if inner else own, base=0)
    manager = RolloutManager(ENV, agent, engine, config, env_kwargs={"max_target": 2})
    trainer = PolicyTrainer(model, LossConfig(recompute_old_logp=True), micro_batch_size=4)
    return RunParts(manager, trainer, own, CreditAssigner(credit, {}), pad_id=policy.pad_id), model


class _Recorder:
    def __init__(self):
        self.seeds = []

    async def generate(self, ids, sampling):
        self.seeds.append(sampling.seed)
        return "ok"


def test_seeded_policy_gives_every_call_its_own_seed_and_counts():
    inner = _Recorder()
    policy = SeededPolicy(inner, base=100)
    for _ in range(3):
        assert asyncio.run(policy.generate([1], SamplingParams())) == "ok"
    assert inner.seeds == [100, 101, 102] and policy.calls == 3


def test_task_seeds_are_a_function_of_the_step():
    assert task_seeds(10, 3, 0) == [10, 11, 12] and task_seeds(10, 3, 2) == [16, 17, 18]


def test_the_transformers_policy_shares_or_copies_the_trainers_weights(parts):
    policy, _ = parts
    model = copy.deepcopy(policy.model).train()
    shared = TransformersPolicy(model, policy.tokenizer)
    assert isinstance(shared, TrainablePolicy)
    shared.sync_weights(model)
    assert not model.training  # shared weights: only back to eval mode

    other = TransformersPolicy(copy.deepcopy(policy.model), policy.tokenizer)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    other.sync_weights(model)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), other.model.parameters()))
    asyncio.run(other.close())


def test_metrics_log_truncates_to_the_resumed_step(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    for step in (1, 2, 3):
        log.write({"step": step, "reward": step / 10, "nan": float("nan")})
    log.truncate(2)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["nan"] is None


def test_one_step_end_to_end_changes_the_weights_and_reports_every_metric(parts):
    run, model = _run(parts, credit="turn_grpo")
    before = [p.detach().clone() for p in model.parameters()]
    cfg = TrainerConfig(steps=1, tasks_per_step=2, filter_zero_variance=False)
    record = step_once(run, cfg, 0)
    assert record["trajectories"] == 4 and record["trained_on"] == 4 and not record["skipped_update"]
    assert 0 < record["success"] < 1 and record["zero_variance_share"] < 1
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert run.policy.syncs == 1
    for key in (
        "reward",
        "success",
        "zero_variance_share",
        "kl",
        "entropy",
        "clip_frac",
        "rollout_tokens_per_s",
        "update_tokens_per_s",
        "time_rollout_s",
        "time_credit_s",
        "time_update_s",
    ):
        assert np.isfinite(record[key]), key
    assert record["entropy"] > 0


def test_failed_trajectories_are_counted_and_left_out_of_the_loss(parts):
    # The first generate call of the batch fails for good: one episode fails, the rest train.
    run, _ = _run(parts, inner=lambda p: FaultyPolicy(p, {0: ValueError("bad output")}))
    cfg = TrainerConfig(steps=1, tasks_per_step=2, filter_zero_variance=False)
    record = step_once(run, cfg, 0)
    assert record["failed"] == 1 and record["trained_on"] == 3
    assert record["failures/engine"] == 1  # raised by the engine call: the manager classes it so


def test_zero_variance_groups_are_filtered_out(parts):
    # The untrained model never solves the task: every group has equal rewards, so GRPO gives
    # zero advantages and the filter leaves nothing to train on.
    run, model = _run(parts, scripted=False)
    before = [p.detach().clone() for p in model.parameters()]
    cfg = TrainerConfig(steps=1, tasks_per_step=2, filter_zero_variance=True)
    record = step_once(run, cfg, 0)
    assert record["zero_variance_share"] == 1.0 and record["trained_on"] == 0 and record["skipped_update"]
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def _parity_policy(tokenizer):
    """Counter: always right on odd targets (such a group ties: dropped); on even targets right on every
    other call (such a group varies: kept)."""
    calls = iter(range(10**6))

    def respond(prompt: str) -> str:
        target = int(re.findall(r"to exactly (\d+)", prompt)[0])
        done = "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]
        if done or (target % 2 == 0 and next(calls) % 2):
            return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target) + "}}</tool_call>"

    return ScriptedPolicy(tokenizer, respond)


def test_refill_seeds_are_a_function_of_step_and_draw_and_stay_apart():
    seen = set(task_seeds(0, 4, 0)) | set(task_seeds(0, 4, 1))
    for step in (0, 1):
        for draw in (1, 2):
            seeds = refill_seeds(0, 4, 3, step, draw, 4)
            assert seeds == refill_seeds(0, 4, 3, step, draw, 4) and not seen & set(seeds)
            seen |= set(seeds)
    assert refill_seeds(0, 4, 3, 0, 1, 2) == refill_seeds(0, 4, 3, 0, 1, 4)[:2]  # fewer missing: a prefix


def test_dynamic_sampling_refills_dropped_groups_within_the_draw_budget(parts):
    policy, _ = parts
    run, _ = _run(parts)
    run.rollouts.policy = SeededPolicy(_parity_policy(policy.tokenizer), base=0)
    asked = []
    real = run.rollouts.run_sync
    run.rollouts.run_sync = lambda seeds: asked.append(list(seeds)) or real(seeds)
    cfg = TrainerConfig(steps=1, tasks_per_step=4, filter_zero_variance=True, max_draws=6)
    record = step_once(run, cfg, 0)
    first = record["trajectories"] // 2 - round(record["zero_advantage_share"] * 4)  # groups kept from draw 1
    assert record["draws"] == len(asked) and asked[0] == task_seeds(0, 4, 0)
    for draw, seeds in enumerate(asked[1:], start=1):  # each refill asks for the groups still missing
        assert seeds == refill_seeds(0, 4, 6, 0, draw, len(seeds))
    kept = first + record["refill_groups"]
    assert record["trained_on"] == 2 * kept and record["trajectories_drawn"] == 2 * sum(map(len, asked))
    assert kept == 4 or record["draws"] == 6  # filled, or the budget ran out
    assert record["refill_groups"] > 0  # this policy's first draw ties somewhere and a refill adds groups
    # budget 1: drop only
    run2, _ = _run(parts)
    run2.rollouts.policy = SeededPolicy(_parity_policy(policy.tokenizer), base=0)
    once = step_once(run2, TrainerConfig(steps=1, tasks_per_step=4, max_draws=1), 0)
    assert once["draws"] == 1 and once["refill_groups"] == 0 and once["trained_on"] == 2 * first


def test_periodic_held_out_evaluation_lands_in_the_records_and_ends_the_run(parts, tmp_path):
    run, _ = _run(parts)
    policy, agent = parts
    held_out_engine = SeededPolicy(_scripted(policy.tokenizer), base=10**6)
    config = RolloutConfig(group_size=1, max_turns=2, max_context=512, token_check="off", env_in_thread=False)
    run.eval_rollouts = RolloutManager(ENV, agent, held_out_engine, config, env_kwargs={"max_target": 2})
    cfg = TrainerConfig(steps=4, tasks_per_step=1, eval_tasks=3, eval_every=2, save_every=0)
    summary = train(run, cfg, tmp_path, resume=False)
    records = summary["records"]
    assert [("eval_success" in r) for r in records] == [False, True, False, True]
    for r in records[1::2]:
        assert 0.0 <= r["eval_success"] <= 1.0 and r["eval_failed"] == 0.0
    # the last periodic evaluation is the "after" measurement: same seeds, same weights, not re-run
    assert summary["after"]["success"] == records[-1]["eval_success"]
    assert summary["before"] is not None
    # per-task outcomes (the task as an interval's unit) reach the summary, not the step records
    for measure in (summary["before"], summary["after"]):
        outcomes = measure["outcomes"]
        assert len(outcomes) == measure["tasks"] and sum(map(len, outcomes.values())) == measure["episodes"]
        flat = [x for xs in outcomes.values() for x in xs]
        assert set(flat) <= {0, 1} and sum(flat) / len(flat) == pytest.approx(measure["success"])
    assert not any(k.startswith("eval_outcomes") for r in records for k in r)


def test_a_step_drops_the_kept_turn_kv_and_trims_the_heap_before_the_update(parts, monkeypatch):
    """The engine keeps each turn's KV for the episode's next turn; episodes that ended leave theirs
    behind, so the loop drops them before the update (which needs the memory), and on the CPU hands
    the freed pages back to the OS around it (core/memory.py)."""
    from rlgym_llm.train import loop

    run, _ = _run(parts, scripted=False)
    events: list[str] = []
    monkeypatch.setattr(loop, "trim_heap", lambda: events.append("trim") or True)
    release, update = run.policy.release_cache, run.trainer.update
    monkeypatch.setattr(run.policy, "release_cache", lambda: events.append("release") or release())
    monkeypatch.setattr(run.trainer, "update", lambda batch: events.append("update") or update(batch))
    record = step_once(run, TrainerConfig(steps=1, tasks_per_step=2, filter_zero_variance=False), 0)
    assert record["turns"] > 1  # control: episodes went on to a second turn
    assert run.policy.prefixes.hits > 0  # ... which reused the first turn's KV
    assert events == ["release", "trim", "update", "trim", "release"]  # the last: the sync (new weights)
    assert len(run.policy.prefixes) == 0
    # sampling ahead, the engine's episodes run through the update: their kept KV stays (dropping it
    # at a thread-timed moment changed the next turn's logprobs in the last bit)
    events.clear()
    step_once(run, TrainerConfig(steps=2, tasks_per_step=2, filter_zero_variance=False, off_policy_steps=1), 1)
    assert events == ["trim", "update", "trim", "release"]
