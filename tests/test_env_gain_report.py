"""`python benchmarks/learning/env_gain.py <env> --report` keeps every finished seed's numbers in
gain_<env>.json, regenerates the table from them without the run folders, and gives GRPO's gain a
verdict only with the seeds the issue asks for."""

import json
from pathlib import Path

import pytest

from rlgym_llm.eval import paired_seed_comparison

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def gain(tmp_path, monkeypatch, load_benchmark):
    module = load_benchmark("env_gain")
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(module, "RUNS", tmp_path / "no_runs")  # only what the result file stores
    return module


def _runs(n, gains):
    return [
        {
            "seed": s,
            "before": 0.25,
            "after": 0.25 + gains[s],
            "curve": [[4, 0.25 + gains[s]]],
            "train_success": [0.3, 0.4],
            "updates": 2,
            "steps": 4,
            "wall_s": 100.0,
            "cpu_s": 40.0,
        }
        for s in range(n)
    ]


def test_the_stored_seeds_regenerate_the_report_and_the_verdict_waits_for_five_seeds(gain):
    runs = _runs(3, [0.2, 0.25, 0.3])
    text = gain.write("search", runs, "python benchmarks/learning/env_gain.py search --steps 4", steps=4).read_text()
    assert "3 of 5 seeds, not enough for a verdict" in text and "raises" not in text
    # the run folders are gone: the stored seeds come back as they were, and only for the same budget
    assert gain.collect("search", [0, 1, 2, 3, 4], steps=4) == runs
    assert gain.collect("search", [0, 1, 2, 3, 4], steps=2) == []
    five = _runs(5, [0.2, 0.25, 0.3, 0.22, 0.28])
    text = gain.write("search", five, "python benchmarks/learning/env_gain.py search --steps 4", steps=4).read_text()
    want = paired_seed_comparison([r["after"] for r in five], [r["before"] for r in five])
    assert f"GRPO's held-out gain over 5 seeds: {want.diff:+.3f}" in text
    assert want.verdict("after RL", "before RL") in text and "not enough" not in text
    assert "CPU (user + system): 200 s over 5 runs" in text
    stored = json.loads((gain.RESULTS / "gain_search.json").read_text())
    assert stored["steps"] == 4 and stored["overrides"] == ["trainer.steps=4", "trainer.eval_every=4"]


def test_a_preset_setup_runs_its_experiment_and_the_report_gives_the_time_per_step(gain):
    cmd = gain.train_cmd("smollm2_math", 1)
    assert cmd[:4] == ["rlgym", "train", "+experiment=smollm2_math", "credit=grpo"]
    assert "trainer.threads=2" in cmd and "trainer.threads=2" in gain.sft_cmd("smollm2_math")
    assert "trainer.threads=1" in gain.train_cmd("math", 1)  # the tiny model's runs: one thread each
    runs = [{**r, "step_wall_s": 60.0 + s, "step_cpu_s": 80.0} for s, r in enumerate(_runs(3, [0.4, 0.5, 0.3]))]
    text = gain.write("smollm2_math", runs, "python benchmarks/learning/env_gain.py smollm2_math", steps=4).read_text()
    assert "model `smollm2`" in text and "`configs/experiment/smollm2_math.yaml`" in text
    assert "| 60, 80 |" in text and "mean over 3 runs: 61 s wall, 80 s CPU" in text
    assert "[docs/math_env.md]" in text
    # runs stored before the step times were kept still report, with a dash
    assert "| - |" in gain.write("search", _runs(2, [0.1, 0.2]), "cmd", steps=4).read_text()


def test_the_task_unit_interval_comes_with_the_per_task_outcomes(gain):
    from rlgym_llm.eval import run_task_bootstrap, task_outcome_cells

    runs = _runs(3, [0.2, 0.25, 0.3])
    text = gain.write("math", runs, "cmd", steps=4).read_text()
    assert "No task-unit interval: some runs were stored before their per-task outcomes were kept." in text
    tasks = [f"q{i}" for i in range(4)]
    for r, wins in zip(runs, ([0, 1, 1, 1], [1, 1, 0, 1], [1, 1, 1, 1]), strict=True):
        r["outcomes"] = [{t: [0] for t in tasks}, {t: [w] for t, w in zip(tasks, wins, strict=True)}]
    text = gain.write("math", runs, "cmd", steps=4).read_text()
    ci = run_task_bootstrap(task_outcome_cells([(after, before) for before, after in (r["outcomes"] for r in runs)]))
    assert (
        f"two-way bootstrap over 3 seeds and 4 tasks, which also covers the draw of the test tasks): {ci.point:+.3f}"
        in text
    )
    assert f"[{ci.low:+.3f}, {ci.high:+.3f}]" in text
