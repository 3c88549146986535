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


def _run_folder(root: Path, seed: int, before: float, after: float, tasks: int = 30, after_tasks: int | None = None):
    folder = root / f"s{seed}"
    folder.mkdir()
    (folder / "config.yaml").write_text(f"seed: {seed}\nout_dir: {folder}\n")
    measure = {"tasks": tasks, "episodes": 32, "failed": 0.0, "voided": 0}
    summary = {
        "before": {"success": before, **measure},
        "after": {"success": after, **measure, "tasks": after_tasks or tasks},
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
