"""Issue 16.11: every env loader reads JSONL through `read_jsonl`: a 100k-deep line, non-UTF-8 bytes and bad
JSON are clear `DataFileError`s naming the file and line, never a raw RecursionError or UnicodeDecodeError.
SWE refuses a directory that is not a repository it can use (`repo_dir=/etc`)."""

import json

import pytest

import rlgym_llm
from rlgym_llm.core.errors import ConfigError, DataFileError

DEEP = "[" * 100_000 + "]" * 100_000
BAD_LINES = {
    "deep": (DEEP, "JSON nested too deeply to parse"),
    "latin-1": (b'{"question": "caf\xe9"}', "not UTF-8 text"),
    "malformed": ('{"question": ', "not valid JSON"),
}


def _good_row(env):
    return {
        "math": {"question": "What is 1 + 1?", "answer": "2"},
        "code": {
            "id": "double",
            "prompt": "Return twice x.",
            "kind": "function",
            "entry_point": "double",
            "tests": [{"input": [1], "output": 2}],
            "solution": "def double(x):\n    return 2 * x\n",
        },
        "search_qa": {"question": "Where?", "answers": ["Rinca"]},
    }[env]


def _file(tmp_path, name, good, bad):
    path = tmp_path / name
    bad_bytes = bad if isinstance(bad, bytes) else bad.encode()
    path.write_bytes(json.dumps(good).encode() + b"\n" + bad_bytes + b"\n")
    return path


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_math_dataset(tmp_path, kind):
    bad, message = BAD_LINES[kind]
    path = _file(tmp_path, "math.jsonl", _good_row("math"), bad)
    with pytest.raises(DataFileError, match=f"math.jsonl:2: {message}"):
        rlgym_llm.make("rlgym/Math-v0", dataset=str(path))


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_code_tasks(tmp_path, kind):
    bad, message = BAD_LINES[kind]
    path = _file(tmp_path, "code.jsonl", _good_row("code"), bad)
    with pytest.raises(DataFileError, match=f"code.jsonl:2: {message}"):
        rlgym_llm.make("rlgym/Code-v0", tasks=str(path))


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_search_corpus_and_qa(tmp_path, kind):
    bad, message = BAD_LINES[kind]
    corpus = _file(tmp_path, "corpus.jsonl", {"id": "k1", "title": "K", "text": "Komodo lives on Rinca."}, bad)
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps(_good_row("search_qa")) + "\n")
    with pytest.raises(DataFileError, match=f"corpus.jsonl:2: {message}"):
        rlgym_llm.make("rlgym/Search-v0", corpus_path=str(corpus), qa_path=str(qa), cache_dir=False)
    good_corpus = tmp_path / "good.jsonl"
    good_corpus.write_text(json.dumps({"id": "k1", "title": "K", "text": "Komodo lives on Rinca."}) + "\n")
    bad_qa = _file(tmp_path, "qa_bad.jsonl", _good_row("search_qa"), bad)
    with pytest.raises(DataFileError, match=f"qa_bad.jsonl:2: {message}"):
        rlgym_llm.make("rlgym/Search-v0", corpus_path=str(good_corpus), qa_path=str(bad_qa), cache_dir=False)


@pytest.fixture(scope="module")
def swe_dataset(tmp_path_factory):
    from dataclasses import replace

    from rlgym_envs.swe.instances import builtin_instances
    from rlgym_envs.swe.swebench import export_jsonl

    # The row carries its own split, so the control loads it into the default (train) env.
    return export_jsonl([replace(builtin_instances()[0], split="train")], tmp_path_factory.mktemp("swe"))


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_swe_dataset(tmp_path, swe_dataset, kind):
    bad, message = BAD_LINES[kind]
    row = json.loads(swe_dataset.read_text().splitlines()[0])
    row["repo_dir"] = str(swe_dataset.parent / row["repo_dir"])
    path = _file(tmp_path, "swe.jsonl", row, bad)
    with pytest.raises(DataFileError, match=f"swe.jsonl:2: {message}"):
        rlgym_llm.make("rlgym/SWE-v0", dataset=str(path))


@pytest.mark.parametrize(
    ("repo_dir", "message"),
    [
        ("/etc", "is a system directory"),
        ("/proc/self", "is a system directory"),
        ("EMPTY", "holds no Python source file"),
        ("OTHER", "test files .* are not in"),
    ],
)
def test_swe_refuses_a_directory_that_is_not_its_repository(tmp_path, swe_dataset, repo_dir, message):
    row = json.loads(swe_dataset.read_text().splitlines()[0])
    if repo_dir == "EMPTY":
        (tmp_path / "notes").mkdir()
        (tmp_path / "notes" / "README.txt").write_text("not code\n")
        repo_dir = str(tmp_path / "notes")
    elif repo_dir == "OTHER":
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "mod.py").write_text("x = 1\n")
        repo_dir = str(tmp_path / "lib")
        row.pop("patch", None), row.pop("test_patch", None)  # the gold patch would fail first, on its own message
    row["repo_dir"] = repo_dir
    path = tmp_path / "swe.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ConfigError, match=message):
        rlgym_llm.make("rlgym/SWE-v0", dataset=str(path))
    # control: the exported repository itself loads
    row["repo_dir"] = str(swe_dataset.parent / json.loads(swe_dataset.read_text().splitlines()[0])["repo_dir"])
    path.write_text(json.dumps(row) + "\n")
    assert rlgym_llm.make("rlgym/SWE-v0", dataset=str(path)).unwrapped.instances
