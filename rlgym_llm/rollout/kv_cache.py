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


def last_logits_kwargs(model: Any) -> dict[str, int]:
    """`{"logits_to_keep": 1}` where the model's forward takes it (`num_logits_to_keep` in the
    transformers versions before the rename), else `{}`.

    Sampling needs only the last position's logits. Without this the prefill of a batch computes
    logits for every prompt position: batch x prompt length x vocab floats, 2.5 GB for 32 prompts
    of 400 tokens over SmolLM2's 49,152-token vocabulary, the largest allocation of a CPU run.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(base.forward).parameters
    for name in ("logits_to_keep", "num_logits_to_keep"):
        if name in params:
            return {name: 1}
    return {}
