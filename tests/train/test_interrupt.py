"""Ctrl-C in `rlgym train`, as a user presses it: SIGINT to a real `rlgym train` process. During the
RL loop the run saves a checkpoint of where it stopped, prints one line with the command that
continues it and exits 130, with no traceback; `rlgym train resume=RUN` (nothing retyped) continues
from that step, and its summary covers the whole run. During the warm-up: the same line, no traceback."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

STEPS = 4
ARGS = [
    "sft.steps=2",
    "sft.episodes=8",
    f"trainer.steps={STEPS}",
    "trainer.tasks_per_step=2",
    "trainer.group_size=2",
    "trainer.eval_tasks=2",
    "trainer.save_every=0",  # only at the end: before the fix a Ctrl-C lost every step
    "trainer.threads=1",
    "policy.max_context=256",
    "policy.sampling.max_tokens=8",
    "progress=false",
    "final_model=false",
]


def _rlgym(*args: str) -> list[str]:
    return [sys.executable, "-m", "rlgym_llm.cli.main", "train", *args]


def _interrupt(cmd: list[str], tmp_path: Path, ready) -> tuple[int, str]:
    """Start `cmd`, send SIGINT once `ready()` holds; (exit code, stdout + stderr)."""
    log = tmp_path / "interrupted.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONHASHSEED": "0"})
        deadline = time.monotonic() + 600
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be interrupted:\n{log.read_text()[-3000:]}"
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=300)
    return rc, log.read_text()


def _records(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_ctrl_c_saves_the_run_and_resume_continues_it(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    rc, printed = _interrupt(_rlgym(f"out_dir={out}", *ARGS), tmp_path, lambda: len(_records(out)) >= 1)

    assert rc == 130, printed[-3000:]
    assert "Traceback" not in printed, printed[-3000:]
    again = f"rlgym train resume={out}"
    assert [line for line in printed.splitlines() if again in line] != [], printed[-3000:]
    assert len([line for line in printed.splitlines() if again in line]) == 1, printed[-3000:]
    saved = sorted((out / "checkpoints").glob("step_*/state.json"))
    assert saved, f"no checkpoint: {printed[-3000:]}"
    step = json.loads(saved[-1].read_text())["step"]
    assert 1 <= step < STEPS and [r["step"] for r in _records(out)][:step] == list(range(1, step + 1))
    assert f"interrupted after {step} of {STEPS} RL steps" in printed
    before = json.loads(saved[-1].read_text())["before"]

    resumed = subprocess.run(
        _rlgym(f"resume={out}"), capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": "0"}
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"step_{step:06d}" in resumed.stderr and "resuming from" in resumed.stderr
    records = _records(out)
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # continued from the saved step

    # the summary is the whole run's: every step, the held-out measure from its start, its first
    # step's training success, and the warm-up it started with
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == STEPS and summary["resumed_from"] == step
    assert summary["before"] == before and summary["train_success_first"] == records[0]["success"]
    assert summary["sft"] is not None and summary["sft"]["steps"] == 2
    assert f"{STEPS} RL steps (resumed after step {step})" in resumed.stdout
    assert "SFT warm-up: 2 steps" in resumed.stdout


def test_ctrl_c_during_the_warm_up_prints_the_line_and_no_traceback(tmp_path, tiny_model_dir):
    out = tmp_path / "run"
    args = [a for a in ARGS if not a.startswith("sft.steps")] + ["sft.steps=100000"]
    log = tmp_path / "interrupted.log"

    def warming_up() -> bool:
        return log.exists() and "setup: model tiny loaded" in log.read_text()

    rc, printed = _interrupt(_rlgym(f"out_dir={out}", *args), tmp_path, warming_up)
    assert rc == 130, printed[-3000:]
    assert "Traceback" not in printed, printed[-3000:]
    lines = [line for line in printed.splitlines() if f"rlgym train resume={out}" in line]
    assert len(lines) == 1 and "before its first RL step" in lines[0], printed[-3000:]
