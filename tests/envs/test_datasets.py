"""`dataset=` as people have them: JSONL, Parquet and Hugging Face `datasets` folders, with a field
mapping (`rlgym_llm.core.records`), for Math-v0 and through `rlgym train`'s env kwargs."""

import json

import pytest

from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.records import read_records

ROWS = [
    {"problem": "What is 2 + 3?", "solution": "5", "src": "a"},
    {"problem": "What is 7 * 6?", "solution": "42", "src": "b"},
]
FIELDS = {"question": "problem", "answer": "solution"}


def _write_all(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    parquet = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), parquet)
    folder = tmp_path / "hf"
    datasets.DatasetDict({"test": datasets.Dataset.from_list(ROWS)}).save_to_disk(str(folder))
    single = tmp_path / "hf_single"
    datasets.Dataset.from_list(ROWS).save_to_disk(str(single))
    return {"jsonl": jsonl, "parquet": parquet, "datasets": folder, "datasets_single": single}


def test_every_format_reads_the_same_rows_with_the_mapping(tmp_path):
    paths = _write_all(tmp_path)
    expected = [
        (i, {"question": r["problem"], "answer": r["solution"], "src": r["src"]}) for i, r in enumerate(ROWS, 1)
    ]
    for name, path in paths.items():
        assert read_records(path, FIELDS) == expected, name
    with pytest.raises(DataFileError, match="no split 'train'"):
        read_records(paths["datasets"], FIELDS, split="train")
    with pytest.raises(DataFileError, match=r"no column \['prob'\]"):
        read_records(paths["parquet"], {"question": "prob"})
    with pytest.raises(DataFileError, match="not one `datasets` wrote"):
        read_records(tmp_path, FIELDS)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "datasets"])
def test_math_env_takes_each_format(tmp_path, fmt):
    import rlgym_llm

    path = _write_all(tmp_path)[fmt]
    env = rlgym_llm.make("rlgym/Math-v0", dataset=str(path), fields=FIELDS)
    messages, _ = env.reset(seed=0, options={"task_index": 1})
    assert "7 * 6" in messages[-1]["content"]
    assert env.unwrapped.task.answer == "42"
    env.close()


def test_rlgym_train_config_passes_the_dataset_to_math(tmp_path):
    from rlgym_llm.config import load_config
    from rlgym_llm.recipes import parts

    path = _write_all(tmp_path)["parquet"]
    cfg = load_config(
        "train", ["env=math", f"+env.kwargs.dataset={path}", "+env.kwargs.fields={question: problem, answer: solution}"]
    )
    env = parts.env_factory(cfg.env, cfg.sandbox)()
    messages, _ = env.reset(seed=3)
    assert any(r["problem"] in messages[-1]["content"] for r in ROWS)
