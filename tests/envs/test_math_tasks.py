"""Math task generator and JSONL dataset loader."""

import json

import numpy as np
import pytest

from rlgym_envs.math.calculator import evaluate
from rlgym_envs.math.tasks import DIFFICULTIES, EASY_LEVEL, EASY_MAX, KINDS, DatasetError, generate_task, load_dataset


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("level", DIFFICULTIES)
def test_generated_tasks_are_consistent(kind, level):
    rng = np.random.default_rng(level)
    for _ in range(40):
        task = generate_task(rng, [kind], [level])
        assert task.meta["kind"] == kind and task.meta["difficulty"] == level
        assert task.id.startswith(f"math-{kind}-d{level}-")
        assert str(evaluate(task.meta["expression"])) == task.answer
        assert len(task.answer) < 3 or task.answer not in task.prompt  # the question never gives it away


def test_level_0_is_one_plus_or_minus_of_two_small_operands():
    # the tier of configs/env/math.yaml, as docs/math_env.md describes it
    rng = np.random.default_rng(0)
    tasks = [generate_task(rng, ["arithmetic"], [EASY_LEVEL]) for _ in range(5_000)]
    seen = set()
    for task in tasks:
        a, op, b = task.meta["expression"].split()
        assert task.prompt == f"Compute {a} {op} {b}." and task.meta["difficulty"] == 0
        assert op in ("+", "-") and 1 <= int(a) <= EASY_MAX and 1 <= int(b) <= EASY_MAX
        assert int(task.answer) == (int(a) + int(b) if op == "+" else int(a) - int(b))
        seen.add((int(a), op, int(b)))
    assert EASY_MAX == 99 and len(seen) > 4000  # 19,602 questions: few repeat in 5,000 draws
    assert {a for a, _, _ in seen} == set(range(1, EASY_MAX + 1))  # every operand turns up


def test_linear_meta_holds_the_equation_coefficients():
    task = generate_task(np.random.default_rng(0), ["linear"], [3])
    a, b, c, d = (task.meta[k] for k in "abcd")
    x = evaluate(task.answer)
    assert a * x + b == c * x + d


def test_same_seed_same_task_and_different_seeds_vary():
    def draw(seed):
        return generate_task(np.random.default_rng(seed), KINDS, DIFFICULTIES)

    assert draw(7) == draw(7)
    assert len({draw(seed).id for seed in range(30)}) >= 25


def test_sample_dataset_loads():
    tasks = load_dataset("sample")
    assert len(tasks) >= 20
    assert all(t.prompt and t.answer for t in tasks)
    assert tasks[0].id == "sample-01" and tasks[0].meta["line"] == 1
    assert len({t.id for t in tasks}) == len(tasks)


def test_tmp_dataset_loads_with_numbers_and_blank_lines(tmp_path):
    path = tmp_path / "mine.jsonl"
    lines = [{"question": "1+1?", "answer": 2}, {"question": "Half?", "answer": 0.5, "extra": "ignored"}]
    path.write_text("\n".join(json.dumps(x) for x in lines[:1]) + "\n\n" + json.dumps(lines[1]) + "\n")
    tasks = load_dataset(path)
    assert [t.answer for t in tasks] == ["2", "0.5"]
    assert [t.id for t in tasks] == ["mine-0", "mine-1"]
    assert tasks[1].meta["line"] == 3


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ('{"question": "x?", "answer": ', "not valid JSON"),
        ('{"question": "x?"}', "answer"),
        ('{"question": "", "answer": "1"}', "question"),
        ('{"question": "x?", "answer": "   "}', "blank"),
        ('["x?", "1"]', "expected an object"),
    ],
)
def test_bad_line_is_named_in_the_error(tmp_path, bad_line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "ok?", "answer": "1"}\n' + bad_line + "\n")
    with pytest.raises(DatasetError, match=message) as err:
        load_dataset(path)
    assert f"{path}:2:" in str(err.value)


def test_missing_or_empty_dataset(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DatasetError, match="no records"):
        load_dataset(tmp_path / "empty.jsonl")


def test_dataset_cache_sees_an_edited_file(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "1 + 1?", "answer": 2}\n')
    first = load_dataset(path)
    assert load_dataset(path) == first and load_dataset(path) is not first  # cached, but a fresh list
    path.write_text('{"question": "1 + 1?", "answer": 2}\n{"question": "2 + 3?", "answer": 5}\n')
    assert [t.answer for t in load_dataset(path)] == ["2", "5"]
