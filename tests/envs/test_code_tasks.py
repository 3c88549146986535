"""Code task files: the shipped set, the JSONL loader (round trip, fix-it errors), prompts and judging rules."""

import json

import pytest

from rlgym_envs.code.grading import normalize_output, same
from rlgym_envs.code.tasks import TaskFileError, dump_specs, load_specs, load_tasks, render_prompt


def test_the_shipped_set_has_40_plus_tasks_of_both_kinds_and_all_levels():
    specs = load_specs("builtin")
    assert len(specs) >= 40
    assert {s.kind for s in specs} == {"function", "stdio"}
    assert {s.difficulty for s in specs} == {1, 2, 3}
    assert all(s.solution and s.tests and s.examples for s in specs)
    assert len({s.id for s in specs}) == len(specs)


def test_round_trip_through_a_task_file(tmp_path):
    specs = load_specs("builtin")[:5] + load_specs("builtin")[-3:]
    path = tmp_path / "mine.jsonl"
    dump_specs(specs, path)
    assert load_specs(path) == specs
    tasks = load_tasks(path)
    assert [t.id for t in tasks] == [s.id for s in specs]
    assert tasks[0].meta["source"] == "mine.jsonl"


def test_a_minimal_user_task_loads(tmp_path):
    path = tmp_path / "t.jsonl"
    lines = [
        {
            "id": "add",
            "kind": "function",
            "entry_point": "add",
            "prompt": "Add.",
            "tests": [{"args": [1, 2], "expected": 3}],
        },
        {"id": "cat", "kind": "stdio", "prompt": "Echo.", "tests": [{"input": "x\n", "output": "x\n"}]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    a, b = load_specs(path)
    assert (a.difficulty, a.compare, a.timeout_s, a.examples, a.solution) == (1, "exact", 2.0, [], None)
    assert b.tests[0].output == "x\n"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"id": "x", "kind": "function", "prompt": "p", "tests": [{"args": [1], "expected": 1}]}', "entry_point"),
        ('{"id": "x", "kind": "sql", "prompt": "p", "tests": [{"input": "", "output": ""}]}', "kind"),
        ('{"id": "x", "kind": "stdio", "prompt": "p", "tests": []}', "tests"),
        ('{"id": "x", "kind": "stdio", "prompt": "p", "tests": [{"args": [1], "expected": 2}]}', "output"),
        ('{"id": "x", "kind": "function", "entry_point": "f", "prompt": "p", "tests": [{"args": [1]}]}', "expected"),
        ('{"id": "x y", "kind": "stdio", "prompt": "p", "tests": [{"output": ""}]}', "id"),
        ('{"id": "x", "kind": "stdio", "prompt": "p", "tests": [{"output": ""}], "colour": 1}', "colour"),
        ('{"id": "ok", "kind": "stdio", "prompt": "p", "tests": [{"output": ""}]}', "already used on line 1"),
    ],
)
def test_malformed_lines_are_named_with_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    first = '{"id": "ok", "kind": "stdio", "prompt": "p", "tests": [{"output": ""}]}'
    path.write_text(first + "\n" + line + "\n")
    with pytest.raises(TaskFileError, match=r"bad\.jsonl:2") as err:
        load_specs(path)
    assert message in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TaskFileError, match="does not exist"):
        load_specs(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TaskFileError, match="no tasks"):
        load_specs(tmp_path / "empty.jsonl")


def test_prompts_show_examples_but_no_hidden_test_or_solution():
    for spec, task in zip(load_specs("builtin"), load_tasks("builtin")):
        assert task.prompt == render_prompt(spec)
        assert spec.solution not in task.prompt
        assert task.answer == spec.solution
        assert len(task.hidden["tests"]) == len(spec.tests)
        if spec.kind == "function":
            assert spec.entry_point in task.prompt
            assert "Examples:" in task.prompt
        else:
            assert spec.examples[0].input in task.prompt


def test_same_is_strict_about_types_and_tolerant_where_asked():
    assert same([1, {"a": 2.0}], [1, {"a": 2}])
    assert not same(True, 1) and not same(1, True) and not same(0, False)
    assert not same("1", 1) and not same(None, 0) and not same([1, 2], [2, 1])
    assert not same({"a": 1}, {"a": 1, "b": 2})
    assert same(0.1 + 0.2, 0.3, "float") and not same(0.1 + 0.2, 0.3)
    assert not same(1.0, 1.1, "float")
    assert same([[1], "b", 3], [3, "b", [1]], "unordered")
    assert not same([1, 1, 2], [1, 2, 2], "unordered")


def test_printed_output_ignores_trailing_whitespace_only():
    assert normalize_output("1 2  \n3\n\n\n") == normalize_output("1 2\n3")
    assert normalize_output(" 1") != normalize_output("1")
    assert normalize_output("1\n\n2") != normalize_output("1\n2")
