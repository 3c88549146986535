"""Two GRPO steps of the tiny model on a served env (`rlgym serve` + rlgym/Remote-v0) match the same two
steps on the env in process: the same rewards, the same losses, the same weights after each step."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("openenv.core", reason="the serve extra (openenv-core) is not installed")

from rlgym_llm.rollout.hf_policy import TransformersPolicy  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.policy import EpisodePolicy, EpisodeSeededPolicy, SamplingParams  # noqa: E402
from rlgym_llm.testing.policies import ScriptedPolicy  # noqa: E402
from rlgym_llm.train.config import TrainerConfig  # noqa: E402
from rlgym_llm.train.credit_inputs import CreditAssigner  # noqa: E402
from rlgym_llm.train.loop import RunParts, step_once  # noqa: E402
from rlgym_llm.train.trainer import LossConfig, PolicyTrainer  # noqa: E402

pytestmark = pytest.mark.slow

ENV = "toy/Counter-v0"
MAX_TURNS = 2
# Compared exactly: what the episodes gave and what the update did with them (timings differ).
SAME = ("reward", "success", "trajectories", "trained_on", "failed", "skipped_update", "zero_variance_share")
CLOSE = ("loss", "kl", "entropy", "clip_frac", "grad_norm")


@pytest.fixture
def served():
    """A `rlgym serve` process for ENV: its url and its Popen (tests that kill it use this one's pid only)."""
    cmd = [sys.executable, "-m", "rlgym_llm.cli.main", "serve", ENV, "max_target=2", "--max-turns", str(MAX_TURNS)]
    cmd += ["--port", "0"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    assert line.startswith("rlgym serve: "), f"the server did not start: {line!r}"
    yield SimpleNamespace(url=line.split(" at ")[1].split()[0], proc=proc)
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture
def server(served):
    return served.url


def _counter_move(prompt: str) -> str:
    """A good Counter move: add what is missing, then submit."""
    start, target = map(int, re.findall(r"starts at (\d+)\. Bring it to exactly (\d+)", prompt)[0])
    if "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]:
        return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target - start) + "}}</tool_call>"


class HalfScripted(EpisodePolicy):
    """Samples 0 and 1 of each group play a scripted good game, the rest sample the model (seeds keyed by
    episode): every group has reward variance, so both steps update, and the second step's samples come
    from the weights the first step left."""

    def __init__(self, model_policy, tokenizer):
        self.sampled = EpisodeSeededPolicy(model_policy, base=0)
        self.scripted = ScriptedPolicy(tokenizer, _counter_move)

    def start(self, episode):
        return self.scripted if episode.sample < 2 else self.sampled.start(episode)


def _two_steps(model_dir, tokenizer, env_id: str, env_kwargs: dict) -> tuple[list[dict], list]:
    from rlgym_agents.tool_calling import ToolCallingAgent

    torch.manual_seed(0)
    policy = TransformersPolicy.from_pretrained(str(model_dir))
    model = copy.deepcopy(policy.model)
    # One request per forward pass: which episodes' calls share a batch depends on timing, and a batch's
    # padding changes the logits in the last bits, which can flip a sampled token.
    own = TransformersPolicy(model, policy.tokenizer, max_batch_size=1)
    engine = HalfScripted(own, tokenizer)
    config = RolloutConfig(
        group_size=4,
        max_turns=MAX_TURNS,
        max_context=512,
        sampling=SamplingParams(max_tokens=24, temperature=1.0),
        token_check="off",
    )
    manager = RolloutManager(env_id, ToolCallingAgent(tokenizer), engine, config, env_kwargs=env_kwargs)
    trainer = PolicyTrainer(model, LossConfig(recompute_old_logp=True), micro_batch_size=4)
    run = RunParts(manager, trainer, own, CreditAssigner("grpo", {}), pad_id=policy.pad_id)
    cfg = TrainerConfig(steps=2, tasks_per_step=2, filter_zero_variance=False)
    records, weights = [], []
    try:
        for step in range(2):
            records.append(step_once(run, cfg, step))
            weights.append([p.detach().clone() for p in model.parameters()])
    finally:
        manager.close()
    return records, weights


def test_two_grpo_steps_on_a_served_env_match_the_env_in_process(server, tiny_model_dir, tiny_tokenizer):
    local, local_w = _two_steps(tiny_model_dir, tiny_tokenizer, ENV, {"max_target": 2})
    remote, remote_w = _two_steps(tiny_model_dir, tiny_tokenizer, "rlgym/Remote-v0", {"url": server})
    for step, (a, b) in enumerate(zip(local, remote, strict=True)):
        assert b["failed"] == 0, f"step {step}: {b}"
        for key in SAME:
            assert a[key] == b[key], (step, key, a[key], b[key])
        for key in CLOSE:
            if key in a:
                assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-7), (step, key)
    assert not all(torch.equal(x, y) for x, y in zip(local_w[0], local_w[1])), "the second step changed nothing"
    for step in range(2):
        assert all(torch.equal(x, y) for x, y in zip(local_w[step], remote_w[step])), f"weights differ after {step}"


def test_rlgym_train_env_remote_runs_against_a_server(tmp_path):
    """The command of docs/interop.md ("Training on a remote env"), cut to 2 RL steps: SFT warm-up with the
    Counter oracle, RL and the test-pool evaluation all through the server; no episode fails."""
    cmd = [sys.executable, "-m", "rlgym_llm.cli.main", "serve", ENV, "max_target=5", "max_start=249"]
    proc = subprocess.Popen([*cmd, "--max-turns", "4", "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split(" at ")[1].split()[0].replace("http", "ws")
        train = [sys.executable, "-m", "rlgym_llm.cli.main", "train", "env=remote", f"env.url={url}"]
        train += ["env.max_turns=4", "agent.tool_schemas=false", "env.oracle=rlgym_llm.testing.toy:CounterPlayer"]
        train += ["policy.sampling.max_tokens=24", "sft.episodes=16", "sft.steps=5", "trainer.steps=2"]
        train += ["trainer.tasks_per_step=2", "trainer.group_size=4", "trainer.eval_tasks=8", "progress=false"]
        out = subprocess.run([*train, f"out_dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        assert "rlgym train: rlgym/Remote-v0" in out.stdout and "(8 distinct tasks, 8 episodes)" in out.stdout
        records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        assert len(records) == 2 and all(r["failed"] == 0 and r["trajectories"] == 8 for r in records)
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["sft"]["episodes"] == 16
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_server_that_dies_mid_rollout_is_recorded_as_env_failures(served, tiny_tokenizer):
    """The server goes away while episodes are in flight: each episode ends with an env failure on its
    trajectory (connection lost, or unreachable on the retry), and the rollout returns all of them."""
    import os
    import signal

    from rlgym_agents.tool_calling import ToolCallingAgent
    from rlgym_llm.core.types import FailureKind

    server_pid = served.proc.pid  # this test's server only (a worker may hold other servers: Ray's, vLLM's)

    def respond(prompt: str) -> str:
        if "counter = " in prompt and served.proc.poll() is None:
            os.kill(server_pid, signal.SIGKILL)  # at the first second turn: episodes are mid-way
        return '<tool_call>{"name": "add", "arguments": {"amount": 1}}</tool_call>'

    policy = ScriptedPolicy(tiny_tokenizer, respond, delay_s=0.3)
    config = RolloutConfig(group_size=2, max_turns=MAX_TURNS, max_context=512, token_check="off")
    env_kwargs = {"url": served.url, "retries": 1, "retry_backoff_s": 0.05, "connect_timeout_s": 2}
    with RolloutManager(
        "rlgym/Remote-v0", ToolCallingAgent(tiny_tokenizer), policy, config, env_kwargs=env_kwargs
    ) as m:
        trajectories = m.run_sync([0, 1, 2, 3, 4, 5, 6, 7])
    assert len(trajectories) == 16
    failed = [t for t in trajectories if t.failures]
    assert failed, "control: the kill happened while episodes were running"
    assert all(t.failures[0].kind is FailureKind.ENV for t in failed)
    assert all(t.failures[0].error_type == "RemoteEnvError" for t in failed)
    assert any("lost" in t.failures[0].message or "cannot reach" in t.failures[0].message for t in failed)
