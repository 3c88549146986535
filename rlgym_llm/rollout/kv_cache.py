"""The KV-cache keyword of a transformers model, across the rename in transformers 5.x.

transformers renamed the forward keyword and output field `past_key_values` to `cache` (the old
name warns on every call and is removed in 5.40). Incremental decoding calls the model once per
token, so the old name printed a warning per generated token. These two helpers use whichever name
the installed version's model takes.
"""

from __future__ import annotations

import inspect
from typing import Any


def cache_kwarg(model: Any) -> str:
    """`cache` where the model's forward takes it, else `past_key_values` (older transformers)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT wrapper's forward is *args
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def cache_of(out: Any) -> Any:
    """The KV cache a forward pass returned (None where it returned none)."""
    if "cache" in getattr(type(out), "__dataclass_fields__", {}):
        return out.cache
    return getattr(out, "past_key_values", None)
