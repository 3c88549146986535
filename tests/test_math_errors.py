"""benchmarks/learning/math_errors.py sorts a Math-v0 episode by its first mistake."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def errors(monkeypatch):
    spec = importlib.util.spec_from_file_location("math_errors", ROOT / "benchmarks/learning/math_errors.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "math_errors", module)
    spec.loader.exec_module(module)
    return module


def episode(question, expr, result, answer, reward, parse_error=False):
    turns = [
        {
            "action": {"tool_calls": [{"name": "calculator", "arguments": {"expression": expr}}], "parse_errors": []},
            "observation": [{"role": "tool", "name": "calculator", "content": result}],
        },
        {
            "action": {
                "tool_calls": [] if parse_error else [{"name": "submit_answer", "arguments": {"answer": answer}}],
                "parse_errors": ["not closed"] if parse_error else [],
            },
            "observation": [],
        },
    ]
    return {
        "opening": [{"role": "user", "content": f"Compute {question}."}],
        "turns": turns,
        "outcome": {"reward": reward},
    }


def test_each_kind_of_first_mistake(errors, tmp_path):
    cases = {
        "success": episode("4 + 3", "4 + 3", "7", "7", 1.0),
        "operator": episode("4 + 3", "4 - 3", "1", "1", 0.0),
        "operand": episode("4 + 3", "4 + 2", "6", "6", 0.0),
        "answer": episode("5 - 1", "5 - 1", "4", "3", 0.0),
        "format": episode("5 - 1", "5 - 1", "4", None, 0.0, parse_error=True),
    }
    for kind, ep in cases.items():
        assert errors.classify(ep)[0] == kind
    path = tmp_path / "trajectories.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in cases.values()))
    s = errors.summarize(path)
    assert s["episodes"] == 5 and all(n == 1 for n in s["kinds"].values())
    assert s["modes"]["Compute 4 + 3."].most_common(1)[0][1] == 1
