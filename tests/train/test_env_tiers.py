"""The learnable tiers of Math-v0, Search-v0 and GUI-v0 (`rlgym train env=math|search|gui`): their configs compose,
their noisy teachers fail at the share they were calibrated to, and (slow) a short run from the shipped
warm-up gets groups with both outcomes, so GRPO updates. Calibration: docs/math_env.md,
docs/search_env.md, docs/gui_env.md."""

import json

import numpy as np
import pytest

from rlgym_llm.config import load_config

TIERS = {
    # Math's teacher re-checks instead of submitting (rlgym_agents.math:MathRecheckTeacher), no idle
    # turns: they kept the tiny model from learning to copy digits (docs/math_env.md)
    "math": ("rlgym/Math-v0", {"difficulty": 0, "kinds": ["arithmetic"], "prompt": "short"}, 3, 0.0),
    "search": ("rlgym/Search-v0", {"world_people": 4, "max_hops": 1, "snippet_chars": 40}, 4, 0.25),
    "gui": ("rlgym/GUI-v0", {"task_apps": ["settings"], "max_subgoals": 1}, 5, 0.2),
}
# the teacher's success on 64 generated tasks: Search's and GUI's mostly succeed; Math's re-checks on
# 70 % of its episodes, so its clone starts near 0.3 once it copies the digits (docs/math_env.md)
TEACHER_SUCCESS = {"math": (0.2, 0.45), "search": (0.5, 0.95), "gui": (0.5, 0.95)}


@pytest.mark.parametrize("env", list(TIERS))
def test_the_env_train_config_composes_with_the_tier(env):
    env_id, kwargs, max_turns, idle = TIERS[env]
    cfg = load_config("train", [f"env={env}", "credit=grpo"])
    assert (cfg.env.id, cfg.env.kwargs, cfg.env.max_turns) == (env_id, kwargs, max_turns)
    assert (cfg.sft.idle_prob, cfg.sft.successful_only) == (idle, False)  # the teacher's failures are kept
    assert cfg.trainer.eval_temperature == 1.0 and cfg.trainer.eval_every > 0 and not cfg.agent.tool_schemas
    # eval uses the same tier (configs/env/), without the training budget (configs/env_train/)
    ev = load_config("eval", [f"env={env}"])
    assert (ev.env.kwargs, ev.env.max_turns) == (kwargs, max_turns)


@pytest.mark.parametrize("env", list(TIERS))
def test_the_noisy_teacher_succeeds_at_its_calibrated_share_and_otherwise_runs_out_of_turns(env):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from rlgym_llm.recipes import parts
    from rlgym_llm.rollout.tiny_model import build_tiny_model
    from rlgym_llm.train.sft import oracle_trajectories

    cfg = load_config("train", [f"env={env}"])
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model())
    trajs = oracle_trajectories(
        parts.env_factory(cfg.env, cfg.sandbox),
        parts.build_agent(cfg.agent, tokenizer),
        tokenizer,
        parts.oracle_factory(cfg.env.oracle),
        range(64),
        cfg.env.max_turns,
        idle_prob=cfg.sft.idle_prob,
        successful_only=False,
    )
    success = np.mean([t.reward > 0 for t in trajs])
    # idle turns (Search, GUI) or re-checks (Math) run out of turns
    low, high = TEACHER_SUCCESS[env]
    assert len(trajs) == 64 and low < success < high, success
    # short enough for the tiny model's context, with room to spare
    assert max(len(t.token_ids) for t in trajs) < cfg.policy.max_context


LEARNABLE = list(TIERS)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("env", LEARNABLE)
def test_a_short_grpo_run_on_the_tier_updates(env, tmp_path):
    pytest.importorskip("torch")
    from rlgym_llm.cli.main import main

    out = tmp_path / "run"
    # the shipped warm-up (configs/env_train/<env>.yaml), then two RL steps of 4 tasks x 8 samples
    argv = ["train", f"env={env}", "credit=grpo", "trainer.steps=2", "trainer.eval_tasks=0", "progress=false"]
    assert main([*argv, "trainer.threads=2", f"out_dir={out}"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"]["done"] >= 1, summary["updates"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any(0 < r["success"] < 1 for r in records)
