"""Each env brings its own settings: configs/env/<env>.yaml (token budget, context, prompt; shared by
`rlgym train` and `rlgym eval`) and configs/env_train/<env>.yaml (warm-up and RL budget). The demo's
choices (Math-v0's) apply to Math only: another env inherits none of them."""

import sys

import pytest

from rlgym_llm.config import load_config

DEMO = {"idle_prob": 0.0, "successful_only": True, "episodes": 1024, "steps": 700}


def test_the_demo_keeps_its_choices():
    cfg = load_config("train")
    # the main job (configs/env_train/math.yaml, docs/math_env.md): the oracle's successful episodes from
    # the train pool, 700 steps at lr 3e-4 on a cosine; test-pool success before and after RL
    assert cfg.env.id == "rlgym/Math-v0" and cfg.credit.method == "turn_grpo"
    assert {k: getattr(cfg.sft, k) for k in DEMO} == DEMO
    assert (cfg.sft.lr, cfg.sft.lr_schedule) == (3e-4, "cosine")
    assert cfg.env.oracle == "rlgym_agents.math:MathOracleAgent"
    assert (cfg.trainer.eval_tasks, cfg.trainer.eval_every, cfg.trainer.eval_temperature) == (200, 0, 1.0)
    assert (cfg.trainer.tasks_per_step, cfg.trainer.group_size, cfg.trainer.optim.lr) == (16, 4, 5e-5)
    assert cfg.policy.sampling.max_tokens == 48 and not cfg.agent.tool_schemas
    assert cfg.env.kwargs == {"difficulty": 0, "kinds": ["arithmetic"], "prompt": "short"}


def test_counter_inherits_none_of_the_demo_choices():
    cfg = load_config("train", ["env=counter", "credit=grpo", "trainer.steps=3"])
    assert (cfg.sft.idle_prob, cfg.sft.successful_only, cfg.sft.episodes, cfg.sft.steps) == (0.0, True, 512, 200)
    assert {k: getattr(cfg.sft, k) for k in DEMO} != DEMO
    assert (cfg.trainer.eval_tasks, cfg.trainer.eval_every, cfg.trainer.eval_temperature) == (96, 5, 1.0)
    assert cfg.policy.sampling.max_tokens == 24
    assert cfg.env.id == "toy/Counter-v0" and cfg.env.oracle == "rlgym_llm.testing.toy:CounterPlayer"


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
    assert cfg.env.id == "rlgym/Math-v0" and cfg.tasks * cfg.samples == 64 and cfg.ks == [1, 2, 4]
