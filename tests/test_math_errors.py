"""benchmarks/learning/math_errors.py sorts a Math-v0 episode by its first mistake."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def errors(load_benchmark):
    return load_benchmark("math_errors")


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


def recheck(question):
    """The calculator called on every turn, nothing submitted (the turns ran out)."""
    call = {"tool_calls": [{"name": "calculator", "arguments": {"expression": question}}], "parse_errors": []}
    turn = {"action": call, "observation": [{"role": "tool", "name": "calculator", "content": "4"}]}
    return {
        "opening": [{"role": "user", "content": f"Compute {question}."}],
        "turns": [turn] * 3,
        "outcome": {"reward": 0.0},
    }


def guess(question, answer):
    """An answer submitted on the first turn, without the calculator."""
    call = {"tool_calls": [{"name": "submit_answer", "arguments": {"answer": answer}}], "parse_errors": []}
    turns = [{"action": call, "observation": []}]
    return {
        "opening": [{"role": "user", "content": f"Compute {question}."}],
        "turns": turns,
        "outcome": {"reward": 0.0},
    }


def test_a_single_unanswered_calculator_call_is_still_a_format_failure(errors):
    one = recheck("5 - 1")
    one["turns"] = one["turns"][:1]
    assert errors.classify(one)[0] == "format"


def test_each_kind_of_first_mistake(errors, tmp_path):
    cases = {
        "success": episode("4 + 3", "4 + 3", "7", "7", 1.0),
        "operator": episode("4 + 3", "4 - 3", "1", "1", 0.0),
        "operand": episode("4 + 3", "4 + 2", "6", "6", 0.0),
        "answer": episode("5 - 1", "5 - 1", "4", "3", 0.0),
        "format": episode("5 - 1", "5 - 1", "4", None, 0.0, parse_error=True),
        "recheck": recheck("5 - 1"),
        "guess": guess("4 + 3", "8"),
    }
    for kind, ep in cases.items():
        assert errors.classify(ep)[0] == kind
    path = tmp_path / "trajectories.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in cases.values()))
    s = errors.summarize(path)
    assert s["episodes"] == 7 and all(n == 1 for n in s["kinds"].values())
    assert s["modes"]["Compute 4 + 3."].most_common(1)[0][1] == 1
