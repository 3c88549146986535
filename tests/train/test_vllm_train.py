"""`rlgym sft` and `rlgym train` with a vLLM server: the server serves the warm-up's weights.

The SFT warm-up's held-out success is measured on a vLLM server that first serves the base model,
then takes the warm-up's weights in place. A training run started from those weights (`sft.init`)
starts its server on them: its held-out measure before RL (greedy) is the warm-up's, not the base
model's. Then one RL step syncs the update in place.
"""

import json

import pytest

pytest.importorskip("torch")

from rlgym_llm.cli.main import main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# greedy held-out measures (Counter's env_train samples them at temperature 1): the same weights then
# score the same up to near-ties in the last bits of a logit (synced in place vs loaded from disk)
COMMON = [
    "progress=false",
    "policy=vllm",
    "trainer.threads=2",
    "trainer.eval_tasks=24",
    "trainer.eval_temperature=0",
    "trainer.save_every=0",
]
# the toy Counter with one-digit starts (50 (start, target) pairs): a warm-up of 40 steps moves greedy success
WARM_UP = ["env=counter", "env.kwargs.max_start=9", "env.kwargs.max_target=5"]
WARM_UP += ["sft.episodes=128", "sft.steps=40", "sft.idle_prob=0"]


@pytest.mark.timeout(1800)
def test_vllm_runs_serve_the_warm_up_weights(vllm_python, tmp_path, monkeypatch):
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", str(vllm_python))
    sft_out = tmp_path / "sft"
    # a short warm-up on the oracle's own demonstrations (the main job's full 200-step warm-up on the noisy
    # teacher is a benchmark: benchmarks/learning/counter_gain.py): enough to move greedy success
    assert main(["sft", f"out_dir={sft_out}", *COMMON, *WARM_UP]) == 0
    sft = json.loads((sft_out / "sft_summary.json").read_text())
    # measured on the server before and after it took the warm-up's weights
    assert sft["success_after"] - sft["success_before"] >= 0.1, sft  # 0.167 measured (4 of 24 episodes)

    out = tmp_path / "train"
    overrides = [f"out_dir={out}", f"sft.init={sft_out / 'sft_model'}", "trainer.steps=1", "trainer.tasks_per_step=2"]
    overrides += WARM_UP[:3]  # the same env
    assert main(["train", *overrides, "trainer.group_size=4", *COMMON]) == 0
    summary = json.loads((out / "summary.json").read_text())
    # the same greedy measure on the same weights and tasks (one task's worth of slack)
    assert summary["before"]["success"] == pytest.approx(sft["success_after"], abs=1 / 24 + 1e-9), (summary, sft)
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["time_sync_s"] < 30  # in place, not a restart (70-90 s loaded)
