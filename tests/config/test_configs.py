"""Every shipped config composes and validates; bad configs list every problem with its fix."""

import dataclasses
import sys
from pathlib import Path

import pytest

from rlgym_llm.config import GROUPS, TrainConfig, default_config_dir, group_options, load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit import METHODS

CONFIGS = default_config_dir()


def _options(group: str) -> list[str]:
    return group_options(group) if group == "credit" else sorted(p.stem for p in (CONFIGS / group).glob("*.yaml"))


def test_the_tree_has_one_group_per_room_and_the_documented_options():
    assert {"env", "agent", "policy", "credit", "trainer", "sandbox"} <= {p.name for p in CONFIGS.iterdir()}
    assert {"math", "code", "swe", "search", "gui"} <= set(_options("env"))
    assert set(_options("policy")) == {"hf", "vllm", "openai"}
    assert set(_options("sandbox")) == {"local", "docker"}


def test_the_credit_options_are_the_registry():
    # no yaml copies of the methods: every registered method is an option, with the registry's defaults
    assert set(_options("credit")) == set(METHODS) and not list((CONFIGS / "credit").glob("*.yaml"))
    for name, method in METHODS.items():
        cfg = load_config("train", [f"credit={name}"])
        assert cfg.credit.method == name and cfg.credit.params == dataclasses.asdict(method.params())


def test_the_yaml_files_hold_only_choices():
    # each setting is declared once: a yaml line that restates its dataclass default is a second copy
    import yaml

    for group, schema in GROUPS.items():
        if group == "env":
            continue  # an env option states its env's own settings (Math's happen to be the defaults)
        default = dataclasses.asdict(schema())
        for path in (CONFIGS / group).glob("*.yaml"):
            restated = _restated(yaml.safe_load(path.read_text()) or {}, default)
            assert not restated, f"{path.relative_to(CONFIGS)} restates defaults: {restated}"


def _restated(data: dict, default: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(default.get(key), dict) and value:
            out += _restated(value, default[key], f"{prefix}{key}.")
        elif key in default and value == default[key] and key not in ("id", "backend", "name"):
            out.append(f"{prefix}{key}")
    return out


def test_the_default_config_trains_a_mission_env():
    cfg = load_config("train")  # `rlgym train` with no overrides: the tiny model on Math, not the toy Counter
    assert isinstance(cfg, TrainConfig)
    assert cfg.env.id == "rlgym/Math-v0" and cfg.credit.method == "turn_grpo" and cfg.sft.enabled


def test_the_main_job_is_smollm2_with_lora_from_an_oracle_warm_up():
    """`make demo` (configs/experiment/demo.yaml, issue 31): a mission env, an honest start (the oracle's
    successful episodes, nothing built to fail), and the settings that keep it in 2 GB on a CPU."""
    cfg = load_config("train", ["+experiment=demo"])
    assert (cfg.env.id, cfg.policy.model) == ("rlgym/Math-v0", "smollm2")
    assert cfg.env.oracle == "rlgym_agents.math:MathOracleAgent"
    assert cfg.sft.enabled and cfg.sft.successful_only and cfg.sft.idle_prob == 0.0 and cfg.sft.init is None
    # full fine-tuning's weights, gradients and AdamW moments alone are 2.2 GB: LoRA and micro-batches
    assert cfg.sft.lora and cfg.trainer.lora.enabled
    # micro-batches of one sequence (~1.7 MB of activations per token); a generate call of at most the
    # 32 test episodes: measured at 1.8 GB peak alone (docs/training.md, "Memory and time on the CPU")
    assert cfg.sft.micro_batch_size == 1 and cfg.trainer.micro_batch_size == 1 and cfg.policy.max_batch_size <= 32
    # success before and after on test-pool questions, sampled as RL samples
    assert cfg.trainer.eval_tasks >= 32 and cfg.trainer.eval_temperature == 1.0


@pytest.mark.parametrize(("group", "option"), [(g, o) for g in GROUPS for o in _options(g)], ids=lambda x: str(x))
def test_every_group_option_composes_and_validates(group, option, monkeypatch):
    overrides = [f"{group}={option}"]
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", sys.executable)  # policy=vllm checks that its venv exists
    if group == "policy" and option == "openai":
        with pytest.raises(ConfigError, match="cannot be trained"):
            load_config("train", overrides)
        return
    if option == "remote":  # an env on a server: it needs the server's address
        with pytest.raises(ConfigError, match=r"env\.url=ws://HOST:PORT"):
            load_config("train", overrides)
        overrides += ["env.url=ws://127.0.0.1:8000", "sft.enabled=false"]
    if option == "custom":  # an empty env section: it needs your env
        with pytest.raises(ConfigError, match="name your env"):
            load_config("train", overrides)
        overrides += ["env.entry_point=rlgym_llm.testing.toy:CounterEnv", "sft.enabled=false"]
    cfg = load_config("train", overrides)
    node = getattr(cfg, group)
    assert isinstance(node, GROUPS[group])
    if group == "env" and option != "custom":
        assert node.id.lower().find(option.split("_")[0][:3]) >= 0
    if group == "credit":
        assert node.method == option


def test_an_env_without_an_oracle_needs_sft_switched_off():
    with pytest.raises(ConfigError, match=r"sft\.enabled=false"):
        load_config("train", ["env=swe", "env.oracle=null"])
    assert load_config("train", ["env=swe", "env.oracle=null", "sft.enabled=false"]).env.oracle is None


@pytest.mark.parametrize("name", _options("experiment"))
def test_every_experiment_preset_composes_and_validates(name):
    cfg = load_config("train", [f"+experiment={name}"])
    folder = "main_job" if name == "demo" else name  # runs/demo is `make demo`'s link to its newest run
    assert f"runs/{folder}/" in cfg.out_dir  # a new timestamped folder per run


def test_switching_methods_and_envs_by_config_alone():
    cfg = load_config("train", ["credit=gated", "env=swe", "sft.enabled=false", "credit.params.tau=0.8"])
    assert (cfg.env.id, cfg.credit.method, cfg.credit.params["tau"]) == ("rlgym/SWE-v0", "gated", 0.8)
    assert cfg.env.sandbox_kwarg == "backend"  # SWEEnv(backend=...): see test_env_oracles.py
    cfg = load_config("train", ["env=math", "env.kwargs.difficulty=2", "sandbox=docker"])
    assert cfg.env.kwargs == {"difficulty": 2, "kinds": ["arithmetic"], "prompt": "short"}
    assert cfg.sandbox.backend == "docker"


def test_every_problem_is_reported_at_once_with_its_fix():
    with pytest.raises(ConfigError) as e:
        load_config("train", ["trainer.stepz=3", "trainer.lora.rr=2", "trainer.optim.lr=fast", "trainer.lr=1e-3"])
    assert e.value.problems == [
        "unknown key `trainer.stepz` in override `trainer.stepz=3`: did you mean `trainer.steps`?",
        "unknown key `trainer.lora.rr` in override `trainer.lora.rr=2`: did you mean `trainer.lora.r`?",
        "unknown key `trainer.lr` in override `trainer.lr=1e-3`: did you mean `trainer.optim.lr`?",
        "`trainer.optim.lr` must be float, got 'fast' (str); set `trainer.optim.lr=<float>`",
    ]
    with pytest.raises(ConfigError) as e:
        load_config(
            "train",
            ["trainer.group_size=1", "credit.method=gpro", "policy.sampling.temperature=0", "policy.max_context=16"],
        )
    text = str(e.value)
    assert len(e.value.problems) == 4
    for fix in (
        "(did you mean 'grpo'?)",
        "trainer.group_size=1: group-relative",
        "temperature=1.0",
        "raise max_context",
    ):
        assert fix in text


def test_choices_come_from_literals_and_registries_with_a_suggestion():
    with pytest.raises(ConfigError) as e:
        load_config("train", ["trainer.loss.agg=token-meen", "sandbox.backend=dockr", "agent.token_check=warm"])
    assert e.value.problems == [
        "`agent.token_check=warm` is not one of off, warn, strict (did you mean 'warn'?)",
        "`trainer.loss.agg=token-meen` is not one of token-mean, seq-mean-token-mean, seq-mean-token-sum, "
        "seq-mean-token-sum-norm (did you mean 'token-mean'?)",
        "`sandbox.backend=dockr` is not one of local, docker (did you mean 'docker'?)",
    ]
    with pytest.raises(ConfigError, match=r"unknown option `credit=grop` \(did you mean `credit=grpo`\?\)"):
        load_config("train", ["credit=grop"])
    with pytest.raises(ConfigError, match=r"`credit.params.level=turnn` is not one of episode, turn"):
        load_config("train", ["credit=gated", "credit.params.level=turnn"])


def test_noisy_teacher_and_periodic_eval_settings_are_checked():
    with pytest.raises(ConfigError) as e:
        load_config("train", ["sft.idle_prob=1.0", "trainer.eval_every=-1"])
    assert len(e.value.problems) == 2
    assert "sft.idle_prob must be in [0, 1)" in str(e.value) and "trainer.eval_every must be >= 0" in str(e.value)
    cfg = load_config("train")  # the main job: the oracle's successful episodes (an honest start)
    assert cfg.sft.idle_prob == 0.0 and cfg.sft.successful_only and cfg.trainer.eval_every == 0


def test_unknown_group_option_lists_the_available_ones():
    with pytest.raises(ConfigError, match="options of `credit`: dra, drgrpo, gated, gigpo, grpo"):
        load_config("train", ["credit=ppo"])


def test_schemas_are_in_hydras_config_store():
    from hydra.core.config_store import ConfigStore

    from rlgym_llm.config import register_configs

    register_configs()
    stored = ConfigStore.instance().list("schema")
    assert {f"{g}.yaml" for g in GROUPS} | {"train.yaml", "eval.yaml"} <= set(stored)


def test_a_missing_tree_says_where_to_point(tmp_path: Path):
    with pytest.raises(ConfigError, match="RLGYM_CONFIG_DIR"):
        load_config("train", config_dir=tmp_path)


def test_a_yaml_preset_beside_the_registry_options(tmp_path: Path):
    import shutil

    tree = tmp_path / "configs"
    shutil.copytree(CONFIGS, tree)
    (tree / "credit" / "gated_strict.yaml").write_text("method: gated\nparams:\n  tau: 0.9\n")
    cfg = load_config("train", ["credit=gated_strict"], config_dir=tree)
    assert cfg.credit.method == "gated" and cfg.credit.params["tau"] == 0.9 and cfg.credit.params["gamma"] == 1.0
    assert load_config("train", ["credit=grpo"], config_dir=tree).credit.method == "grpo"


def test_the_search_igpo_preset_grades_the_outcome_with_f1():
    # IGPO rewards the answer turn with token F1 (Search-v0's reward is exact match, F1 a component)
    cfg = load_config("train", ["+experiment=search_igpo"])
    assert cfg.credit.method == "igpo" and cfg.credit.params["outcome"] == "f1"
    assert cfg.credit.params["format_penalty"] is None  # the authors' -2.0 is an option
