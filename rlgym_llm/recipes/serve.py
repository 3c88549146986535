"""`rlgym serve ENV_ID [key=value ...]`: a registered env as an OpenEnv server (docs/interop.md).

serve("rlgym/Search-v0", ["split=test", "world_people=4"], port=8000, max_sessions=64)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from rlgym_llm.core import registry
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.validation import check_call
from rlgym_llm.recipes.parts import import_object


def parse_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """`["size=5", "split=test", "tags=[a, b]"]` -> the env's constructor keywords (values read as YAML)."""
    kwargs: dict[str, Any] = {}
    problems = []
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip().isidentifier():
            problems.append(f"{pair!r}: write the env's keyword arguments as key=value, e.g. split=test")
            continue
        try:
            kwargs[key.strip()] = yaml.safe_load(value) if value else ""
        except yaml.YAMLError as e:
            problems.append(f"{pair!r}: the value is not valid YAML ({e})")
    if problems:
        raise ConfigError(problems)
    return kwargs


def serve(env_target: str, pairs: Sequence[str], module: str | None = None, **options: Any) -> None:
    """Check the env and its keywords, build one instance (its own checks run now), then serve it."""
    if module:
        registry.import_env_module(module)
    env_id = registry.resolve(env_target)
    kwargs = parse_kwargs(pairs)
    entry = registry.spec(env_id).entry_point
    target = import_object(entry) if isinstance(entry, str) else entry
    assert callable(target), f"{env_id}: its entry point {entry!r} is not callable"
    problems = check_call(target, kwargs, "", given=dict(registry.spec(env_id).kwargs or {}))
    if problems:
        raise ConfigError([f"{env_id}: {p}" for p in problems])
    registry.make(env_id, max_turns=options.get("max_turns"), **kwargs).close()  # a bad value fails here, once

    from rlgym_llm.serve.server import serve as run_server

    run_server(env_id, kwargs, **options)
