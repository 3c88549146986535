"""The credit-method registry: name -> `CreditMethod`, gathered from the modules of this package.

A method registers itself in one place: the module that holds its estimator defines `METHODS`, a
tuple of `CreditMethod` records (name, parameters, per-step inputs, adapter, docs row). This module
collects them; the config's choices (`credit=<name>`), its validation, the trainer's per-step
inputs and the table in docs/credit.md all read `METHODS`, so adding a method is adding a module.

    from rlgym_llm.credit import METHODS
    METHODS["gated"].params()          # GatedParams(outcome='reward', tau=0.5, ...)
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rlgym_llm.credit.method import CreditMethod

# Modules that read the registry rather than add to it: importing them from here would be an import cycle.
_READERS = frozenset({"api", "registry"})


def _discover() -> dict[str, CreditMethod]:
    found: dict[str, CreditMethod] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.name in _READERS:
            continue
        module = importlib.import_module(f"{__package__}.{info.name}")
        records = vars(module).get("METHODS")
        if not isinstance(records, tuple):  # modules that re-export the registry hold a mapping
            continue
        for method in records:
            if method.name in found:
                raise RuntimeError(f"credit method {method.name!r} is registered twice (again in {module.__name__})")
            found[method.name] = method
    return dict(sorted(found.items()))


METHODS: Mapping[str, CreditMethod] = MappingProxyType(_discover())
"""Every credit method, by name (alphabetical)."""


def defaults(name: str) -> dict[str, Any]:
    """The parameters of method `name` with their default values."""
    return dataclasses.asdict(METHODS[name].params())


def _default_text(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def markdown_table() -> str:
    """The methods table of docs/credit.md, generated from the registry (a test keeps them equal)."""
    rows = [
        "| method | paper | what the default does | options | known differences from the authors' code |",
        "|---|---|---|---|---|",
    ]
    for m in METHODS.values():
        params = ", ".join(f"`{k}: {_default_text(v)}`" for k, v in defaults(m.name).items())
        inputs = (
            f" Per-step inputs (computed by the trainer): {', '.join(f'`{i}`' for i in m.inputs)}." if m.inputs else ""
        )
        default = m.default or m.formula
        options = f"{m.options} Parameters: {params}.{inputs}".strip()
        rows.append(f"| `{m.name}` | {m.summary} | {default} | {options} | {m.differences or '-'} |")
    return "\n".join(rows)
