"""`python benchmarks/learning/paired_report.py <run folders>`: the paired gain over seeds from the runs'
own summaries, with the distinct test tasks stated, and refusals for unfinished or mismatched runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlgym_llm.eval import paired_seed_comparison

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "learning" / "paired_report.py"


def _run_folder(
    root: Path,
    seed: int,
    before: float,
    after: float,
    tasks: int = 30,
    after_tasks: int | None = None,
    outcomes: tuple[dict, dict] | None = None,
):
    folder = root / f"s{seed}"
    folder.mkdir()
    (folder / "config.yaml").write_text(f"seed: {seed}\nout_dir: {folder}\n")
    measure = {"tasks": tasks, "episodes": 32, "failed": 0.0, "voided": 0}
    per_task = ({"outcomes": outcomes[0]}, {"outcomes": outcomes[1]}) if outcomes else ({}, {})
    summary = {
        "before": {"success": before, **measure, **per_task[0]},
        "after": {"success": after, **measure, "tasks": after_tasks or tasks, **per_task[1]},
        "sft": {"episodes": 64, "steps": 12, "loss_first": 1.9, "loss_last": 0.02},
        "train_success_first": 0.8,
        "train_success_last": 0.75,
        "total_wall_s": 100.0,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def _report(folders, out):
    cmd = [
        sys.executable,
        str(SCRIPT),
        *map(str, folders),
        "--title",
        "T",
        "--command",
        "rlgym train",
        "--out",
        str(out),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)


def test_the_gain_is_paired_by_seed_and_states_the_distinct_tasks(tmp_path):
    pairs = [(0.5, 0.7), (0.6, 0.7), (0.4, 0.65), (0.55, 0.6)]
    folders = [_run_folder(tmp_path, s, b, a) for s, (b, a) in enumerate(pairs)]
    done = _report(folders, tmp_path / "out" / "r")
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "out" / "r.json").read_text())
    expected = paired_seed_comparison([a for _, a in pairs], [b for b, _ in pairs])
    assert data["paired"]["diff"] == pytest.approx(expected.diff)
    assert data["paired"]["t_low"] == pytest.approx(expected.t_low)
    assert data["gain"] == (expected.low > 0 and expected.t_low > 0)
    assert [r["seed"] for r in data["runs"]] == ["0", "1", "2", "3"]
    md = (tmp_path / "out" / "r.md").read_text()
    assert "| 2 | 0.400 | 0.650 | +0.250 | 30 | 32 |" in md
    assert "test pool" in md


def test_a_negative_gain_is_reported_as_no_gain(tmp_path):
    folders = [_run_folder(tmp_path, s, 0.7, 0.6 - 0.01 * s) for s in range(3)]
    done = _report(folders, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["gain"] is False
    assert "No significant gain" in (tmp_path / "r.md").read_text()


def test_unfinished_or_mismatched_runs_are_refused(tmp_path):
    unfinished = tmp_path / "s9"
    unfinished.mkdir()
    done = _report([unfinished], tmp_path / "r")
    assert done.returncode != 0 and "no summary.json" in done.stderr
    mismatched = _run_folder(tmp_path, 1, 0.5, 0.6, tasks=30, after_tasks=31)
    done = _report([mismatched], tmp_path / "r")
    assert done.returncode != 0 and "different task sets" in done.stderr


def _load_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("paired_report", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_task_unit_interval_by_hand_and_by_a_plain_loop():
    import numpy as np

    interval = _load_script().task_unit_interval
    # 2 runs x 3 tasks; task "b" has two episodes (one cell: their mean)
    runs = [
        ({"a": [0], "b": [0, 1], "c": [1]}, {"a": [1], "b": [1, 1], "c": [1]}),  # cells +1, +0.5, 0
        ({"a": [1], "b": [0, 0], "c": [0]}, {"a": [1], "b": [1, 0], "c": [1]}),  # cells 0, +0.5, +1
    ]
    got = interval(runs, n_boot=500, seed=3)
    assert got["diff"] == pytest.approx(3 / 6) and (got["runs"], got["tasks"]) == (2, 3)
    cells = np.array([[1.0, 0.5, 0.0], [0.0, 0.5, 1.0]])  # rows: runs, columns: tasks a, b, c
    rng, means = np.random.default_rng(3), []
    for _ in range(500):  # the same draws, one resample at a time
        rows, cols = rng.integers(0, 2, 2), rng.integers(0, 3, 3)
        means.append(sum(cells[r, c] for r in rows for c in cols) / 6)
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.percentile(means, [2.5, 97.5])))
    assert got["low"] < 0.5 < got["high"]
    same = interval([({"a": [0], "b": [0]}, {"a": [1], "b": [1]})] * 3, n_boot=200)
    assert same["low"] == same["high"] == same["diff"] == 1.0  # no variation: a point
    with pytest.raises(ValueError, match="different test tasks"):
        interval([({"a": [0]}, {"a": [1]}), ({"z": [0]}, {"z": [1]})])


def test_the_report_takes_the_task_as_the_unit_where_runs_kept_outcomes(tmp_path):
    # every run gains on task "a" and loses on "b": the seeds agree, but the tasks disagree, so the
    # interval over tasks is wide while the one over seeds (the same mix in every run) is a point
    outcomes = ({"a": [0, 0], "b": [1, 1]}, {"a": [1, 1], "b": [1, 0]})
    folders = [_run_folder(tmp_path, s, 0.5, 0.75, tasks=2, outcomes=outcomes) for s in range(4)]
    done = _report(folders, tmp_path / "r")
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    unit = data["task_unit"]
    assert unit["diff"] == pytest.approx(0.25) and (unit["runs"], unit["tasks"]) == (4, 2)
    assert unit["low"] == pytest.approx(-0.5) and unit["high"] == pytest.approx(1.0)
    assert "outcomes" not in data["runs"][0]
    assert "Task as the unit (2 distinct test tasks x 4 runs" in (tmp_path / "r.md").read_text()


def test_runs_without_outcomes_say_the_task_unit_interval_is_not_computed(tmp_path):
    folders = [_run_folder(tmp_path, s, 0.5, 0.6) for s in range(3)]
    assert _report(folders, tmp_path / "r").returncode == 0
    assert json.loads((tmp_path / "r.json").read_text())["task_unit"] is None
    assert "Task as the unit: not computed" in (tmp_path / "r.md").read_text()
