"""`rlgym train resume=RUN`: the run's own config, read from its folder, so nothing is retyped.

    cfg = load("train", ["resume=runs/train/2026-11-28_10-00-00", "trainer.steps=30"])

The run folder's `config.yaml` (written when the run started: every setting, the env's turn limit
included) is the config of the resumed run. An override may repeat a saved value (the whole original
command with `resume=` added still works) or change one of `parts.RESUMABLE_CHANGES`: `trainer.steps`
(raised, it extends the run; it may not fall below the steps the run has done), `progress`,
`trainer.threads`, `trainer.nproc`, `trainer.sampling_seeds`. Any other value that differs from the
saved one is refused in one line that names the key, the saved value and the given one: a run never
continues with another method, env, model or learning rate. A group option (`credit=gated`,
`+experiment=...`) sets the keys its files set, and each is checked the same way.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlgym_llm.config import build_config
from rlgym_llm.config.compose import compose, group_options
from rlgym_llm.core.errors import ConfigError, ResumeConflictError
from rlgym_llm.recipes import parts

_MISSING = object()


def load(
    config_name: str,
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra: Sequence[str | os.PathLike] = (),
) -> Any:
    """`parts.load`, except that `resume=RUN` (train) gives the run's saved config (`load_resumed`):
    what `rlgym train` and `rlgym sft` load."""
    run = resume_folder(overrides) if config_name == "train" else None
    if run is None:
        return parts.load(config_name, overrides, config_dir, extra)
    return load_resumed(run, overrides, config_dir, extra)


def resume_folder(overrides: Sequence[str]) -> str | None:
    """The run folder of a `resume=RUN` override (the last one wins), or None (none, or `resume=null`)."""
    found = None
    for override in overrides:
        parsed = _parse(override)
        if parsed.key_or_group == "resume":
            value = None if parsed.is_delete() else parsed.value()
            found = None if value is None else str(value)
    return found


def load_resumed(
    run: str | os.PathLike,
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra: Sequence[str | os.PathLike] = (),
) -> Any:
    """The validated config that continues the run in folder `run`: its saved config.yaml, with the
    `overrides` that change `parts.RESUMABLE_CHANGES` applied (`resume=` among them is ignored).

    Raises:
        ConfigError: no run there, or an override that is not valid on the run's config.
        ResumeConflictError: an override contradicts the saved config, or `trainer.steps` is below the
            steps the run has done (one line).
    """
    from omegaconf import OmegaConf

    saved_file = Path(run) / "config.yaml"
    if not saved_file.exists():
        raise ConfigError([f"`resume={run}`: no run there ({saved_file} is missing); pass a folder of `rlgym train`"])
    loaded = OmegaConf.to_container(OmegaConf.load(saved_file))
    assert isinstance(loaded, dict)
    saved: dict[str, Any] = {str(k): v for k, v in loaded.items()}
    data, given = _apply(saved, overrides, config_dir, extra)
    data["resume"] = data["out_dir"] = str(run)

    # conflicts first (a group option of another env would also fail validation, less clearly)
    now, old = parts._flat(data), parts._flat(saved)
    conflicts = []
    for key in sorted(set(now) | set(old)):
        setting = next((g for g in given if key == g or key.startswith(f"{g}.")), None)
        if setting is None or key in parts.RESUMABLE_CHANGES:
            continue
        before = old.get(key, _MISSING)
        if before is _MISSING:  # a setting added after the run was saved ran with its default; a typo has none
            before = _default(key)
            if before is _MISSING:
                continue  # validation names the unknown key
        value = now.get(key, _MISSING)
        if before != value:
            conflicts.append(
                f"{key} is {_shown(before)} in the run's saved config, `{given[setting]}` gives {_shown(value)}"
            )
    if conflicts:
        more = f" (and {len(conflicts) - 3} more)" if len(conflicts) > 3 else ""
        allowed = ", ".join(parts.RESUMABLE_CHANGES[2:])
        raise ResumeConflictError(
            [
                f"`resume={run}`: " + "; ".join(conflicts[:3]) + more,
                f"a resumed run keeps its config: drop the override, or start a new run (only {allowed} may change)",
            ]
        )
    cfg = build_config("train", data)  # unknown keys, types and the rules, as for a new run
    done = steps_done(run)
    if cfg.trainer.steps < done:
        raise ResumeConflictError(
            [
                f"`resume={run}`: `trainer.steps={cfg.trainer.steps}` is fewer than the {done} steps the run has "
                f"done (its latest checkpoint); give trainer.steps={done} or more (more extends the run)"
            ]
        )
    return cfg


def _apply(
    saved: dict[str, Any],
    overrides: Sequence[str],
    config_dir: str | os.PathLike | None,
    extra: Sequence[str | os.PathLike],
) -> tuple[dict[str, Any], dict[str, str]]:
    """(the saved config with the overrides applied, each key an override sets -> that override; a
    key covers the flat keys below it). As Hydra does, group options first, then the keys in order
    (`env.max_turns=2 env=math` keeps 2). A group option sets the keys its files set (null ones
    aside: "unset"), read from Hydra's composition of the default tree with it."""
    data = copy.deepcopy(saved)
    given: dict[str, str] = {}
    parsed = [(override, _parse(override)) for override in overrides]
    groups = {
        o: "." not in p.key_or_group and (p.is_add() or bool(group_options(p.key_or_group, config_dir, extra)))
        for o, p in parsed
    }
    base: dict[str, Any] | None = None
    for override, p in sorted(parsed, key=lambda item: not groups[item[0]]):
        key = p.key_or_group
        if key == "resume":
            continue
        if p.is_sweep_override():
            raise ConfigError([f"override `{override}`: a sweep cannot resume a run; give one value"])
        if groups[override]:
            base = base if base is not None else parts._flat(compose("train", [], config_dir, extra))
            chosen = parts._flat(compose("train", [override], config_dir, extra))
            for k, value in chosen.items():
                sets = base.get(k, _MISSING) != value or k.startswith(f"{key}.")
                if sets and value is not None and k not in parts.RESUMABLE_CHANGES:
                    _assign(data, k, value)
                    given.setdefault(k, override)
            continue
        if p.is_delete():
            _delete(data, key)
        else:
            _assign(data, key, p.value())
        given = {k: v for k, v in given.items() if k != key and not k.startswith(f"{key}.")}
        given[key] = override
    return data, given


def _default(key: str) -> Any:
    """The schema default of a dotted `TrainConfig` setting, or `_MISSING` (no such setting)."""
    from rlgym_llm.config import TrainConfig

    return parts._field_default(TrainConfig(), key, _MISSING)


def newest_checkpoint(run: str | os.PathLike) -> Path | None:
    """The run's newest complete checkpoint (`checkpoints/step_NNNNNN`), or None."""
    from rlgym_llm.train import checkpoint

    return checkpoint.latest(Path(run) / "checkpoints")


def steps_done(run: str | os.PathLike) -> int:
    """The step of the run's newest complete checkpoint (0: none yet)."""
    found = newest_checkpoint(run)
    return int(found.name.removeprefix("step_")) if found is not None else 0


def _parse(override: str) -> Any:
    """Hydra's reading of one override (key, value with its type, add/delete)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        return OverridesParser.create().parse_override(override)
    except HydraException as e:
        raise ConfigError([f"override `{override}`: {e}"]) from e


def _assign(data: dict[str, Any], key: str, value: Any) -> None:
    *parents, name = key.split(".")
    node = data
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[name] = value


def _delete(data: dict[str, Any], key: str) -> None:
    *parents, name = key.split(".")
    node: Any = data
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(name, None)


def _shown(value: Any) -> str:
    return "(absent)" if value is _MISSING else repr(value)
