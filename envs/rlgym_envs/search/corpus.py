"""Documents and QA items: records, JSONL loaders for a user's own corpus, answer scoring and corpus hashing.

Corpus JSONL, one document a line:  `{"id": "d1", "title": "Varo Keltin", "text": "..."}`
QA JSONL, one question a line:      `{"question": "...", "answers": ["..."], "gold_docs": ["d1"]}`
(`gold_docs` is optional; without it an episode reports no sub-goals. `split`, also optional, puts the
question in the `train`, `val` or `test` pool; see `SearchEnv`.)

Answers are scored SQuAD-style: lowercase, drop punctuation and the articles a/an/the, collapse whitespace;
`exact_match` compares the normalised strings and `token_f1` their bags of tokens.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pydantic

from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.jsonl import read_jsonl
from rlgym_llm.core.records import read_records
from rlgym_llm.core.splits import SPLITS


@dataclass(frozen=True)
class Document:
    """One retrievable document."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class QAItem:
    """One question with its gold answers and, optionally, the ids of the documents that support it and
    the content split the data set puts it in."""

    question: str
    answers: tuple[str, ...]
    gold_docs: tuple[str, ...] = ()
    split: str | None = None


class _DocumentRow(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    id: str = pydantic.Field(min_length=1)
    title: str = ""
    text: str


class _QARow(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    question: str = pydantic.Field(min_length=1)
    answers: list[str] = pydantic.Field(min_length=1)
    gold_docs: list[str] = []
    split: str | None = None

    @pydantic.field_validator("split")
    @classmethod
    def _split_is_a_split(cls, split: str | None) -> str | None:
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)} or absent, got {split!r}")
        return split

    @pydantic.field_validator("answers")
    @classmethod
    def _answers_are_scorable(cls, answers: list[str]) -> list[str]:
        # An answer that normalises to "" (e.g. "The") would be matched by any stop-word reply.
        empty = [a for a in answers if not normalize_answer(a)]
        if empty:
            raise ValueError(
                f"gold answer(s) {empty[:3]} normalise to the empty string (lowercased, punctuation and the "
                "articles a/an/the dropped), so any such reply would match; give answers with content words"
            )
        return answers


def _rows(
    path: str | os.PathLike[str],
    model: type[pydantic.BaseModel],
    fields: Mapping[str, str] | None = None,
    dataset_split: str | None = None,
) -> list[pydantic.BaseModel]:
    """Parse a data set (JSONL, Parquet or a `datasets` folder, columns renamed by `fields`), listing
    every bad row in one error (a user's file is a trust boundary)."""
    rows: list[pydantic.BaseModel] = []
    problems: list[str] = []
    records = (
        read_jsonl(path, problems=problems)
        if not fields and not dataset_split and str(path).endswith(".jsonl")
        else read_records(path, fields, dataset_split)
    )
    for lineno, value in records:
        try:
            rows.append(model.model_validate(value))
        except pydantic.ValidationError as e:
            problems.append(f"{path}:{lineno}: {'; '.join(err['msg'] for err in e.errors())}")
    if problems:
        shown = "\n".join(problems[:10])
        raise DataFileError(f"{len(problems)} bad line(s) in {path}:\n{shown}")
    if not rows:
        raise DataFileError(f"{path} holds no rows; expected one JSON object per line")
    return rows


def load_corpus(
    path: str | os.PathLike[str], fields: Mapping[str, str] | None = None, dataset_split: str | None = None
) -> tuple[Document, ...]:
    """Load documents (`{"id", "title", "text"}` rows) from JSONL, Parquet or a `datasets` folder;
    `fields` maps a field to the data set's column.

    Raises:
        ValueError: a line is not a valid document, or two documents share an id.
    """
    rows = _rows(path, _DocumentRow, fields, dataset_split)
    docs = tuple(Document(id=r.id, title=r.title, text=r.text) for r in rows)  # type: ignore[attr-defined]
    dupes = sorted(i for i, n in collections.Counter(d.id for d in docs).items() if n > 1)
    if dupes:
        raise ValueError(f"{path}: duplicate document ids {dupes[:5]}; ids must be unique")
    return docs


def load_qa(
    path: str | os.PathLike[str],
    doc_ids: Iterable[str] | None = None,
    fields: Mapping[str, str] | None = None,
    dataset_split: str | None = None,
) -> tuple[QAItem, ...]:
    """Load questions (`{"question", "answers": [...], "gold_docs": [...], "split"?}` rows) from JSONL,
    Parquet or a `datasets` folder; `fields` maps a field to the data set's column.

    Args:
        path: the JSONL file.
        doc_ids: if given, every `gold_docs` id must be one of these.
        fields: the data set's column for each field.
        dataset_split: the split of a `datasets` folder that holds several (not the content split: that
            is the rows' own `split` column).

    Raises:
        ValueError: a line is invalid or names an unknown gold document.
    """
    items = tuple(
        QAItem(question=r.question, answers=tuple(r.answers), gold_docs=tuple(r.gold_docs), split=r.split)  # type: ignore[attr-defined]
        for r in _rows(path, _QARow, fields, dataset_split)
    )
    if doc_ids is not None:
        known = set(doc_ids)
        unknown = sorted({g for it in items for g in it.gold_docs if g not in known})
        if unknown:
            raise ValueError(f"{path}: gold_docs name documents not in the corpus: {unknown[:5]}")
    return items


def corpus_hash(docs: Sequence[Document], salt: str = "") -> str:
    """A content hash of the corpus (order included), used as the key of the index caches."""
    h = hashlib.sha256(salt.encode())
    for d in docs:
        h.update(json.dumps([d.id, d.title, d.text], ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()[:20]


# --- answer scoring (SQuAD v1.1 normalisation) ------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, strip punctuation and articles, collapse whitespace (SQuAD's normalisation)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0 (always 0.0 for a
    prediction that normalises to the empty string: "the" or "." answers nothing)."""
    pred = normalize_answer(prediction)
    return float(bool(pred) and any(pred == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """The best token-level F1 of the prediction against any gold answer."""
    pred = normalize_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold = normalize_answer(answer).split()
        common = sum((collections.Counter(pred) & collections.Counter(gold)).values())
        if common == 0:  # also an empty reply, or a gold answer of stop words only: nothing to score
            score = 0.0
        else:
            precision, recall = common / len(pred), common / len(gold)
            score = 2 * precision * recall / (precision + recall)
        best = max(best, score)
    return best
