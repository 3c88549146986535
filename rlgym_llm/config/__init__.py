"""Typed config schemas (dataclasses registered in Hydra's ConfigStore), composition and validation."""

from rlgym_llm.config.compose import (
    CREDIT_METHODS,
    ROOTS,
    check_schema,
    check_train,
    compose,
    default_config_dir,
    load_config,
    register_configs,
    to_dataclass,
)
from rlgym_llm.config.schema import (
    GROUPS,
    AgentConfig,
    CreditConfig,
    EnvConfig,
    LoraConfig,
    PolicyConfig,
    SamplingConfig,
    SandboxConfig,
    SFTConfig,
    TrainConfig,
    TrainerConfig,
)

__all__ = [
    "CREDIT_METHODS",
    "GROUPS",
    "ROOTS",
    "AgentConfig",
    "CreditConfig",
    "EnvConfig",
    "LoraConfig",
    "PolicyConfig",
    "SFTConfig",
    "SamplingConfig",
    "SandboxConfig",
    "TrainConfig",
    "TrainerConfig",
    "check_schema",
    "check_train",
    "compose",
    "default_config_dir",
    "load_config",
    "register_configs",
    "to_dataclass",
]
