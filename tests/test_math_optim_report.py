"""`python benchmarks/learning/math_optim_study.py --report`: one row per variant, each variant's gain
compared with the default's seed by seed, and variants without runs listed as such."""

from pathlib import Path

import pytest

from rlgym_llm.eval import paired_seed_comparison

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def study(tmp_path, monkeypatch, load_benchmark):
    module = load_benchmark("math_optim_study")
    monkeypatch.setattr(module, "RESULTS", tmp_path / "results")
    return module


def _run(seed, before, after):
    return {
        "seed": seed,
        "before": before,
        "after": after,
        "train_first3": 0.4,
        "train_last3": 0.3,
        "entropy_first": 0.04,
        "entropy_last": 0.05,
        "grad_norm_max": 1.5,
        "cpu_s": 60.0,
    }


def test_variants_are_compared_with_the_default_seed_by_seed(study):
    results = {
        "default": [_run(0, 0.5, 0.4), _run(1, 0.4, 0.35), _run(2, 0.45, 0.45)],
        "lr1e-5": [_run(0, 0.5, 0.5), _run(1, 0.4, 0.42), _run(2, 0.45, 0.44)],
    }
    text = study.write(results, "python benchmarks/learning/math_optim_study.py").read_text()
    want = paired_seed_comparison([0.0, 0.02, -0.01], [-0.1, -0.05, 0.0])
    row = next(line for line in text.splitlines() if line.startswith("| lr1e-5 |"))
    assert f"{want.diff:+.3f} [{want.t_low:+.3f}, {want.t_high:+.3f}]" in row
    assert "+0.000 +0.020 -0.010" in row and "| 3 |" in row
    assert next(line for line in text.splitlines() if line.startswith("| kl0.1 |")).count("| 0 |") == 1
    # every variant's command is the shipped command plus its overrides
    cmd = study.train_cmd("tasks24", 1)
    assert cmd[:5] == ["rlgym", "train", "env=math", "credit=grpo", "seed=1"] and "trainer.tasks_per_step=24" in cmd


def _write_run(path, steps, before=0.5, after=0.6):
    import json

    path.mkdir(parents=True)
    record = {"success": 0.4, "entropy": 0.04, "grad_norm": 1.0}
    (path / "metrics.jsonl").write_text("".join(json.dumps({"step": i + 1, **record}) + "\n" for i in range(steps)))
    (path / "summary.json").write_text(json.dumps({"before": {"success": before}, "after": {"success": after}}))


def test_a_variant_with_more_steps_counts_only_once_its_own_steps_are_done(study, tmp_path, monkeypatch):
    monkeypatch.setattr(study, "RUNS", tmp_path / "runs")
    assert study.steps_of("default") == study.STEPS and study.steps_of("long_lr3e-5") == 50
    cmd = study.train_cmd("long_lr3e-5", 0)
    assert "trainer.steps=50" in cmd and "trainer.optim.lr=3e-5" in cmd
    # a default-length run of the long variant (e.g. stopped and summarised early) is not a result
    _write_run(study.run_dir("long_lr3e-5", 0), study.STEPS)
    _write_run(study.run_dir("default", 0), study.STEPS)
    results = study.collect()
    assert "long_lr3e-5" not in results and [r["seed"] for r in results["default"]] == [0]
    _write_run(study.run_dir("long_lr3e-5", 1), 50, before=0.5, after=0.25)
    (long,) = study.collect()["long_lr3e-5"]
    assert long["seed"] == 1 and long["after"] - long["before"] == -0.25


def test_the_study_keeps_the_oracle_clone_tier_it_measured(study):
    from rlgym_llm.config import load_config

    # the tier shipped until 2026-11-28, whatever configs/env_train/math.yaml says now
    warm_up = load_config("train", study.sft_cmd()[2:])
    assert (warm_up.env.oracle, warm_up.sft.successful_only) == ("rlgym_agents.math:MathOracleAgent", True)
    assert (warm_up.sft.steps, warm_up.sft.lr, warm_up.sft.lr_schedule) == (1500, 3e-3, "cosine")
    assert warm_up.out_dir == str(study.SFT)
    for name, steps in (("default", 10), ("long_lr3e-5", 50)):
        cmd = study.train_cmd(name, 0)
        assert sum(o.startswith("trainer.steps=") for o in cmd) == 1  # one value per key
        cfg = load_config("train", cmd[2:])
        assert cfg.env.oracle == "rlgym_agents.math:MathOracleAgent" and cfg.trainer.steps == steps
        assert cfg.sft.init == str(study.SFT / "sft_model")
