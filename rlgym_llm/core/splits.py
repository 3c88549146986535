"""Content splits: `train`, `val` and `test` pools that share no task.

Every env takes `split` at `make()` time (DESIGN.md). The pools are disjoint by *content*: a task's
content key (`Task.content_key()`: its prompt, or for envs whose prompt is shared by every task, the
hidden task such as the target or the secret) decides its split, through a stable hash of the key. A
generated env draws from its generator until a draw falls in its split (`draw_in_split`), so the
same seed gives the same task, and no seed of another split can ever produce it.

    split_of("Compute 4 - 3.")                    # "train", "val" or "test", the same on every machine
    task = draw_in_split(lambda: generate(rng), "test")

An env whose tasks form a list (a data file, a fixed catalog) partitions the list the same way
(`partition`); an env may split coarser units instead (whole worlds, repositories), by passing their
key. Training draws from `train`, the in-run held-out curve from `val`, published numbers from `test`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from rlgym_llm.core.errors import ConfigError

SPLITS: tuple[str, ...] = ("train", "val", "test")
DEFAULT_WEIGHTS: tuple[float, float, float] = (0.6, 0.2, 0.2)
"""The share of the key space in each of `train`, `val`, `test`. Test and val keep a fifth each, so a
generator space of 1,000 tasks gives each held-out pool about 200 distinct tasks."""
MAX_DRAWS = 10_000

T = TypeVar("T")


def check_split(split: object) -> str:
    """`split` if it names a split, else a `ConfigError` listing the valid ones."""
    if not isinstance(split, str) or split not in SPLITS:
        raise ConfigError([f"split must be one of {list(SPLITS)}, got {split!r}"])
    return split


def check_weights(weights: Sequence[float]) -> tuple[float, float, float]:
    """Three positive shares (train, val, test), normalised to sum to 1."""
    values = tuple(float(w) for w in weights)
    if len(values) != len(SPLITS) or any(not w > 0 for w in values):
        raise ConfigError([f"split weights must be three positive numbers (train, val, test), got {list(weights)!r}"])
    total = sum(values)
    return values[0] / total, values[1] / total, values[2] / total


def unit_interval(key: str) -> float:
    """A stable number in [0, 1) from `key` (sha256: the same on every machine and Python version)."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_of(key: str, weights: Sequence[float] = DEFAULT_WEIGHTS) -> str:
    """The split a content key belongs to."""
    train, val, _ = check_weights(weights)
    u = unit_interval(key)
    return "train" if u < train else "val" if u < train + val else "test"


def draw_in_split(
    draw: Callable[[], T],
    split: str,
    key: Callable[[T], str] | None = None,
    weights: Sequence[float] = DEFAULT_WEIGHTS,
    max_draws: int = MAX_DRAWS,
) -> T:
    """Call `draw()` until its result's key falls in `split` (the draws use the caller's RNG, so a seed
    still fixes the result). `key` defaults to `result.content_key()` (a `Task`).

    Raises:
        ConfigError: no draw fell in the split after `max_draws` tries (the generator's space is too small).
    """
    check_split(split)
    key = key or (lambda item: item.content_key())  # type: ignore[attr-defined]
    for _ in range(max_draws):
        item = draw()
        if split_of(key(item), weights) == split:
            return item
    raise ConfigError([f"no task of split {split!r} in {max_draws} draws: the generator's space is too small to split"])


def partition(
    items: Iterable[T], key: Callable[[T], str], split: str, weights: Sequence[float] = DEFAULT_WEIGHTS
) -> list[T]:
    """The items whose key falls in `split`, in their original order."""
    check_split(split)
    return [item for item in items if split_of(key(item), weights) == split]
