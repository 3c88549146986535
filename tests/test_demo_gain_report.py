"""`python benchmarks/learning/demo_gain.py`: the seeds' paired report, the alone timing (`--alone`) that
the 10 min / 2 GB targets are about, and kept figures that survive the run folders only for the same config."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def bench(tmp_path, monkeypatch, load_benchmark):
    module = load_benchmark("demo_gain")
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(module, "ROOT", tmp_path)
    return module


def _finish(path: Path, steps: int, before: list[int], after: list[int]) -> None:
    """A finished run folder: `steps` step records and a summary with per-task outcomes."""
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1}) + "\n" for i in range(steps)))

    def measure(hits):
        outcomes = {f"task{i}": [h] for i, h in enumerate(hits)}
        return {"success": sum(hits) / len(hits), "tasks": len(hits), "episodes": len(hits), "outcomes": outcomes}

    (path / "summary.json").write_text(
        json.dumps({"before": measure(before), "after": measure(after), "total_wall_s": 900.0})
    )


def test_the_report_pairs_seeds_and_states_the_alone_timing(bench):
    steps = bench.steps(False)
    for seed, (b, a) in enumerate(
        [([0, 0, 1, 0], [1, 0, 1, 1]), ([1, 0, 0, 0], [1, 1, 0, 0]), ([0, 1, 0, 0], [1, 1, 0, 1])]
    ):
        _finish(bench.folder(False) / f"s{seed}", steps, b, a)
        bench.folder(False).joinpath(f"s{seed}.log").write_text("peak_rss_kb=2097152\n")
    text = bench.write(False, bench.collect(False, [0, 1, 2]), "CMD").read_text()
    assert "| 0 | 0.250 | 0.750 | +0.500 | 4 | 4 | 900 | 2048 |" in text
    assert "Paired over 3 seeds" in text and "two-way bootstrap over 3 seeds and 4 tasks" in text
    assert "not timed yet" in text  # no alone run: said, not invented

    alone = bench.folder(False) / "alone"
    _finish(alone, steps, [0, 1, 0, 0], [1, 1, 0, 0])
    alone.with_suffix(".log").write_text("$ cmd\n...\npeak_rss_kb=1862348\nelapsed_s=507.16\n")
    text = bench.write(False, bench.collect(False, [0, 1, 2]), "CMD").read_text()
    assert "**507 s wall** (8.5 min; target 600 s: met), **peak RSS 1,819 MiB** (1.91 GB; target 2 GB: met)" in text
    assert "0.250 -> 0.500 on 4 distinct test tasks" in text

    # over the targets: said so
    alone.with_suffix(".log").write_text("peak_rss_kb=2200000\nelapsed_s=640\n")
    text = bench.write(False, bench.collect(False, [0, 1, 2]), "CMD").read_text()
    assert "target 600 s: missed" in text and "target 2 GB: missed" in text


def test_kept_figures_outlive_the_run_folders_for_the_same_config_only(bench, monkeypatch):
    import shutil

    steps = bench.steps(False)
    for seed in (0, 1):
        _finish(bench.folder(False) / f"s{seed}", steps, [0, 0, 1, 0], [1, 0, 1, 1])
    alone = bench.folder(False) / "alone"
    _finish(alone, steps, [0, 1, 0, 0], [1, 1, 0, 0])
    alone.with_suffix(".log").write_text("peak_rss_kb=1862348\nelapsed_s=507.16\n")
    first = bench.write(False, bench.collect(False, [0, 1]), "CMD").read_text()
    shutil.rmtree(bench.folder(False))  # a new machine: the run folders are gone, the JSON is kept
    again = bench.write(False, bench.collect(False, [0, 1]), "CMD").read_text()
    drop_date = lambda t: [line for line in t.splitlines() if not line.startswith("Command:")]  # noqa: E731
    assert drop_date(again) == drop_date(first)  # the same table, intervals and timing
    # the config changed (another RL budget): the kept runs are not these runs
    monkeypatch.setattr(bench, "overrides", lambda quick: [bench.PRESET, "trainer.steps=3"])
    assert bench.collect(False, [0, 1]) == [] and bench.stored_results(False) == {}
    assert "not timed yet" in bench.write(False, [], "CMD").read_text()
