"""Compose a config from the `configs/` tree with Hydra, validate it, and build its dataclasses.

    cfg = load_config("train", ["credit=gated", "env=math", "trainer.steps=5"])   # a TrainConfig

The yaml files hold only what a run chooses; every other setting keeps its dataclass default (see
`schema.py`). Validation (`rlgym_llm.core.validation`) checks the composed tree against the schema:
unknown keys and group options with the closest valid name, wrong types, values outside their
choices, the sections' own range checks and the rules between sections. Every problem is reported
in one `ConfigError`, each with the override that fixes it.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlgym_llm.config.schema import GROUPS, EnvConfig, EvalConfig, TrainConfig, env_rules, eval_rules, train_rules
from rlgym_llm.core import validation
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit import METHODS
from rlgym_llm.credit.registry import defaults

ROOTS: dict[str, tuple[type, Callable[[Any], list[str]]]] = {
    "train": (TrainConfig, train_rules),
    "eval": (EvalConfig, eval_rules),
}
"""Root config name (`configs/<name>.yaml`) -> (schema, rules between its sections)."""


def default_config_dir() -> Path:
    """`$RLGYM_CONFIG_DIR`; else the repository's `configs/` (a checkout or an editable install);
    else the copy of that tree the wheel ships as `rlgym_llm/_configs`."""
    env = os.environ.get("RLGYM_CONFIG_DIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2] / "configs"
    return checkout if (checkout / "train.yaml").exists() else Path(__file__).resolve().parents[1] / "_configs"


def search_path(extra: Sequence[str | os.PathLike] = ()) -> list[Path]:
    """Config folders searched besides the main tree: `extra` (`--config-path`), then each folder of
    `$RLGYM_CONFIG_PATH` (separated by `os.pathsep`). A file there adds an option to a group
    (`my_configs/env/mine.yaml` is `env=mine`); Hydra looks in the main tree first, so a shipped
    option keeps its file (give yours another name)."""
    env = [p for p in os.environ.get("RLGYM_CONFIG_PATH", "").split(os.pathsep) if p]
    return [Path(p).expanduser().resolve() for p in (*extra, *env)]


def _plain(x: Any) -> Any:
    """A dataclass's defaults as the plain data Hydra's store takes (tuples become lists)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return [_plain(v) for v in x] if isinstance(x, (list, tuple)) else x


def register_configs() -> None:
    """Fill Hydra's ConfigStore: `credit/<method>` for every registered credit method (with its
    default parameters), and `schema/<group>` / `schema/<root>` holding each schema's defaults.

    Hydra's structured configs cannot express `Literal` choices, so the store holds the defaults
    as plain data; `load_config` validates against the dataclasses themselves.
    """
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    for name, method in METHODS.items():
        node = {"method": name, "params": _plain(defaults(name))}
        if method.trainer:  # trainer settings that go with the advantage (Dr. GRPO's loss): a global node
            cs.store(
                group="credit",
                name=name,
                node={"credit": node, "trainer": _plain(dict(method.trainer))},
                package="_global_",
            )
        else:
            cs.store(group="credit", name=name, node=node)
    for group, cls in GROUPS.items():
        cs.store(group="schema", name=group, node=_plain(dataclasses.asdict(cls())))
    for root, (cls, _) in ROOTS.items():
        cs.store(group="schema", name=root, node=_plain(dataclasses.asdict(cls())))


def group_options(
    group: str, config_dir: str | os.PathLike | None = None, extra: Sequence[str | os.PathLike] = ()
) -> list[str]:
    """The options of a config group: its yaml files (in the search path too) and the entries of Hydra's store."""
    from hydra.core.config_store import ConfigStore

    root = Path(config_dir) if config_dir is not None else default_config_dir()
    files = {p.stem for d in (*search_path(extra), root) for p in (d / group).glob("*.yaml")}
    register_configs()
    stored = ConfigStore.instance().repo.get(group, {})
    return sorted(files | {name.removesuffix(".yaml") for name in stored})


def compose(
    config_name: str,
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra: Sequence[str | os.PathLike] = (),
) -> dict:
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
        dirs = search_path(extra)
        searched = [f"hydra.searchpath=[{','.join(d.as_uri() for d in dirs)}]"] if dirs else []
        with initialize_config_dir(version_base=None, config_dir=str(root.resolve())):
            cfg = hydra_compose(config_name=config_name, overrides=[*searched, *overrides])
        out = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError([f"{type(e).__name__}: {e}"]) from e
    assert isinstance(out, dict)
    return out


def _check_override(
    override: str, schema: type, config_dir: str | os.PathLike | None, extra: Sequence[str | os.PathLike] = ()
) -> tuple[str | None, str]:
    """(the problem of one override, or None; the override to pass to Hydra).

    Hydra stops at the first unknown key, so every override is checked against the schema first.
    A checked `key.path=value` is passed as `++key.path=value` (set or add): the yaml files hold only
    what a run chooses, so a valid key may be absent from the composed tree.
    """
    key, _, value = override.partition("=")
    if key.startswith(("+", "~")) or not _:
        return None, override  # appending or deleting is explicit; Hydra reports malformed overrides
    parts = key.split(".")
    fields = {f.name for f in dataclasses.fields(schema)}
    if len(parts) == 1 and key in GROUPS and key in fields:  # a group option: `credit=gated`
        options = group_options(key, config_dir, extra)
        if value not in options:
            hint = validation.did_you_mean(value, options, quote="`")
            hint = hint.replace("`", f"`{key}=", 1) if hint else ""
            return f"unknown option `{key}={value}`{hint}; options of `{key}`: {', '.join(options)}", override
        return None, override
    node: Any = schema
    for i, part in enumerate(parts):
        if not (isinstance(node, type) and dataclasses.is_dataclass(node)):
            break  # below env.kwargs, credit.params...: free-form
        if part not in {f.name for f in dataclasses.fields(node)}:
            problem = validation.unknown_key(node, part, "".join(f"{p}." for p in parts[:i]))
            return f"{problem.replace(f'`{key}`', f'`{key}` in override `{override}`', 1)}", override
        hint = typing.get_type_hints(node)[part]
        node = validation.optional_inner(hint) or hint
    return None, "++" + override


def _own_env(overrides: list[str]) -> list[str]:
    """Naming your own env (`env.id=`, `env.entry_point=`, `env.module=`) without choosing an `env=`
    option starts from `env=custom`, an empty env section: the default env's kwargs, oracle and
    turn limit are replaced, never merged into yours."""
    keys = {o.lstrip("+~").partition("=")[0] for o in overrides}
    if keys & {"env.id", "env.entry_point", "env.module"} and "env" not in keys:
        return ["env=custom", *overrides]
    return overrides


def build_config(config_name: str, data: Any) -> Any:
    """Validate and build a root config from plain data that is already composed (a run folder's
    config.yaml, every setting present), as `load_config` does after composing.

    Raises:
        ConfigError: every problem found, each with its fix.
    """
    schema, rules = ROOTS[config_name]
    cfg, problems = validation.validate(data, schema)
    if cfg is not None:
        problems += rules(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


def load_config(
    config_name: str = "train",
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra: Sequence[str | os.PathLike] = (),
) -> Any:
    """Compose, validate and build the root config of a command.

    Args:
        config_name: a key of `ROOTS`: `train` (a `TrainConfig`) or `eval` (an `EvalConfig`).
        overrides: Hydra overrides, e.g. `["credit=gated", "trainer.steps=5"]`.
        config_dir: the config tree (default `default_config_dir()`).
        extra: more config folders (`search_path`).

    Raises:
        ConfigError: every problem found, each with its fix.
    """
    schema, rules = ROOTS[config_name]
    overrides = _own_env(list(overrides))
    checked = [_check_override(o, schema, config_dir, extra) for o in overrides]
    early = [problem for problem, _ in checked if problem]
    data = compose(config_name, [o for problem, o in checked if not problem], config_dir, extra)
    cfg, problems = validation.validate(data, schema)
    if cfg is not None:
        problems += rules(cfg)
    elif isinstance(data.get("env"), dict):  # another section cannot be built: still check the env's kwargs
        env, env_problems = validation.validate(data["env"], EnvConfig, "env.")
        problems += env_rules(env) if env is not None and not env_problems else []
    if early or problems:
        raise ConfigError(early + problems)
    return cfg
