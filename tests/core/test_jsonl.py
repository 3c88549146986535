"""One JSONL reader for every env's data files: each bad input is a DataFileError naming the file and line."""

import json

import pytest

from rlgym_llm.core.errors import DataFileError
from rlgym_llm.core.jsonl import MAX_DEPTH, read_jsonl

DEEP = "[" * 100_000 + "]" * 100_000


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def test_rows_come_with_their_line_numbers_blank_lines_and_bom_skipped(tmp_path):
    path = write(tmp_path, "ok.jsonl", '\ufeff{"a": 1}\n\n  \r\n[1, [2]]\r\n"x"')
    assert read_jsonl(path) == [(1, {"a": 1}), (4, [1, [2]]), (5, "x")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"a": 1}\n' + DEEP + "\n", r"deep\.jsonl:2: JSON nested too deeply to parse"),
        ('{"a": 1}\n' + "[" * 200 + "]" * 200, rf"deep\.jsonl:2: JSON nested more than {MAX_DEPTH} levels"),
        (b'{"a": 1}\n{"q": "caf\xe9"}\n', r"deep\.jsonl:2: not UTF-8 text \(byte 0xe9"),
        ('{"a": 1}\n\n{"a": }\n', r"deep\.jsonl:3: not valid JSON \(Expecting value at column 7\)"),
    ],
    ids=["100k-deep", "200-deep", "latin-1", "malformed"],
)
def test_bad_lines_name_file_and_line(tmp_path, content, message):
    with pytest.raises(DataFileError, match=message):
        read_jsonl(write(tmp_path, "deep.jsonl", content))


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(DataFileError, match="no such file"):
        read_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(DataFileError, match="cannot be read"):
        read_jsonl(tmp_path)


def test_max_depth_is_a_parameter(tmp_path):
    path = write(tmp_path, "d.jsonl", json.dumps({"a": {"b": [1]}}))
    assert read_jsonl(path, max_depth=3)
    with pytest.raises(DataFileError, match="more than 2 levels"):
        read_jsonl(path, max_depth=2)
