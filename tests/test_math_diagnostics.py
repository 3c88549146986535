"""The main job's diagnostics run: `benchmarks/learning/grpo_probe.py` (two probed GRPO updates) and
`benchmarks/learning/tail_mass.py` (the vocabulary tail's share of the failures), from a tiny warm-up."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "learning"


@pytest.fixture(scope="module")
def warm_up(tmp_path_factory):
    pytest.importorskip("torch")
    from rlgym_llm.cli.main import main

    out = tmp_path_factory.mktemp("warm")
    assert main(["sft", "sft.steps=4", "sft.episodes=8", "sft.batch_size=4", "progress=false", f"out_dir={out}"]) == 0
    return out / "sft_model"


@pytest.mark.slow  # ~40 s: 2 RL steps of 2x2 episodes, the probe's oracle episodes
def test_the_probe_reports_every_update(warm_up, tmp_path):
    out = tmp_path / "probe.jsonl"
    cmd = [
        sys.executable,
        str(BENCH / "grpo_probe.py"),
        f"sft.init={warm_up}",
        "trainer.steps=2",
        "trainer.tasks_per_step=2",
        "trainer.group_size=2",
        "trainer.eval_tasks=0",
        "trainer.filter_zero_variance=false",
        "trainer.save_every=0",
        "progress=false",
        "trainer.threads=1",
        f"out_dir={tmp_path / 'run'}",
        "--probe-tasks",
        "4",
        "--out",
        str(out),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT, timeout=240)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["update"] for r in records] == [1, 2]
    for r in records:
        assert r["before_oracle_logp"] < 0 and -1 <= r["sgd_align"] <= 1 and -1 <= r["adam_align"] <= 1
        assert r["step_norm"] > 0 or r["grad_norm"] == 0  # a batch with any advantage moves the weights
        assert sum(n for n, _ in r["kinds"].values()) == 4  # every episode of the batch classified


def test_the_probe_needs_a_start():
    done = subprocess.run(
        [sys.executable, str(BENCH / "grpo_probe.py"), "trainer.steps=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "needs sft.init" in done.stderr


@pytest.mark.slow  # ~20 s: 8 sampled episodes, 4 oracle episodes
def test_tail_mass_counts_every_episode_and_the_tail(warm_up, tmp_path):
    from rlgym_llm.cli.main import main

    ev = tmp_path / "eval"
    assert (
        main(
            [
                "eval",
                f"checkpoint={warm_up}",
                "tasks=4",
                "samples=2",
                "ks=[1]",
                "progress=false",
                "threads=1",
                "policy.sampling.temperature=1.0",
                f"out_dir={ev}",
            ]
        )
        == 0
    )
    out = tmp_path / "tail.json"
    subprocess.run(
        [
            sys.executable,
            str(BENCH / "tail_mass.py"),
            str(warm_up),
            str(ev / "trajectories.jsonl"),
            "--tasks",
            "4",
            "--out",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        timeout=240,
    )
    r = json.loads(out.read_text())
    assert sum(k["episodes"] for k in r["sampled"]["by_kind"].values()) == 8
    assert all(0 <= k["with_rare_token"] <= k["episodes"] for k in r["sampled"]["by_kind"].values())
    assert 0 < r["oracle_tokens"] < r["vocab"]
    # a 4-step warm-up is nearly uniform: most of its mass is on tokens the oracle never emits
    assert r["tail"]["1.0"]["mean_per_position"] > 0.5
    assert all(0 <= t["p_episode_without"] <= 1 for t in r["tail"].values())
