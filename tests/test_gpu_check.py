"""benchmarks/gpu/check.py, the GPU check of issue 33, runs on a machine without a GPU: the FSDP
part on the CPU (tiny model, fp32), the vLLM part skipped with a line that says why."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check runs its GPU parts (minutes)")
def test_the_gpu_check_runs_on_the_cpu_and_says_what_it_skipped(tmp_path):
    out = tmp_path / "check.md"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "check.py"), "--out", str(out), "--steps", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vllm: SKIPPED: no GPU" in done.stdout
    results = json.loads(out.with_suffix(".json").read_text())
    fsdp = results["fsdp"]
    assert fsdp["status"] == "ok" and fsdp["device"] == "cpu" and fsdp["mixed_precision"] is False
    losses = [r["loss"] for r in fsdp["steps"]]
    assert len(losses) == 2 and losses[0] != losses[1]  # the first update changed the weights
    text = out.read_text()
    assert "SKIPPED the GPU run (no GPU)" in text and "SKIPPED: no GPU" in text
