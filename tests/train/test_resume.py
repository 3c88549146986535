"""Kill-and-resume: `rlgym train` killed (SIGKILL) after a checkpoint and continued with
`resume=<its folder>` gives the same metrics and the same final weights as an uninterrupted run
(slow tier), synchronous, with rollouts sampled ahead (`trainer.off_policy_steps=1`: the
smoke run of that setting through the CLI), and on 2 processes (`trainer.nproc=2`: torchrun and
its workers are killed together, the way a lost job dies), with DDP and with FSDP (sharded
checkpoints)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

# Small and fast; the entropy bonus makes every step change the weights even when a group's
# rewards are all equal, so equal weights after the resume are not a no-op.
ARGS = [
    "sft.enabled=false",
    "trainer.steps=4",
    "trainer.tasks_per_step=2",
    "trainer.group_size=3",
    "trainer.save_every=1",
    "trainer.keep_checkpoints=5",
    "trainer.eval_tasks=2",
    "trainer.eval_every=1",  # held-out evaluations between steps must not disturb the replay
    "trainer.loss.entropy_coef=0.01",
    "trainer.filter_zero_variance=false",
    "trainer.optim.lr=1e-3",
    "trainer.threads=1",
    "env.max_turns=2",
    "policy.max_context=256",
    "policy.sampling.max_tokens=10",
    "progress=false",
]
TIMING = ("time_", "cpu_", "tokens_per_s")


def _process_tree(pid: int) -> list[int]:
    """`pid` and its descendants, read from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo += children.get(tree[-1], [])
    return tree


def _command(out: Path, *more: str) -> list[str]:
    overrides = [word for m in more for word in m.split()]  # a setting may hold several
    return [sys.executable, "-m", "rlgym_llm.cli.main", "train", f"out_dir={out}", *ARGS, *overrides]


def _raw(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith(TIMING) and not k.endswith(TIMING)} for r in rows]


def _weights(out: Path, step: int) -> dict:
    folder = out / "checkpoints" / f"step_{step:06d}"
    state = torch.load(folder / "trainer.pt", weights_only=False).get("model")
    if state is None:  # trainer.strategy=fsdp: sharded under dcp/
        from transformers import AutoModelForCausalLM

        from rlgym_llm.rollout.tiny_model import build_tiny_model
        from rlgym_llm.train.strategy import read_sharded_model

        state = read_sharded_model(folder, AutoModelForCausalLM.from_pretrained(build_tiny_model()).state_dict())
    return state


@pytest.mark.parametrize(
    "setting",
    [
        "trainer.off_policy_steps=0",
        "trainer.off_policy_steps=1",
        "trainer.nproc=2",
        "trainer.nproc=2 trainer.strategy=fsdp",
    ],
    ids=["synchronous", "off_policy_steps=1", "nproc=2", "nproc=2-fsdp"],
)
def test_a_killed_run_resumes_exactly(tmp_path, tiny_model_dir, setting):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    overlap = setting == "trainer.off_policy_steps=1"
    subprocess.run(_command(straight, setting), check=True, env=env, capture_output=True, timeout=600)
    # sampled ahead, step s trains on the rollouts of the weights before step s - 1's update
    assert [r["staleness_max"] for r in _raw(straight)] == ([0, 1, 1, 1] if overlap else [0, 0, 0, 0])

    proc = subprocess.Popen(_command(killed, setting), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = killed / "checkpoints" / "step_000002" / "state.json"
    deadline = time.monotonic() + 600
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be killed"
    for pid in _process_tree(proc.pid):  # torchrun's workers run in sessions of their own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait()
    assert not (killed / "checkpoints" / "step_000004").exists()

    # the same command again is refused: a new run never reuses a folder
    again = subprocess.run(_command(killed, setting), env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and f"pass resume={killed}" in again.stderr
    resumed = subprocess.run(
        _command(killed, setting, f"resume={killed}"), env=env, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from" in resumed.stderr and "step_000002" in resumed.stderr

    assert _metrics(killed) == _metrics(straight)
    assert [r["step"] for r in _metrics(killed)] == [1, 2, 3, 4]
    final_a, final_b = _weights(straight, 4), _weights(killed, 4)
    assert all(torch.equal(final_a[k], final_b[k]) for k in final_a)
    # the run did train after the resume point: the weights moved from step 2 to step 4
    mid = _weights(straight, 2)
    assert any(not torch.equal(mid[k], final_a[k]) for k in mid)
    summary_a = json.loads((straight / "summary.json").read_text())
    summary_b = json.loads((killed / "summary.json").read_text())
    assert summary_a["before"] == summary_b["before"] and summary_a["after"] == summary_b["after"]
