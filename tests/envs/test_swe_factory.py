"""The SWE-v0 task factory: AST mutations, problem statements, a real build (slow), the shipped set's rows."""

import ast
import json

import pytest

from rlgym_envs.swe.env import BUILT_SET
from rlgym_envs.swe.factory import _failure_excerpts, build_project, licenses_text, parse_per_project
from rlgym_envs.swe.mutations import mutations
from rlgym_envs.swe.patches import apply_patch, make_patch
from rlgym_envs.swe.sources import PROJECTS

SOURCE = '''"""A module."""


def clamp(x, lo, hi):
    """Clamp x into [lo, hi]."""
    if x < lo:
        return lo
    if not x <= hi:
        return hi
    return x + 0


class Box:
    @staticmethod
    def area(w, h, unit=True):
        """Area of a box."""
        ok = (w > 0 and h > 0) is True
        return pow(w, h) if ok and unit else w * h // 1
'''


def test_every_operator_changes_one_site_of_one_function():
    found = mutations(SOURCE)
    kinds = {m.kind for m in found}
    assert kinds == {
        "comparison swap",
        "removed early return",
        "dropped negation",
        "arithmetic swap",
        "off-by-one",
        "boolean operator swap",
        "changed constant",
        "swapped arguments",
    }
    assert {m.function for m in found} == {"clamp", "Box.area"}
    assert next(m for m in found if m.function == "Box.area").lines == (14, 18)  # the decorator's line first
    for m in found:
        buggy = m.apply(SOURCE)
        ast.parse(buggy)
        assert buggy != SOURCE
        changed = [n for n, (a, b) in enumerate(zip(SOURCE.splitlines(), buggy.splitlines(), strict=False)) if a != b]
        assert changed and changed[0] + 1 == m.line  # only the mutated expression's lines differ
        assert m.docstring in ("Clamp x into [lo, hi].", "Area of a box.")
        gold = make_patch({"m.py": buggy}, {"m.py": SOURCE})  # the gold patch is the inverse
        assert apply_patch({"m.py": buggy}, gold) == {"m.py": SOURCE}
    assert not any(m.line in (1, 5, 16) for m in found)  # docstrings are not mutated


def test_failure_excerpts_keep_test_lines_and_errors_not_library_frames():
    log = """..F
=================================== FAILURES ===================================
__________________________________ test_clamp __________________________________
tests/test_m.py:5: in test_clamp
    assert clamp(5, 0, 3) == 3
pkg/m.py:9: in clamp
    return hi + 1
E   AssertionError: assert 4 == 3 at 0x7f00deadbeef
=========================== short test summary info ============================
FAILED tests/test_m.py::test_clamp - AssertionError
"""
    excerpt = _failure_excerpts(log)["test_clamp"]
    assert "assert clamp(5, 0, 3) == 3" in excerpt and "E   AssertionError" in excerpt
    assert "return hi + 1" not in excerpt and "0x7f00deadbeef" not in excerpt


def test_licenses_are_listed_per_project():
    text = licenses_text(sorted(PROJECTS))
    for project in PROJECTS.values():
        assert f"| {project.name} | {project.version} | {project.license} |" in text


@pytest.mark.slow
@pytest.mark.timeout(900)  # on a fresh cache: fetch parse's sdist, run its suite twice, build twice
def test_a_real_build_is_deterministic_and_its_instances_hold():
    """Two instances from parse (its sdist is fetched by hash on first use): same seed, same rows."""
    first = build_project(PROJECTS["parse"], 2, seed=3)
    assert first == build_project(PROJECTS["parse"], 2, seed=3)
    for row in first:
        # PASS_TO_PASS: the other stable tests of the same files, empty when every test there fails
        assert 1 <= len(row["FAIL_TO_PASS"]) <= 20
        files = {t.split("::")[0] for t in row["FAIL_TO_PASS"]}
        assert all(t.split("::")[0] in files for t in row["PASS_TO_PASS"])
        assert not set(row["FAIL_TO_PASS"]) & set(row["PASS_TO_PASS"])


def _rows():
    if not BUILT_SET.exists():
        return []
    return [json.loads(line) for line in BUILT_SET.read_text().splitlines() if line.strip()]


@pytest.mark.skipif(not BUILT_SET.exists(), reason="no built set")
def test_the_shipped_set_has_100_instances_over_5_projects_in_swebench_layout():
    rows = _rows()
    assert len(rows) >= 100
    per_project = {}
    for row in rows:
        per_project[row["repo"]] = per_project.get(row["repo"], 0) + 1
        for key in ("instance_id", "repo", "version", "problem_statement", "patch", "FAIL_TO_PASS"):
            assert row[key], (row["instance_id"], key)
        assert isinstance(row["PASS_TO_PASS"], list)  # may be empty: the failing tests were their file's only ones
        assert 1 <= len(row["FAIL_TO_PASS"]) <= 20 and row["license"]
        project = next(p for p in PROJECTS.values() if p.repo == row["repo"])
        assert row["source"]["sha256"] == project.sha256 and row["version"] == project.version
        # The statement never shows the changed line.
        buggy = [
            line[1:].strip()
            for line in row["bug_patch"].splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        assert buggy and not any(len(b) > 12 and b in row["problem_statement"] for b in buggy), row["instance_id"]
    assert len(per_project) >= 5
    assert len({r["instance_id"] for r in rows}) == len(rows)
    assert (BUILT_SET.parent / "LICENSES.md").exists()


def test_per_project_counts_parse():
    assert parse_per_project("19") == (19, {})
    assert parse_per_project("19,boltons=26,toolz=3") == (19, {"boltons": 26, "toolz": 3})
    with pytest.raises(SystemExit, match="not N or project=N"):
        parse_per_project("19,boltons=many")
