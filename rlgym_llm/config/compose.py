"""Compose a config from the `configs/` tree with Hydra, validate it, and turn it into dataclasses.

    cfg = load_config("train", ["credit=gated", "env=math", "trainer.steps=5"])   # a TrainConfig

Validation checks the composed tree against the schema (unknown keys, with the closest valid name;
wrong types) and the rules between fields, and reports every problem in one `ConfigError`, each
with the override that fixes it.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rlgym_llm.config.schema import GROUPS, TrainConfig
from rlgym_llm.core.errors import ConfigError

T = TypeVar("T")

CREDIT_METHODS = ("grpo", "drgrpo", "rloo", "turn_grpo", "gated", "igpo", "spa", "gigpo")
_CHOICES: dict[str, tuple[str, ...]] = {
    "policy.backend": ("hf", "vllm", "openai"),
    "sandbox.backend": ("local", "docker"),
    "credit.method": CREDIT_METHODS,
    "trainer.schedule": ("constant", "linear", "cosine"),
    "trainer.agg": ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"),
    "trainer.kl_estimator": ("k1", "k2", "k3"),
    "agent.name": ("tool_calling",),
    "agent.token_check": ("off", "warn", "strict"),
}


def default_config_dir() -> Path:
    """`$RLGYM_CONFIG_DIR`, else the repository's `configs/` folder."""
    env = os.environ.get("RLGYM_CONFIG_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "configs"


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore: `schema/<group>` per group and `schema/train`."""
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for group, cls in GROUPS.items():
        cs.store(group="schema", name=group, node=cls)
    cs.store(group="schema", name="train", node=TrainConfig)


def compose(config_name: str, overrides: Sequence[str] = (), config_dir: str | os.PathLike | None = None) -> dict:
    """Compose `configs/<config_name>.yaml` with Hydra overrides into a plain dict (interpolations resolved).

    Raises:
        ConfigError: Hydra could not compose (unknown group option, malformed override, ...).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    root = Path(config_dir) if config_dir is not None else default_config_dir()
    if not (root / f"{config_name}.yaml").exists():
        raise ConfigError([f"no config {config_name!r} in {root}; set RLGYM_CONFIG_DIR to the repository's configs/"])
    register_configs()
    try:
        with initialize_config_dir(version_base=None, config_dir=str(root.resolve())):
            cfg = hydra_compose(config_name=config_name, overrides=list(overrides))
        out = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([f"{type(e).__name__}: {e}"]) from e
    assert isinstance(out, dict)
    return out


def check_schema(data: Any, schema: type, prefix: str = "") -> list[str]:
    """Problems of `data` against a dataclass schema: unknown keys (with suggestions) and wrong types."""
    if not isinstance(data, Mapping):
        return [f"{prefix or 'config'} must be a mapping, got {type(data).__name__}"]
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    problems = []
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in hints:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean `{prefix}{close[0]}`?" if close else f"valid keys: {', '.join(names)}"
            problems.append(f"unknown key `{path}`: {hint}")
            continue
        problems += _check_type(value, hints[key], path)
    return problems


def _check_type(value: Any, hint: Any, path: str) -> list[str]:
    if dataclasses.is_dataclass(hint):
        return check_schema(value, hint, f"{path}.")  # type: ignore[arg-type]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return []
        inner = [o for o in options if o is not type(None)]
        return _check_type(value, inner[0], path) if len(inner) == 1 else []
    expected: dict[Any, Callable[[Any], bool]] = {
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        bool: lambda v: isinstance(v, bool),
        str: lambda v: isinstance(v, str),
        dict: lambda v: isinstance(v, Mapping),
        list: lambda v: isinstance(v, (list, tuple)),
    }
    check = expected.get(origin or hint)
    if check is None or check(value):
        return []
    name = getattr(origin or hint, "__name__", str(hint))
    return [f"`{path}` must be {name}, got {value!r} ({type(value).__name__}); set `{path}=<{name}>`"]


def check_train(cfg: TrainConfig) -> list[str]:
    """Rules between fields of a `TrainConfig`, each with its fix."""
    p: list[str] = []
    for path, options in _CHOICES.items():
        group, key = path.split(".")
        value = getattr(getattr(cfg, group), key)
        if value not in options:
            close = difflib.get_close_matches(str(value), options, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            p.append(f"`{path}={value}` is not one of {', '.join(options)}{hint}")
    t, s, pol = cfg.trainer, cfg.policy.sampling, cfg.policy
    positive = {
        "trainer.steps": t.steps,
        "trainer.tasks_per_step": t.tasks_per_step,
        "trainer.micro_batch_size": t.micro_batch_size,
        "env.max_turns": cfg.env.max_turns,
        "policy.max_context": pol.max_context,
        "policy.max_batch_size": pol.max_batch_size,
        "policy.concurrency": pol.concurrency,
        "policy.sampling.max_tokens": s.max_tokens,
        "sft.batch_size": cfg.sft.batch_size,
        "sft.steps": cfg.sft.steps,
        "sft.episodes": cfg.sft.episodes,
    }
    p += [f"`{k}={v}` must be >= 1" for k, v in positive.items() if v < 1]
    if t.group_size < 2:
        p.append(
            f"`trainer.group_size={t.group_size}`: group-relative credit needs >= 2 samples per task; "
            "set trainer.group_size=8"
        )
    if not 0.0 <= cfg.sft.idle_prob < 1.0:
        p.append(f"sft.idle_prob must be in [0, 1), got {cfg.sft.idle_prob}: e.g. sft.idle_prob=0.3")
    if t.lr <= 0 or cfg.sft.lr <= 0:
        p.append("learning rates must be > 0: set trainer.lr=1e-4 / sft.lr=1e-3")
    if not 0 < t.clip_low < 1 or t.clip_high <= 0:
        p.append(
            f"clip range needs 0 < trainer.clip_low < 1 and trainer.clip_high > 0, got {t.clip_low}, {t.clip_high}"
        )
    if t.kl_coef < 0 or t.entropy_coef < 0:
        p.append("trainer.kl_coef and trainer.entropy_coef must be >= 0")
    if s.temperature <= 0:
        p.append(
            f"`policy.sampling.temperature={s.temperature}`: training samples must differ within a group; "
            "set policy.sampling.temperature=1.0"
        )
    if s.eval_temperature < 0:
        p.append("`policy.sampling.eval_temperature` must be >= 0 (0: greedy)")
    if not 0 < s.top_p <= 1:
        p.append(f"`policy.sampling.top_p={s.top_p}` must be in (0, 1]")
    if pol.max_context <= s.max_tokens:
        p.append(
            f"`policy.max_context={pol.max_context}` leaves no room for a prompt next to "
            f"`policy.sampling.max_tokens={s.max_tokens}`; raise policy.max_context"
        )
    if pol.backend == "openai":
        p.append(
            "`policy=openai` cannot receive weight updates, so it cannot be trained; use policy=hf or "
            "policy=vllm (openai is for `rlgym eval`)"
        )
    if t.save_every < 0 or t.keep_checkpoints < 1:
        p.append("trainer.save_every must be >= 0 and trainer.keep_checkpoints >= 1")
    if t.eval_tasks < 0:
        p.append("trainer.eval_tasks must be >= 0")
    if t.eval_every < 0:
        p.append("trainer.eval_every must be >= 0 (0: evaluate only before and after training)")
    if cfg.sft.enabled and not cfg.env.oracle and not cfg.sft.init:
        p.append(f"SFT warm-up needs an oracle for {cfg.env.id}: set env.oracle=module:Class, or sft.enabled=false")
    if t.lora.enabled and (t.lora.r < 1 or not t.lora.target_modules):
        p.append("LoRA needs trainer.lora.r >= 1 and at least one trainer.lora.target_modules entry")
    if cfg.sandbox.wall_s <= 0 or cfg.sandbox.memory_mb < 1:
        p.append("sandbox.wall_s must be > 0 and sandbox.memory_mb >= 1")
    return p


def _check_override(override: str, schema: type) -> tuple[str | None, str]:
    """(a problem with a `key.path=value` override whose path is not in the schema, or None; the
    override to pass on: keys below free-form dicts such as `env.kwargs` become `++key=value`)."""
    key = override.split("=", 1)[0]
    if key.startswith(("+", "~")) or "=" not in override:
        return None, override  # appending or deleting is explicit; Hydra reports malformed overrides
    node: Any = schema
    parts = key.split(".")
    for i, part in enumerate(parts):
        if not dataclasses.is_dataclass(node):
            return None, "++" + override  # below env.kwargs, credit.params...: add or replace
        hints = typing.get_type_hints(node)
        if part not in hints:
            names = list(hints)
            close = difflib.get_close_matches(part, names, n=1)
            prefix = ".".join(parts[:i])
            where = f"{prefix}." if prefix else ""
            hint = f"did you mean `{where}{close[0]}`?" if close else f"valid keys: {', '.join(names)}"
            return f"unknown key `{key}` in override `{override}`: {hint}", override
        node = hints[part]
        if typing.get_origin(node) in (typing.Union, types.UnionType):
            node = next(a for a in typing.get_args(node) if a is not type(None))
    return None, override


def to_dataclass(data: Mapping[str, Any], schema: type[T]) -> T:
    """Build `schema` from a checked mapping (nested dataclasses included)."""
    hints = typing.get_type_hints(schema)
    kwargs = {}
    for key, value in data.items():
        hint = hints[key]
        kwargs[key] = to_dataclass(value, hint) if dataclasses.is_dataclass(hint) else value  # type: ignore[arg-type]
    return schema(**kwargs)


def load_config(
    config_name: str = "train",
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra_checks: Callable[[Any], list[str]] | None = None,
) -> Any:
    """Compose, validate and build the root config of a command.

    Args:
        config_name: `train` (a `TrainConfig`), or another root whose schema has been stored with
            `ROOTS[name] = (schema, checks)`.
        overrides: Hydra overrides, e.g. `["credit=gated", "trainer.steps=5"]`.
        config_dir: the config tree (default `default_config_dir()`).
        extra_checks: more rules (e.g. the credit method's own parameters), run on the built config.

    Raises:
        ConfigError: every problem found, each with its fix.
    """
    schema, checks = ROOTS[config_name]
    # Hydra stops at the first unknown key; check every override against the schema first.
    checked = [_check_override(o, schema) for o in overrides]
    early = [m for m, _ in checked if m]
    data = compose(config_name, [o for m, o in checked if not m], config_dir)
    problems = early + check_schema(data, schema)
    if problems:
        raise ConfigError(problems)
    cfg: Any = to_dataclass(data, schema)
    problems = (checks(cfg) if checks else []) + (extra_checks(cfg) if extra_checks else [])
    if problems:
        raise ConfigError(problems)
    return cfg


ROOTS: dict[str, tuple[type, Callable[[Any], list[str]] | None]] = {"train": (TrainConfig, check_train)}
"""Root config name -> (schema, cross-field checks). Other commands (e.g. `eval`) add theirs."""
