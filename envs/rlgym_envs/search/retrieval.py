"""The Search env's retrievers behind one call: `get_retriever(docs, "bm25" | "dense" | "hybrid")`.

BM25 lives in `index.py`, the optional sentence-embedding and fused retrievers in `dense.py` (which builds
on BM25); this module depends on both, and neither on it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from rlgym_envs.search.corpus import Document
from rlgym_envs.search.index import get_index

RETRIEVERS = ("bm25", "dense", "hybrid")


class Retriever(Protocol):
    """What the Search env needs of an index: its documents and a ranked search."""

    docs: tuple[Document, ...]

    def search(self, query: str, k: int) -> list[tuple[Document, float]]: ...


def get_retriever(
    docs: Sequence[Document], kind: str = "bm25", cache_dir: str | os.PathLike[str] | bool | None = None
) -> Retriever:
    """The shared retriever of `kind` over `docs`: `"bm25"`, `"dense"` or `"hybrid"` (BM25 and dense fused).

    Raises:
        ValueError: `kind` is not one of `RETRIEVERS`.
        MissingDependencyError: `"dense"` or `"hybrid"` without the `dense` extra installed.
    """
    if kind == "bm25":
        return get_index(docs, cache_dir)
    if kind not in RETRIEVERS:
        raise ValueError(f"retriever must be one of {RETRIEVERS}, got {kind!r}")
    from rlgym_envs.search import dense  # imports no torch until an encoder is built

    return dense.get_dense_index(docs, cache_dir) if kind == "dense" else dense.get_hybrid_index(docs, cache_dir)
