"""Each env brings its own settings: configs/env/<env>.yaml (token budget, context, prompt; shared by
`rlgym train` and `rlgym eval`) and configs/env_train/<env>.yaml (warm-up and RL budget). The demo's
choices apply to the demo only: another env inherits none of them."""

import sys

import pytest

from rlgym_llm.config import load_config

DEMO = {"idle_prob": 0.5, "successful_only": False, "episodes": 512, "steps": 200}


def test_the_demo_keeps_its_choices():
    cfg = load_config("train")
    assert cfg.env.id == "toy/Counter-v0" and cfg.credit.method == "turn_grpo"
    assert {k: getattr(cfg.sft, k) for k in DEMO} == DEMO
    assert (cfg.trainer.eval_tasks, cfg.trainer.eval_every, cfg.trainer.eval_temperature) == (96, 5, 1.0)
    assert cfg.policy.sampling.max_tokens == 24 and not cfg.agent.tool_schemas


def test_math_inherits_none_of_the_demo_choices():
    cfg = load_config("train", ["env=math", "credit=grpo", "trainer.steps=3"])
    # Math's own tier (configs/env_train/math.yaml, docs/math_env.md): the re-checking teacher with its
    # failures kept, no idle turns, 600 steps at lr 3e-4 on a cosine
    assert (cfg.sft.idle_prob, cfg.sft.successful_only, cfg.sft.episodes, cfg.sft.steps) == (0.0, False, 256, 600)
    assert (cfg.sft.lr, cfg.sft.lr_schedule) == (3e-4, "cosine")
    assert cfg.env.oracle == "rlgym_agents.math:MathRecheckTeacher"
    assert {k: getattr(cfg.sft, k) for k in DEMO} != DEMO
    assert (cfg.trainer.eval_tasks, cfg.trainer.eval_every, cfg.trainer.eval_temperature) == (64, 10, 1.0)
    assert cfg.policy.sampling.max_tokens == 48
    assert cfg.env.kwargs == {"difficulty": 0, "kinds": ["arithmetic"], "prompt": "short"}


@pytest.mark.parametrize(
    ("env", "max_tokens", "max_context"),
    [
        ("counter", 24, 1024),
        ("math", 48, 1024),
        ("code", 192, 1536),
        ("swe", 256, 2048),
        ("gui", 32, 2048),
        ("search", 40, 2048),
    ],
)
@pytest.mark.parametrize("command", ["train", "eval"])
def test_each_env_sets_its_token_budget_for_every_command(env, max_tokens, max_context, command):
    overrides = [f"env={env}"] + (["sft.enabled=false"] if command == "train" else [])
    cfg = load_config(command, overrides)
    assert (cfg.policy.sampling.max_tokens, cfg.policy.max_context) == (max_tokens, max_context)


def test_an_env_budget_wins_over_the_policy_option_and_an_override_wins_over_both(monkeypatch):
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", sys.executable)  # policy=vllm checks that its venv exists
    assert load_config("train", ["env=code", "policy=vllm", "sft.enabled=false"]).policy.sampling.max_tokens == 192
    assert load_config("train", ["env=code", "policy.sampling.max_tokens=64"]).policy.sampling.max_tokens == 64


def test_plain_eval_is_a_small_smoke_run():
    cfg = load_config("eval")
    assert cfg.env.id == "toy/Counter-v0" and cfg.tasks * cfg.samples == 64 and cfg.ks == [1, 2, 4]
