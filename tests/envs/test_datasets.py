"""`dataset=` as people have them: JSONL, Parquet and Hugging Face `datasets` folders, with a field
mapping (`rlgym_llm.core.records`), for Math-v0 and through `rlgym train`'s env kwargs."""

import json

import pytest

from rlgym_llm.core.errors import ConfigError, DataFileError
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
    mapping = "env.fields={question: problem, answer: solution}"
    cfg = load_config("train", ["env=math", f"env.dataset={path}", mapping])
    env = parts.env_factory(cfg.env, cfg.sandbox)()
    messages, _ = env.reset(seed=3)
    assert any(r["problem"] in messages[-1]["content"] for r in ROWS)
    with pytest.raises(ConfigError, match="takes no data set"):
        load_config("train", ["env=counter", f"env.dataset={path}"])  # the toy Counter reads no data set


def test_code_env_reads_its_task_file_from_a_datasets_folder_with_a_mapping(tmp_path):
    import rlgym_llm
    from rlgym_envs.code.tasks import BUILTIN, load_specs, resolve_tasks

    datasets = pytest.importorskip("datasets")
    # stdio tasks: their tests are string pairs, which Arrow stores (function tasks mix argument types)
    rows = [r for r in map(json.loads, resolve_tasks(BUILTIN).read_text().splitlines()) if r.get("kind") == "stdio"][:3]
    renamed = [{("text" if k == "prompt" else k): v for k, v in r.items()} for r in rows]
    folder = tmp_path / "code_tasks"
    datasets.Dataset.from_list(renamed).save_to_disk(str(folder))
    specs = load_specs(folder, fields={"prompt": "text"})
    assert [s.id for s in specs] == [r["id"] for r in rows]
    env = rlgym_llm.make("rlgym/Code-v0", tasks=str(folder), fields={"prompt": "text"})
    messages, _ = env.reset(seed=0, options={"task_index": 0})
    assert rows[0]["prompt"].strip()[:40] in messages[-1]["content"]
    env.close()


def test_search_env_reads_parquet_corpus_and_qa_with_mappings(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import rlgym_llm

    docs = [
        {"doc": "d1", "title": "Paris", "body": "Paris is the capital of France."},
        {"doc": "d2", "title": "Rome", "body": "Rome is the capital of Italy."},
    ]
    qa = [{"q": "What is the capital of France?", "answers": ["Paris"], "gold_docs": ["d1"]}]
    pq.write_table(pa.Table.from_pylist(docs), tmp_path / "corpus.parquet")
    pq.write_table(pa.Table.from_pylist(qa), tmp_path / "qa.parquet")
    env = rlgym_llm.make(
        "rlgym/Search-v0",
        corpus_path=str(tmp_path / "corpus.parquet"),
        qa_path=str(tmp_path / "qa.parquet"),
        corpus_fields={"id": "doc", "text": "body"},
        fields={"question": "q"},
    )
    messages, _ = env.reset(seed=0)
    assert "capital of France" in messages[-1]["content"]
    env.close()
