"""The learnable tiers of Math-v0, Search-v0 and GUI-v0 (`rlgym train env=math|search|gui`): their configs compose,
their warm-ups clone the oracle (an honest start: no teacher built to fail, issue 31), whose
demonstrations succeed, and each trains end to end through `rlgym train` (a tiny warm-up, one RL step). Calibration: docs/math_env.md, docs/search_env.md,
docs/gui_env.md; that the shipped warm-up leaves GRPO groups with both outcomes is checked by
`python benchmarks/learning/env_gain.py <env> --check-updates`."""

import json

import numpy as np
import pytest

from rlgym_llm.config import load_config

TIERS = {
    "math": ("rlgym/Math-v0", {"difficulty": 0, "kinds": ["arithmetic"], "prompt": "short"}, 3, 0.0),
    "search": ("rlgym/Search-v0", {"world_people": 4, "max_hops": 1, "snippet_chars": 40}, 4, 0.0),
    "gui": ("rlgym/GUI-v0", {"task_apps": ["settings"], "max_subgoals": 1}, 5, 0.0),
}
# the oracle's success on 64 train-pool tasks: every demonstration it gives succeeds (or nearly)
TEACHER_SUCCESS = {"math": (0.99, 1.01), "search": (0.9, 1.01), "gui": (0.9, 1.01)}


@pytest.mark.parametrize("env", list(TIERS))
def test_the_env_train_config_composes_with_the_tier(env):
    env_id, kwargs, max_turns, idle = TIERS[env]
    cfg = load_config("train", [f"env={env}", "credit=grpo"])
    assert (cfg.env.id, cfg.env.kwargs, cfg.env.max_turns) == (env_id, kwargs, max_turns)
    assert (cfg.sft.idle_prob, cfg.sft.successful_only) == (idle, True)  # the oracle's successes only
    assert "Teacher" not in str(cfg.env.oracle)
    assert cfg.trainer.eval_temperature == 1.0 and not cfg.agent.tool_schemas
    # eval uses the same tier (configs/env/), without the training budget (configs/env_train/)
    ev = load_config("eval", [f"env={env}"])
    assert (ev.env.kwargs, ev.env.max_turns) == (kwargs, max_turns)


@pytest.mark.parametrize("env", list(TIERS))
def test_the_oracle_demonstrations_succeed_and_fit_the_context(env):
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
    low, high = TEACHER_SUCCESS[env]
    assert len(trajs) == 64 and low < success < high, success
    # short enough for the tiny model's context, with room to spare
    assert max(len(t.token_ids) for t in trajs) < cfg.policy.max_context


LEARNABLE = list(TIERS)


@pytest.mark.slow  # ~15 s each: the model's start, oracle episodes, an untrained policy's rollouts
@pytest.mark.parametrize("env", LEARNABLE)
def test_the_tier_trains_end_to_end_from_a_tiny_warm_up(env, tmp_path):
    """The tier's whole config (configs/env/ and configs/env_train/: its teacher, its warm-up settings)
    through `rlgym train`, with the warm-up and the RL batch cut to a smoke's size. Whether the shipped
    warm-up leaves GRPO something to update is a calibration check of the benchmark:
    `python benchmarks/learning/env_gain.py <env> --check-updates`."""
    pytest.importorskip("torch")
    from rlgym_llm.cli.main import main

    out = tmp_path / "run"
    warm_up = ["sft.steps=2", "sft.episodes=4", "sft.batch_size=4"]
    rl = ["trainer.steps=1", "trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0"]
    rest = ["trainer.save_every=0", "progress=false", "trainer.threads=2", f"out_dir={out}"]
    assert main(["train", f"env={env}", "credit=grpo", *warm_up, *rl, *rest]) == 0
    assert json.loads((out / "sft_model" / "warm_up.json").read_text())["steps"] == 2
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["trajectories"] == 4
