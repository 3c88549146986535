"""Config schemas (the rooms' runtime dataclasses plus the recipes' sections), Hydra composition and validation."""

from rlgym_llm.config.compose import (
    ROOTS,
    build_config,
    compose,
    default_config_dir,
    group_options,
    load_config,
    register_configs,
)
from rlgym_llm.config.schema import (
    GROUPS,
    AgentConfig,
    CreditConfig,
    EnvConfig,
    EvalConfig,
    PolicyConfig,
    SandboxConfig,
    SFTConfig,
    TrainConfig,
    eval_rules,
    train_rules,
)
from rlgym_llm.train.config import LoraConfig, LossConfig, OptimConfig, TrainerConfig

__all__ = [
    "GROUPS",
    "ROOTS",
    "AgentConfig",
    "CreditConfig",
    "EnvConfig",
    "EvalConfig",
    "LoraConfig",
    "LossConfig",
    "OptimConfig",
    "PolicyConfig",
    "SFTConfig",
    "SandboxConfig",
    "TrainConfig",
    "TrainerConfig",
    "build_config",
    "compose",
    "default_config_dir",
    "eval_rules",
    "group_options",
    "load_config",
    "register_configs",
    "train_rules",
]
