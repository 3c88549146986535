"""`python benchmarks/learning/run.py report` regenerates the learning report from the per-run results
stored in learning.json, with seed-level statistics, and gives no verdict where a method is GRPO."""

import dataclasses
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from rlgym_llm.eval import paired_seed_comparison

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def bench(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("learning_run", ROOT / "benchmarks" / "learning" / "run.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "learning_run", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    results = tmp_path / "results"
    results.mkdir()
    # the stored grid (archived: measured on training content, before the content splits); the report
    # code is what is tested, so any stored learning.json with per-run results serves
    stored = ROOT / "benchmarks" / "results" / "learning" / "archive" / "learning.json"
    shutil.copy(stored, results / "learning.json")
    # the archived Counter runs cloned the noisy teacher; the report merges stored runs only under the
    # warm-up they were made with, so the spec takes theirs here (the shipped spec clones the oracle)
    archived = json.loads(stored.read_text())["envs"]["counter"]["sft"]
    monkeypatch.setitem(module.ENVS, "counter", dataclasses.replace(module.ENVS["counter"], sft=archived))
    monkeypatch.setattr(module, "RESULTS", results)
    monkeypatch.setattr(module, "RUNS", tmp_path / "no_runs")  # only the stored per-run results
    return module, results


def test_report_regenerates_from_stored_runs_with_seed_level_statistics(bench):
    module, results = bench
    module.write(module.report(["counter"]), "python benchmarks/learning/run.py report")
    out = json.loads((results / "learning.json").read_text())
    methods = out["envs"]["counter"]["methods"]
    grpo = {r["seed"]: np.mean(r["success_per_step"][7:]) for r in methods["grpo"]["runs"]}
    for name in ("turn_grpo", "igpo", "spa", "gigpo"):
        e = methods[name]
        # one number per run (the last half of its training curve), paired with GRPO's run of the same seed
        mine = [np.mean(r["success_per_step"][7:]) for r in e["runs"]]
        want = paired_seed_comparison(mine, [grpo[r["seed"]] for r in e["runs"]])
        got = e["vs_grpo"]["train_end"]
        assert (got["diff"], got["low"], got["high"], got["mdd"]) == pytest.approx(
            (want.diff, want.low, want.high, want.mdd)
        )
        assert got["n"] == 3 and "beats" not in got["verdict"]
    assert methods["gated"]["identical_to_grpo"]  # every seed's run equals GRPO's step for step
    text = (results / "learning.md").read_text()
    assert "counter: gated is identical to GRPO here" in text and "no verdict" in text
    assert "IQM" not in text  # no interval of the old (seeds x steps) bootstrap survives
    # regenerating from the regenerated file gives the same numbers (the per-run results are kept)
    module.write(module.report(["counter"]), "python benchmarks/learning/run.py report")
    again = json.loads((results / "learning.json").read_text())
    assert again["envs"]["counter"]["methods"]["turn_grpo"]["vs_grpo"] == methods["turn_grpo"]["vs_grpo"]


def test_logged_grpo_equality_decides_identity(bench):
    module, _ = bench
    run = {"seed": 0, "success_per_step": [0.5, 0.6], "heldout": [], "grpo_equal_share": [1.0, 1.0]}
    other = {**run, "success_per_step": [0.4, 0.7]}
    assert module.identical_to_grpo([run], [other])  # equal advantages everywhere: GRPO, whatever the curves
    assert module.identical_to_grpo([{**run, "grpo_equal_share": [1.0, 0.5]}], [run]) is None


def test_a_paper_claim_gets_a_verdict_from_paired_held_out_success(bench):
    module, _ = bench

    def runs(end, start=0.3):
        return [
            {"seed": s, "success_per_step": [0.3], "heldout": [[0, start], [8, end + 0.01 * s]], "wall_s": 1.0}
            for s in range(8)
        ]

    better, worse = {"gigpo": runs(0.6), "grpo": runs(0.4)}, {"gigpo": runs(0.05), "grpo": runs(0.4)}
    up = module.claim_verdict(better, "gigpo", "grpo", "step groups help")
    down = module.claim_verdict(worse, "gigpo", "grpo", "step groups help")
    assert (up["verdict"], down["verdict"]) == ("reproduced", "reversed")
    assert up["heldout_end"]["diff"] == pytest.approx(0.2) and up["seeds"] == list(range(8))
    assert (down["gigpo"]["collapse_share"], down["grpo"]["collapse_share"]) == (1.0, 0.0)  # below 0.3 / 2
    noisy = {
        "gigpo": runs(0.4),
        "grpo": [{**r, "heldout": [[0, 0.3], [8, 0.4 + 0.05 * (-1) ** r["seed"]]]} for r in runs(0)],
    }
    assert module.claim_verdict(noisy, "gigpo", "grpo", "x")["verdict"] == "not reproduced"
    assert module.claim_verdict({"gigpo": runs(0.6)[:1], "grpo": runs(0.4)[:1]}, "gigpo", "grpo", "x")[
        "verdict"
    ].startswith("too few paired seeds")


def test_a_claim_with_fewer_seeds_than_the_testbed_asks_gets_intervals_but_no_verdict(bench):
    module, _ = bench
    runs = {
        m: [{"seed": s, "success_per_step": [0.3], "heldout": [[0, 0.3], [8, end]], "wall_s": 1.0} for s in range(3)]
        for m, end in (("gigpo", 0.6), ("grpo", 0.3))
    }
    c = module.claim_verdict(runs, "gigpo", "grpo", "x", needed=8)
    # the difference is clear, but 3 of 8 seeds is not what the testbed asks for
    assert c["verdict"] == "3 of 8 paired seeds: not enough for a verdict"
    assert c["heldout_end"]["n"] == 3 and c["heldout_end"]["diff"] == pytest.approx(0.3)
    assert module.claim_verdict(runs, "gigpo", "grpo", "x", needed=3)["verdict"] == "reproduced"


def test_stored_seeds_and_finished_run_folders_merge_and_other_envs_are_kept(bench, monkeypatch):
    module, results = bench
    stored = json.loads((results / "learning.json").read_text())
    # a report of one env keeps every other env's stored results
    module.write(module.report(["counter"]), "python benchmarks/learning/run.py report --envs counter")
    out = json.loads((results / "learning.json").read_text())
    assert set(stored["envs"]) <= set(out["envs"])
    assert out["envs"]["search"]["methods"].keys() == stored["envs"]["search"]["methods"].keys()
    # a finished run folder adds its seed to the stored ones; a stored seed whose folder is gone stays
    # counter asks for a fourth seed; GRPO's seed 3 has finished in its run folder
    spec = dataclasses.replace(module.ENVS["counter"], seeds=(0, 1, 2, 3))
    monkeypatch.setitem(module.ENVS, "counter", spec)
    folder = module.run_dir("counter", "grpo", 3)
    folder.mkdir(parents=True)
    records = [
        {"step": k + 1, "success": 0.5, "grpo_equal_share": 1.0, "skipped_update": False, "failed": 0}
        | {"trajectories": 48, "zero_variance_share": 0.2}
        for k in range(spec.steps)
    ]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    summary = {"before": {"success": 0.5}, "after": {"success": 0.75}, "total_wall_s": 10.0}
    (folder / "summary.json").write_text(json.dumps(summary))
    folder.with_suffix(".cpu").write_text("12.5")
    merged = module.report(["counter"])["envs"]["counter"]
    assert merged["methods"]["grpo"]["seeds"] == [0, 1, 2, 3] and merged["methods"]["spa"]["seeds"] == [0, 1, 2]
    assert merged["cpu_s"]["runs"] == 12.5 and merged["cpu_s"]["runs_counted"] == 1
    # 3 paired seeds of the 4 asked for: the intervals so far, no verdict
    lines = [v for v in module.verdicts({"envs": {"counter": merged}}) if v.startswith("counter: spa vs GRPO")]
    assert len(lines) == 1 and "over 3 paired seeds (of 4: not enough for a verdict" in lines[0]
    assert "no significant difference" not in lines[0] and "beats" not in lines[0]


def test_the_grid_runs_only_the_named_methods_seed_major(bench, tmp_path, monkeypatch):
    module, _ = bench
    monkeypatch.setattr(module, "RUNS", tmp_path / "runs")
    warm = module.sft_dir("ladder") / "sft_model"
    warm.mkdir(parents=True)
    (warm / "config.json").write_text("{}")  # the warm-up exists: no `rlgym sft` runs
    cells = []
    monkeypatch.setattr(module, "_locked_run", lambda spec, method, seed: cells.append((method, seed)))
    module.grid(["ladder"], jobs=1, methods=["grpo", "gigpo"])
    seeds = module.ENVS["ladder"].seeds
    assert cells == [(m, s) for s in seeds for m in ("grpo", "gigpo")]  # every seed, no spa
    cells.clear()
    module.grid(["ladder"], jobs=1)  # the control: every method
    assert {m for m, _ in cells} == {"grpo", "gigpo", "spa"}


def test_stored_runs_of_another_warm_up_are_not_merged(bench, monkeypatch):
    module, _ = bench
    shipped = dataclasses.replace(module.ENVS["counter"], sft=["sft.episodes=512", "sft.steps=200"])
    monkeypatch.setitem(module.ENVS, "counter", shipped)  # not the archived runs' noisy teacher
    out = module.report(["counter"])
    assert not out["envs"]["counter"]["methods"]  # none of the archived runs counts under it


def test_a_claim_takes_the_task_as_a_unit_where_runs_kept_outcomes(bench):
    """Every seed says the method is better by 0.25, but the gain is one task of four: the seeds
    agree, the tasks do not, so the task-unit interval reaches 0 and the claim is not reproduced.
    The control: the same gain spread over every task is reproduced."""
    module, _ = bench

    def runs(after_by_task, shift=0.0):
        return [
            {
                "seed": s,
                "success_per_step": [0.3],
                "heldout": [[0, 0.3], [8, sum(after_by_task.values()) / 4 + shift * s]],
                "wall_s": 1.0,
                "outcomes_after": {k: [v] for k, v in after_by_task.items()},
            }
            for s in range(8)
        ]

    base = runs({"a": 0, "b": 0, "c": 1, "d": 1}, shift=0.001)
    one_task = module.claim_verdict(
        {"gigpo": runs({"a": 1, "b": 0, "c": 1, "d": 1}, 0.002), "grpo": base}, "gigpo", "grpo", "x"
    )
    assert one_task["heldout_end"]["low"] > 0 and one_task["heldout_end"]["t_low"] > 0  # over seeds: a gain
    by_task = one_task["heldout_end_by_task"]
    assert (by_task["tasks"], by_task["runs"]) == (4, 8) and by_task["point"] == pytest.approx(0.25)
    assert by_task["low"] == 0.0 and one_task["verdict"] == "not reproduced"

    def even(end, outcome, shift):  # the same success on every task
        return [
            {**r, "outcomes_after": {k: outcome for k in "abcd"}}
            for r in runs({"a": end, "b": 0, "c": 0, "d": 0}, shift)
        ]

    spread = module.claim_verdict(
        {"gigpo": even(3.0, [1, 1, 1, 0], 0.002), "grpo": even(2.0, [1, 0], 0.001)}, "gigpo", "grpo", "x"
    )  # held-out 0.75 vs 0.5 on every seed, +0.25 on every task
    assert spread["heldout_end"]["diff"] == pytest.approx(0.25 + 0.0035)
    assert spread["heldout_end_by_task"]["low"] == pytest.approx(0.25) and spread["verdict"] == "reproduced"
    # runs without outcomes keep the seed-unit verdict and say so
    bare = [{k: v for k, v in r.items() if k != "outcomes_after"} for r in base]
    assert module.claim_verdict({"gigpo": bare, "grpo": bare}, "gigpo", "grpo", "x")["heldout_end_by_task"] is None


def test_a_claim_at_the_floor_is_untestable_not_a_negative_result(bench):
    module, _ = bench

    def runs(end, tied):
        return [
            {
                "seed": s,
                "success_per_step": [0.01],
                "heldout": [[0, 0.0], [4, end]],
                "wall_s": 1.0,
                "zero_variance_share": [tied] * 4,
            }
            for s in range(8)
        ]

    floor = module.claim_verdict({"gated": runs(0.0, 0.95), "dra": runs(0.03, 0.95)}, "gated", "dra", "x")
    assert floor["verdict"].startswith("untestable here") and "95% of groups tied" in floor["verdict"]
    # the controls: a measure above the floor, or groups that carry signal, get a verdict as before
    lifted = module.claim_verdict({"gated": runs(0.0, 0.95), "dra": runs(0.2, 0.95)}, "gated", "dra", "x")
    mixed = module.claim_verdict({"gated": runs(0.0, 0.5), "dra": runs(0.03, 0.5)}, "gated", "dra", "x")
    assert not lifted["verdict"].startswith("untestable") and not mixed["verdict"].startswith("untestable")


def test_held_out_points_are_the_test_measures_not_the_val_curve(bench, tmp_path, monkeypatch):
    module, _ = bench
    monkeypatch.setattr(module, "RUNS", tmp_path / "runs")
    spec = module.ENVS["twentyq"]
    folder = module.run_dir("twentyq", "grpo", 0)
    folder.mkdir(parents=True)
    records = [
        {"step": k + 1, "success": 0.5, "skipped_update": False, "failed": 0, "trajectories": 32}
        | {"zero_variance_share": 0.2, "grpo_equal_share": 1.0}
        | ({"eval_success": 0.9} if k + 1 == spec.steps else {})  # the val curve's last point
        for k in range(spec.steps)
    ]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    summary = {"before": {"success": 0.3}, "after": {"success": 0.4}, "total_wall_s": 1.0}
    (folder / "summary.json").write_text(json.dumps(summary))
    run = module._run_from_disk(spec, "grpo", 0)
    assert run["heldout"] == [[0, 0.3], [spec.steps, 0.4]]  # test before and after, as the summary says
    assert run["val_curve"] == [[spec.steps, 0.9]]
    assert module._summaries(run)["heldout_end"] == 0.4
