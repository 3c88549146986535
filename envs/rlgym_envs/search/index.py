"""A BM25 index over a corpus (`bm25s`), built once per corpus and cached on disk and in the process.

The disk cache lives under `cache_dir/<corpus hash>` (default `~/.cache/rlgym_llm/search/`, or
`$XDG_CACHE_HOME/rlgym_llm/search/`), keyed by a hash of the corpus content and the tokenizer, so an edited
corpus never reads a stale index. The in-process cache means the G envs of a GRPO group share one index.
`bm25s` is imported lazily: `import rlgym_envs` must stay light. `retrieval.get_retriever` picks between
this index and the dense and hybrid ones of `dense.py`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlgym_envs.search.corpus import Document, corpus_hash
from rlgym_llm import MissingDependencyError

logger = logging.getLogger(__name__)

# Bump when tokenization or BM25 parameters change: it is part of the cache key.
_INDEX_VERSION = "bm25s-lucene-k1.5-b.75-tok1"
_TOKEN = re.compile(r"\w+")
_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "for", "from", "has", "have", "he"}
    | {"her", "his", "how", "in", "is", "it", "its", "of", "on", "or", "she", "that", "the", "their", "they"}
    | {"this", "to", "was", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "with"}
)


_loaded: dict[str, BM25Index] = {}
_lock = threading.Lock()


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without English stop words (no stemming: names must match exactly)."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/rlgym_llm/search`, falling back to `~/.cache/rlgym_llm/search`."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "rlgym_llm" / "search"


def _bm25s() -> Any:
    try:
        import bm25s
    except ImportError:
        raise MissingDependencyError("bm25s", "search", "rlgym/Search-v0") from None
    return bm25s


class BM25Index:
    """BM25 retrieval over `docs` (title and text). Use `get_index` to share and cache instances.

    Args:
        docs: the corpus.
        cache_dir: where to keep the built index; `None` for the default, `False` for no disk cache.
    """

    def __init__(self, docs: Sequence[Document], cache_dir: str | os.PathLike[str] | bool | None = None):
        self.docs = tuple(docs)
        if not self.docs:
            raise ValueError("cannot index an empty corpus")
        self.key = corpus_hash(self.docs, salt=_INDEX_VERSION)
        bm25s = _bm25s()
        if cache_dir is False:
            target = None
        elif cache_dir is None or cache_dir is True:
            target = default_cache_dir() / self.key
        else:
            target = Path(cache_dir) / self.key
        if target is not None and (target / "params.index.json").exists():
            self.retriever = bm25s.BM25.load(str(target), show_progress=False)
            self.source = "disk"
            logger.debug("loaded BM25 index %s from %s", self.key, target)
            return
        self.retriever = bm25s.BM25()
        self.retriever.index([tokenize(f"{d.title} {d.text}") for d in self.docs], show_progress=False)
        self.source = "built"
        logger.info("built BM25 index %s over %d documents", self.key, len(self.docs))
        if target is not None:
            self._save(target)

    def _save(self, target: Path) -> None:
        # Write to a private temp dir, then rename: concurrent builders never see a half-written index.
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{self.key}-", dir=target.parent))
        try:
            self.retriever.save(str(tmp), show_progress=False)
            os.replace(tmp, target)
        except OSError as e:  # another process won the race (target exists), or the disk is read-only
            logger.debug("did not cache BM25 index at %s: %s", target, e)
            shutil.rmtree(tmp, ignore_errors=True)

    def search(self, query: str, k: int) -> list[tuple[Document, float]]:
        """The up to `k` best documents for `query` with their scores; documents sharing no term are left out."""
        tokens = tokenize(query)
        k = min(k, len(self.docs))
        if not tokens or k < 1:
            return []
        ids, scores = self.retriever.retrieve([tokens], k=k, show_progress=False, n_threads=1)
        return [(self.docs[int(i)], float(s)) for i, s in zip(ids[0], scores[0]) if s > 0]


def get_index(docs: Sequence[Document], cache_dir: str | os.PathLike[str] | bool | None = None) -> BM25Index:
    """The index of `docs`, shared by every env of the process that uses the same corpus."""
    key = corpus_hash(docs, salt=_INDEX_VERSION)
    with _lock:
        index = _loaded.get(key)
        if index is None:
            index = _loaded[key] = BM25Index(docs, cache_dir)
        return index
