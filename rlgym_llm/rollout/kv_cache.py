"""The KV-cache keyword of a transformers model, across the rename in transformers 5.x.

transformers renamed the forward keyword and output field `past_key_values` to `cache` (the old
name warns on every call and is removed in 5.40). Incremental decoding calls the model once per
token, so the old name printed a warning per generated token. These two helpers use whichever name
the installed version's model takes.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import Sequence
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


def weights_version(model: Any) -> int:
    """A number that changes whenever any of `model`'s parameters is written in place (torch counts
    in-place writes per tensor: an optimizer step, `load_state_dict`, `copy_`). KV computed at one
    version is stale at another."""
    return sum(p._version for p in model.parameters())


class PrefixStore:
    """The KV cache of finished completions, kept for the next turn of their episode.

    An episode's next prompt is its last prompt, the completion and the env's reply: the first two
    already went through the model when the completion was sampled. `put` keeps that KV (keyed by
    those tokens), `take` hands back the longest kept key that starts a new prompt, and the prefill
    then runs only the new tokens (for SmolLM2 on Math-v0: ~40 of ~250 tokens on the third turn).

    Entries are per-row `(keys, values)` per layer, `(kv_heads, tokens, head_dim)` each, on the
    model's device. Everything is dropped when the weights change (`check`), and the oldest entries
    go first beyond `max_tokens` tokens (an episode that ended leaves its last entry behind).
    """

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self._entries: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self._tokens = 0
        self._version: int | None = None
        self.hits = 0  # takes that found a prefix
        self.reused_tokens = 0  # prompt tokens the prefill did not run again

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def tokens(self) -> int:
        """Tokens held, over all entries."""
        return self._tokens

    def check(self, version: int) -> None:
        """Drop everything if the weights changed since the entries were made."""
        if version != self._version:
            self.clear()
            self._version = version

    def clear(self) -> None:
        self._entries.clear()
        self._tokens = 0

    def put(self, key: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        """Keep the KV of `key` (the tokens that went through the model, in order)."""
        key = tuple(key)
        if not key or len(key) > self.max_tokens:
            return
        if key in self._entries:
            self._tokens -= len(key)
        self._entries[key] = layers
        self._entries.move_to_end(key)
        self._tokens += len(key)
        while self._tokens > self.max_tokens:
            old, _ = self._entries.popitem(last=False)
            self._tokens -= len(old)

    def take(self, prompt: Sequence[int]) -> tuple[int, list[tuple[Any, Any]]] | None:
        """The longest kept key that is a proper prefix of `prompt` (at least one token stays to run):
        `(its length, its per-layer KV)`, removed from the store; None without one."""
        best: tuple[int, ...] | None = None
        for key in self._entries:
            n = len(key)
            if n < len(prompt) and (best is None or n > len(best)) and tuple(prompt[:n]) == key:
                best = key
        if best is None:
            return None
        layers = self._entries.pop(best)
        self._tokens -= len(best)
        self.hits += 1
        self.reused_tokens += len(best)
        return len(best), layers


def row_layers(cache: Any, row: int, keep: Any) -> list[tuple[Any, Any]] | None:
    """Row `row` of a batch's `DynamicCache`, the positions where `keep` (a bool vector over the
    cache's length) is true, per layer; None for other cache types (sliding windows, quantised)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    if layers[0].keys.shape[-2] != keep.shape[0]:
        return None
    return [(layer.keys[row][:, keep], layer.values[row][:, keep]) for layer in layers]


def batch_cache(rows: Sequence[list[tuple[Any, Any]] | None], lengths: Sequence[int]) -> Any:
    """A `DynamicCache` of `len(rows)` rows, each row's KV right-aligned in `max(lengths)` positions
    (zeros to its left, masked by the caller); a row of None holds only zeros."""
    from transformers.cache_utils import DynamicCache

    width = max(lengths)
    first = next(r for r in rows if r is not None)
    data = []
    for layer, (k0, v0) in enumerate(first):
        keys = k0.new_zeros((len(rows), k0.shape[0], width, k0.shape[-1]))
        values = v0.new_zeros((len(rows), v0.shape[0], width, v0.shape[-1]))
        for i, (r, n) in enumerate(zip(rows, lengths)):
            if r is not None and n:
                keys[i, :, width - n :] = r[layer][0]
                values[i, :, width - n :] = r[layer][1]
        data.append((keys, values))
    return DynamicCache(ddp_cache_data=data)
