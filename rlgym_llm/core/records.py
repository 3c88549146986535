"""Data sets as people have them: JSONL files, Parquet files and Hugging Face `datasets` folders
(`Dataset.save_to_disk`), read into rows with the env's field names.

    rows = read_records("gsm8k_test/", fields={"question": "question", "answer": "final"}, split="test")

`fields` maps the env's field to the data set's column (`{"question": "problem"}`: the column
`problem` becomes the field `question`; other columns keep their names). Every problem is a
`DataFileError` (or the env's subclass) naming the file and the row. Parquet needs `pyarrow`,
`datasets` folders the `datasets` package (`pip install 'rlgym-llm[data]'`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.jsonl import read_jsonl

FORMATS = "a JSONL file, a Parquet file or a Hugging Face datasets folder (save_to_disk)"


def read_records(
    path: str | os.PathLike[str],
    fields: Mapping[str, str] | None = None,
    split: str | None = None,
    *,
    error: type[DataFileError] = DataFileError,
) -> list[tuple[int, Any]]:
    """The `(row number, row)` of a data set, 1-based, with `fields` renamed (see the module docstring).

    Args:
        path: a `.jsonl` file, a `.parquet` file, or a folder written by `save_to_disk`.
        fields: env field -> data set column.
        split: the split of a `DatasetDict` folder (default: its only split, else `train`).
        error: the `DataFileError` subclass to raise.
    """
    source = Path(path).expanduser()
    if source.is_dir():
        rows = _datasets_folder(source, split, error)
    elif source.suffix == ".parquet":
        rows = _parquet(source, error)
    elif source.is_file() or source.suffix in (".jsonl", ".json"):
        rows = read_jsonl(source, error=error)
    else:
        raise error(f"{source}: no such file or folder; expected {FORMATS}")
    if not fields:
        return rows
    missing = {col for col in fields.values() if rows and isinstance(rows[0][1], dict) and col not in rows[0][1]}
    if missing:
        have = sorted(rows[0][1]) if isinstance(rows[0][1], dict) else []
        raise error(f"{source}: no column {sorted(missing)} for the field mapping {dict(fields)}; columns: {have}")
    renamed = {col: name for name, col in fields.items()}
    return [(n, {renamed.get(k, k): v for k, v in row.items()} if isinstance(row, dict) else row) for n, row in rows]


def _parquet(source: Path, error: type[DataFileError]) -> list[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise error(f"{source}: reading Parquet needs pyarrow: pip install 'rlgym-llm[data]'") from None
    try:
        table = pq.read_table(source)
    except Exception as e:  # pyarrow's errors for a bad file are many; the message is what matters
        raise error(f"{source}: not a readable Parquet file ({e})") from None
    return list(enumerate(table.to_pylist(), start=1))


def _datasets_folder(source: Path, split: str | None, error: type[DataFileError]) -> list[tuple[int, Any]]:
    if not ((source / "dataset_info.json").exists() or (source / "dataset_dict.json").exists()):
        raise error(f"{source}: a folder, but not one `datasets` wrote (save_to_disk); expected {FORMATS}")
    try:
        import datasets
    except ImportError:
        raise error(f"{source}: reading a datasets folder needs `datasets`: pip install 'rlgym-llm[data]'") from None
    loaded = datasets.load_from_disk(str(source))
    if isinstance(loaded, datasets.DatasetDict):
        names = list(loaded)
        chosen = split or (names[0] if len(names) == 1 else "train")
        if chosen not in loaded:
            raise error(f"{source}: no split {chosen!r}; splits: {names} (choose one with split=...)")
        loaded = loaded[chosen]
    return list(enumerate(loaded.to_list(), start=1))
