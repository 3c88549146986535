"""The env registry: Gymnasium's, with string entry points and a plugin entry-point group.

    rlgym_llm.register("myorg/Maze-v0", "my_pkg.maze:MazeEnv", max_turns=8, size=5)
    env = rlgym_llm.make("myorg/Maze-v0", size=7)

Registering never imports the env; `make()` does, then applies the safety wrappers (Gymnasium's
order enforcing and passive checker, and our `TurnLimit`). Packages register their envs through
the `rlgym_llm.envs` entry-point group: each entry point names a function that calls `register`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import re
from collections.abc import Callable
from typing import Any

import gymnasium

from rlgym_llm.core.errors import RegistrationError, UnknownEnvError
from rlgym_llm.core.wrappers import TurnLimit

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "rlgym_llm.envs"
_ID_RE = re.compile(r"^(?:[\w:.-]+/)?[\w:.-]+-v\d+$")
_ENTRY_RE = re.compile(r"^[\w.]+:[\w.]+$")

_max_turns: dict[str, int | None] = {}  # id -> default turn limit; also the set of our ids
_plugins_loaded = False


def register(
    env_id: str, entry_point: str | Callable[..., gymnasium.Env], max_turns: int | None = None, **defaults: Any
) -> None:
    """Register an env under a versioned id.

    Args:
        env_id: `namespace/Name-vN`; bump the version whenever grading changes.
        entry_point: `"package.module:Class"` (imported only by `make`) or a callable.
        max_turns: default turn limit applied by `make()` (`None`: no limit).
        **defaults: default constructor kwargs; `make(id, **kwargs)` overrides them.
    """
    if not isinstance(env_id, str) or not _ID_RE.match(env_id):
        raise RegistrationError(
            f"env id {env_id!r} must look like 'namespace/Name-v0' (a version suffix is required, "
            "so that a change to grading can bump it)"
        )
    if isinstance(entry_point, str) and not _ENTRY_RE.match(entry_point):
        raise RegistrationError(f"entry point {entry_point!r} must look like 'package.module:ClassName'")
    if not isinstance(entry_point, str) and not callable(entry_point):
        raise RegistrationError(f"entry point must be a 'module:Class' string or a callable, got {entry_point!r}")
    if max_turns is not None and max_turns < 1:
        raise RegistrationError(f"max_turns must be a positive int or None, got {max_turns!r}")
    gymnasium.register(id=env_id, entry_point=entry_point, kwargs=defaults)
    _max_turns[env_id] = max_turns


def load_plugins(force: bool = False) -> None:
    """Run every `rlgym_llm.envs` entry point once. A broken plugin is logged, not fatal."""
    global _plugins_loaded
    if _plugins_loaded and not force:
        return
    _plugins_loaded = True
    if "toy/Counter-v0" not in gymnasium.registry:  # the library's own toy env: the demo's, and `env=counter`'s
        register("toy/Counter-v0", "rlgym_llm.testing.toy:CounterEnv", max_turns=4)
    if "rlgym/Remote-v0" not in gymnasium.registry:  # an env on an OpenEnv server (`rlgym serve`, docs/interop.md)
        register("rlgym/Remote-v0", "rlgym_llm.serve.remote:RemoteEnv")
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            hook = ep.load()
            if callable(hook):
                hook()
        except Exception as e:  # a third party's bug must not break `import rlgym_llm`
            logger.warning(
                "env plugin %r (%s) failed to load: %s: %s. Its envs are unavailable; "
                "fix or uninstall the package that declares it.",
                ep.name,
                ep.value,
                type(e).__name__,
                e,
            )


def import_env_module(name: str) -> None:
    """Import a module that registers envs when imported. The working directory is searched too
    (the `rlgym` script, unlike `python -m`, does not put it on `sys.path`), so a local
    `my_envs.py` is found from the folder it is in."""
    import sys

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    importlib.import_module(name)


def resolve(target: str) -> str:
    """An env id, or `module:Class` registered first as `custom/<Class>-v0` (what `rlgym check-env`
    and `env.entry_point` accept): the id to `make`."""
    if ":" not in target or "/" in target.partition(":")[0]:
        return target
    module, _, name = target.partition(":")
    env_id = f"custom/{name.rpartition('.')[2]}-v0"
    import_env_module(module)
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)  # AttributeError now, not inside make()
    if env_id not in gymnasium.registry:
        register(env_id, target)
    return env_id


def spec(env_id: str) -> gymnasium.envs.registration.EnvSpec:
    """The registered spec of `env_id` (raises `UnknownEnvError` with suggestions)."""
    load_plugins()
    if env_id not in gymnasium.registry:
        raise UnknownEnvError(env_id, _max_turns or gymnasium.registry.keys())
    return gymnasium.registry[env_id]


def make(env_id: str, max_turns: int | None = None, **kwargs: Any) -> gymnasium.Env:
    """Build a registered env, wrapped in Gymnasium's safety wrappers and a `TurnLimit`.

    Args:
        env_id: a registered id, e.g. `"rlgym/Math-v0"`.
        max_turns: override the registered turn limit.
        **kwargs: constructor kwargs, overriding the registered defaults.
    """
    spec(env_id)
    limit = max_turns if max_turns is not None else _max_turns.get(env_id)
    env = gymnasium.make(env_id, **kwargs)  # merges the registered defaults under kwargs
    return TurnLimit(env, limit) if limit else env


def needs_registration(env_id: str, entry_point: str) -> bool:
    """Whether a config's `entry_point` (`module:Class`) is to be registered as `env_id`: the id is
    not registered, or is registered with another `module:Class` string (an earlier config's, in the
    same process). An id registered with the class itself (by its module) keeps its registration."""
    load_plugins()
    registered = gymnasium.registry.get(env_id)
    if registered is None or env_id not in _max_turns:
        return True
    return isinstance(registered.entry_point, str) and registered.entry_point != entry_point


def default_max_turns(env_id: str) -> int | None:
    """The turn limit `make(env_id)` applies unless told otherwise (None: no limit)."""
    spec(env_id)
    return _max_turns.get(env_id)


def list_envs(namespace: str | None = None) -> list[str]:
    """Ids registered through rlgym-llm (built-ins and plugins), optionally of one namespace."""
    load_plugins()
    ids = sorted(i for i in _max_turns if i in gymnasium.registry)  # not ids removed from Gymnasium's since
    if namespace is not None:
        ids = [i for i in ids if i.split("/", 1)[0] == namespace]
    return ids
