"""SWE instances: unified diffs, the shipped catalog checked with real pytest, the SWE-bench-style loader."""

import json
import random

import pytest

from rlgym_envs.swe.env import SWEEnv
from rlgym_envs.swe.grading import canary_test_files
from rlgym_envs.swe.harness import TestHarness
from rlgym_envs.swe.instances import Instance, builtin_instances, discover_test_ids, hide_fail_to_pass, is_test_path
from rlgym_envs.swe.patches import PatchError, apply_patch, make_patch, occurrences, replacement_edits
from rlgym_envs.swe.swebench import export_jsonl, load_instances
from rlgym_llm import AssistantTurn, ConfigError, ToolCall

# --- patches ----------------------------------------------------------------------------------


def _random_texts(rng):
    pool = ["x\n", "y\n", "def f():\n", "    return 1\n", "\n", "z = 2\n"]
    a = [rng.choice(pool) for _ in range(rng.randint(0, 12))]
    b = list(a)
    for _ in range(rng.randint(1, 3)):
        k = rng.randint(0, len(b))
        op = rng.random()
        if op < 0.4 and b:
            del b[min(k, len(b) - 1)]
        elif op < 0.7:
            b.insert(k, rng.choice(["x\n", "q\n", "y\n"]))
        elif b:
            b[min(k, len(b) - 1)] = "w\n"
    return "".join(a), "".join(b)


def test_patch_round_trip_and_edits_on_random_texts():
    rng = random.Random(0)
    for _ in range(500):
        old, new = _random_texts(rng)
        for before, after in ((old, new), (old.rstrip("\n"), new.rstrip("\n"))):
            if before == after:
                continue
            files = {"f.py": before, "keep.py": "k\n"}
            assert apply_patch(files, make_patch(files, {**files, "f.py": after})) == {**files, "f.py": after}
            text = before
            for old_str, new_str in replacement_edits(before, after):
                if old_str == "":
                    assert text == ""
                    text = new_str
                    continue
                assert len(occurrences(text, old_str)) == 1  # the env's edit tool would accept it
                text = text.replace(old_str, new_str, 1)
            assert text == after


def test_patch_creates_and_deletes_files_and_rejects_bad_context():
    diff = make_patch({"a.py": "x\n"}, {"b.py": "y\n"})
    assert apply_patch({"a.py": "x\n", "c.py": "c\n"}, diff) == {"b.py": "y\n", "c.py": "c\n"}
    with pytest.raises(PatchError, match="does not apply"):
        apply_patch({"a.py": "something else\n"}, make_patch({"a.py": "x\n"}, {"a.py": "z\n"}))
    with pytest.raises(PatchError, match="does not exist"):
        apply_patch({}, make_patch({"a.py": "x\n"}, {"a.py": "z\n"}))


def test_overlapping_occurrences_count():
    assert occurrences("x\nx\nx\n", "x\nx\n") == [0, 2]  # str.count would say 1


def test_test_paths_and_discovery():
    assert is_test_path("tests/test_a.py") and is_test_path("tests/__init__.py") and is_test_path("test_x.py")
    assert not is_test_path("pkg/testing_utils.py") and not is_test_path("pkg/core.py")
    source = (
        "import unittest\nclass TestA(unittest.TestCase):\n    def test_b(self): pass\n    def helper(self): pass\n"
    )
    source += "def test_c():\n    pass\nclass Helper:\n    def test_no(self): pass\n"
    assert discover_test_ids({"tests/test_m.py": source, "pkg/m.py": "def test_x(): pass\n"}) == [
        "tests/test_m.py::TestA::test_b",
        "tests/test_m.py::test_c",
    ]


# --- the shipped catalog, checked with real pytest ------------------------------------------------


@pytest.fixture(scope="module")
def harness():
    h = TestHarness("local")
    yield h
    h.close()


def _verdicts(harness, inst, files, *test_overlays):
    """One pytest run of every graded id per overlay of test files, on `files`' non-test part."""
    ids = list(inst.tests)
    request = {
        "root": "check",
        "fresh": True,
        "files": {p: t for p, t in files.items() if not is_test_path(p)},
        "python_path": list(inst.python_path),
        "runs": [{"files": overlay, "args": ["-q", "--tb=no", *ids]} for overlay in test_overlays],
    }
    verdicts = [run.verdict(ids) for run in harness.run(request)]
    assert all(v.complete and not v.duplicated for v in verdicts)
    return verdicts


def _check_instance(harness, inst):
    canary_files, canary_ids = canary_test_files(inst.test_files, inst.fail_to_pass)
    assert canary_ids, f"{inst.id}: no FAIL_TO_PASS test has a canary"
    (buggy,) = _verdicts(harness, inst, inst.files, inst.test_files)
    assert sorted(t for t in inst.tests if not buggy.passed(t)) == sorted(inst.fail_to_pass)
    fixed, canary = _verdicts(
        harness, inst, {**inst.files, **inst.gold_files}, inst.test_files, {**inst.test_files, **canary_files}
    )
    assert all(fixed.passed(t) for t in inst.tests), (inst.id, [t for t in inst.tests if not fixed.passed(t)][:5])
    assert not any(canary.passed(t) for t in canary_ids), f"{inst.id}: a canary passes under the gold fix"
    assert all(canary.passed(t) for t in inst.pass_to_pass)  # only the canaries differ


ONE_PER_REPO = sorted({i.repo: i.id for i in builtin_instances()}.values())


@pytest.mark.parametrize("instance_id", ONE_PER_REPO)
def test_instance_fails_exactly_fail_to_pass_and_gold_fixes_it(harness, instance_id):
    _check_instance(harness, next(i for i in builtin_instances() if i.id == instance_id))


@pytest.mark.slow
def test_every_shipped_instance_is_consistent(harness):
    for inst in builtin_instances():
        _check_instance(harness, inst)


# --- the SWE-bench-style loader -------------------------------------------------------------


HIDDEN_TEST = """import unittest

from lrucache import LRUCache


class TestIssue(unittest.TestCase):
    def test_rewrite_refreshes(self):
        cache = LRUCache(2)
        cache.put("x", 1)
        cache.put("y", 2)
        cache.put("x", 3)
        cache.put("z", 4)
        self.assertIn("x", cache)
"""


def write_dataset(tmp_path, image=None, n=1):
    """A JSONL file in SWE-bench style: a repo dir at the buggy commit, a hidden test patch, a gold patch."""
    inst = next(i for i in builtin_instances() if i.id == "lrucache-2")
    repo = tmp_path / "repos" / "lrucache"
    for path, text in inst.files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    rows = []
    for k in range(n):
        row = {
            "instance_id": f"local__lrucache-{k}",
            "repo_dir": "repos/lrucache",
            "problem_statement": inst.problem_statement,
            "FAIL_TO_PASS": json.dumps(["tests/test_issue.py::TestIssue::test_rewrite_refreshes"]),
            "PASS_TO_PASS": list(inst.pass_to_pass),
            "test_patch": make_patch({}, {"tests/test_issue.py": HIDDEN_TEST}),
            "patch": inst.gold_patch,
        }
        if image:
            row["image"] = image
        rows.append(row)
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    return path


def test_loader_reads_rows(tmp_path):
    (inst,) = load_instances(write_dataset(tmp_path, image="rlgym-sandbox:py3"))
    assert inst.id == "local__lrucache-0" and inst.repo == "lrucache" and inst.image == "rlgym-sandbox:py3"
    assert inst.fail_to_pass == ("tests/test_issue.py::TestIssue::test_rewrite_refreshes",)
    assert "tests/test_issue.py" in inst.test_files and "tests/test_issue.py" not in inst.files  # hidden
    assert list(inst.gold_files) == ["lrucache/cache.py"]
    assert "move_to_end" in inst.gold_files["lrucache/cache.py"]


def test_loader_lists_every_problem(tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = [
        {"instance_id": "", "problem_statement": "x", "repo_dir": "nowhere", "FAIL_TO_PASS": "not json"},
        "just a string",
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    with pytest.raises(ConfigError) as err:
        load_instances(path)
    problems = err.value.problems
    assert any("bad.jsonl:1: instance_id" in p for p in problems)
    assert any("bad.jsonl:1: repo_dir" in p for p in problems)
    assert any("FAIL_TO_PASS is a string but not a JSON list" in p for p in problems)
    assert any("bad.jsonl:2: each line must be a JSON object" in p for p in problems)
    assert any("bad.jsonl:3: not valid JSON" in p for p in problems)


def test_loader_rejects_a_patch_that_does_not_apply(tmp_path):
    path = write_dataset(tmp_path)
    row = json.loads(path.read_text().splitlines()[0])
    row["patch"] = make_patch({"lrucache/cache.py": "nothing like it\n"}, {"lrucache/cache.py": "x\n"})
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ConfigError, match="does not apply"):
        load_instances(path)


def test_hidden_tests_judge_but_stay_hidden(tmp_path):
    env = SWEEnv(dataset=write_dataset(tmp_path))
    fix = {
        "path": "lrucache/cache.py",
        "old_str": "        self._data[key] = value\n        if len",
        "new_str": "        if key in self._data:\n            self._data.move_to_end(key)\n        self._data[key] = value\n        if len",
    }
    try:
        env.reset(seed=0)
        listing = env.step(AssistantTurn(tool_calls=(ToolCall("list_files", {}, "a"),)))[0][0]["content"]
        report = env.step(AssistantTurn(tool_calls=(ToolCall("run_tests", {"selector": "test_issue"}, "b"),)))[0]
        assert "tests/test_issue.py" not in listing and "16 deselected" in report[0]["content"]
        _, reward, *_ = env.step(AssistantTurn(tool_calls=(ToolCall("submit", {}, "c"),)))
        assert reward == 0.0
        env.reset(seed=0)
        env.step(AssistantTurn(tool_calls=(ToolCall("edit_file", fix, "a"),)))  # graded: hidden tests ran
        spy = "import os\n\ndef test_spy():\n    assert False, sorted(os.listdir('..'))\n"
        spy_call = ToolCall("edit_file", {"path": "tests/test_spy.py", "old_str": "", "new_str": spy}, "s")
        env.step(AssistantTurn(tool_calls=(spy_call,)))
        report = env.step(AssistantTurn(tool_calls=(ToolCall("run_tests", {"selector": "test_spy"}, "b"),)))[0]
        assert "['repo']" in report[0]["content"]  # the grading directory did not outlive its run
        _, reward, _, _, info = env.step(AssistantTurn(tool_calls=(ToolCall("submit", {}, "c"),)))
        assert reward == 1.0 and info["signals"]["tests"]["vector"][0] is True
    finally:
        env.close()


def test_export_then_load_gives_the_same_instances(tmp_path):
    shipped = builtin_instances()
    loaded = load_instances(export_jsonl(shipped, tmp_path, image="img:1"))
    assert [i.id for i in loaded] == [i.id for i in shipped]
    for a, b in zip(shipped, loaded):
        assert (dict(a.files), dict(a.test_files), dict(a.gold_files)) == (
            dict(b.files),
            dict(b.test_files),
            dict(b.gold_files),
        )
        assert (a.fail_to_pass, a.pass_to_pass, a.problem_statement) == (
            b.fail_to_pass,
            b.pass_to_pass,
            b.problem_statement,
        )
        assert b.image == "img:1"


def test_hiding_fail_to_pass_leaves_exactly_the_passing_tests():
    for inst in builtin_instances():
        hidden = hide_fail_to_pass(inst)
        assert set(discover_test_ids(hidden.files)) == set(inst.pass_to_pass), inst.id
        assert hidden.test_files == inst.test_files and hidden.gold_files == inst.gold_files


def test_hiding_a_class_s_only_test_keeps_the_file_valid():
    source = "import unittest\n\n\nclass TestOne(unittest.TestCase):\n    @staticmethod\n    def helper():\n"
    source += "        return 1\n\n\nclass TestTwo(unittest.TestCase):\n    def test_a(self):\n        pass\n"
    source += "\n\ndef test_b():\n    assert True\n"
    files = {"tests/test_m.py": source}
    inst = Instance(
        "x", "r", "issue", files, files, ("tests/test_m.py::TestTwo::test_a",), ("tests/test_m.py::test_b",)
    )
    text = hide_fail_to_pass(inst).files["tests/test_m.py"]
    compile(text, "test_m.py", "exec")
    assert "test_a" not in text and "class TestTwo(unittest.TestCase):\n    pass\n" in text
    assert discover_test_ids({"tests/test_m.py": text}) == ["tests/test_m.py::test_b"]


# --- the built set (real projects), checked with real pytest ---------------------------------------


def _built_instances():
    from rlgym_envs.swe.env import BUILT_SET

    return load_instances(BUILT_SET) if BUILT_SET.exists() else []


@pytest.fixture(scope="module")
def built():
    return {i.id: i for i in _built_instances()}


def _first_per_project():
    firsts = {}
    for inst in _built_instances():
        firsts.setdefault(inst.repo, inst.id)
    return sorted(firsts.values())


@pytest.mark.parametrize("instance_id", _first_per_project())
def test_built_instance_fails_exactly_fail_to_pass_and_gold_fixes_it(harness, built, instance_id):
    inst = built[instance_id]
    assert inst.license and inst.python_path is not None and inst.gold_files
    _check_instance(harness, inst)


# Every one of the 101 built instances (about 15 minutes on 2 cores, past the CI budget of one
# test): `python benchmarks/swe_v0.py --backend docker` grades gold, empty, test-editing and
# random-edit patches on each of them (benchmarks/results/swe_v0.md).
