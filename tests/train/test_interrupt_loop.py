"""Ctrl-C (a real SIGINT to this process) inside the RL loop, on the tiny model: the loop checkpoints a
consistent state and re-raises, and a resume from that checkpoint gives the metrics and final weights
of an uninterrupted run. Interrupted during a step's rollouts, the state saved is the step's start;
during its update, the update finishes first and the state saved is the step's end."""

import copy
import json
import os
import signal

import pytest

torch = pytest.importorskip("torch")

import rlgym_llm  # noqa: E402
from rlgym_llm.rollout.hf_policy import TransformersPolicy  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.policy import SamplingParams, SeededPolicy  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.credit_inputs import CreditAssigner  # noqa: E402
from rlgym_llm.train.loop import RunParts, train  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, PolicyTrainer  # noqa: E402

pytestmark = pytest.mark.slow

ENV = "test/InterruptCounter-v0"
CFG = TrainerConfig(steps=2, tasks_per_step=2, filter_zero_variance=False, save_every=0, eval_tasks=0)
TIMING = ("time_", "cpu_", "tokens_per_s")


@pytest.fixture(scope="module")
def base(tiny_model_dir):
    if ENV not in rlgym_llm.list_envs():
        rlgym_llm.register(ENV, "rlgym_llm.testing.toy:CounterEnv", max_turns=2)
    return TransformersPolicy.from_pretrained(str(tiny_model_dir))


class CtrlC:
    """An engine that sends this process SIGINT: before its `at_call`-th generate call (during
    rollouts), or when `update` is called the `at_update`-th time (during an update)."""

    def __init__(self, inner, at_call=None):
        self.inner, self.at_call, self.n = inner, at_call, 0

    async def generate(self, ids, sampling):
        self.n += 1
        if self.n == self.at_call:
            os.kill(os.getpid(), signal.SIGINT)
        return await self.inner.generate(ids, sampling)


def _run(base, at_call=None, at_update=None):
    from rlgym_agents.tool_calling import ToolCallingAgent

    torch.manual_seed(0)
    model = copy.deepcopy(base.model)
    engine = TransformersPolicy(model, base.tokenizer)
    config = RolloutConfig(
        group_size=2, max_turns=2, max_context=512, sampling=SamplingParams(max_tokens=6), env_in_thread=False
    )
    seeded = SeededPolicy(CtrlC(engine, at_call), base=0)
    manager = RolloutManager(ENV, ToolCallingAgent(base.tokenizer), seeded, config, env_kwargs={"max_target": 2})
    trainer = PolicyTrainer(model, LossConfig(entropy_coef=0.01), micro_batch_size=4)
    if at_update is not None:
        update, calls = trainer.update, iter(range(1, 100))

        def interrupted_update(batch):
            if next(calls) == at_update:
                os.kill(os.getpid(), signal.SIGINT)  # held: the update still runs to its end
            return update(batch)

        trainer.update = interrupted_update
    return RunParts(manager, trainer, engine, CreditAssigner("grpo", {}), pad_id=base.pad_id), model


@pytest.fixture(scope="module")
def straight(base, tmp_path_factory):
    """(the folder, the final weights) of the run without Ctrl-C."""
    run, model = _run(base)
    out = tmp_path_factory.mktemp("straight")
    train(run, CFG, out)
    return out, {k: v.clone() for k, v in model.state_dict().items()}


def _metrics(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(TIMING) and not k.endswith(TIMING)} for r in rows]


@pytest.mark.parametrize("where", ["rollouts", "update"])
def test_ctrl_c_checkpoints_a_state_that_resumes_exactly(base, straight, tmp_path, where):
    calls_per_step = 2 * 2 * 2  # tasks x samples x turns at most; step 2's rollouts call at least once
    # rollouts: step 2 is cut before its update, and its start (after step 1) is saved; update: step
    # 1's update runs to its end, then the run stops with step 1 saved
    interrupted, _ = _run(base, at_call=calls_per_step + 1) if where == "rollouts" else _run(base, at_update=1)
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        train(interrupted, CFG, out)
    assert sorted(p.name for p in (out / "checkpoints").glob("step_*")) == ["step_000001"]
    assert [r["step"] for r in _metrics(out)] == [1]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the loop's handler is gone

    resumed, model = _run(base)
    summary = train(resumed, CFG, out)
    assert summary["resumed_from"] == 1 and summary["steps"] == CFG.steps
    assert _metrics(out) == _metrics(straight[0])
    assert all(torch.equal(straight[1][k], v) for k, v in model.state_dict().items())
