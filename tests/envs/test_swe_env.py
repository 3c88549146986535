"""`rlgym/SWE-v0`: tools, errors, grading with fresh tests, tamper detection, signals (local sandbox)."""

import json

import pytest

import rlgym_llm
from rlgym_envs.swe.env import MAX_REPORT_CHARS, NO_TOOL_CALL, SWEEnv
from rlgym_envs.swe.instances import Instance, builtin_instances
from rlgym_envs.swe.splits import instance_splits
from rlgym_llm import AssistantTurn, ConfigError, ToolCall
from rlgym_llm.core.types import signal_problems

# The content split of each toy instance: an env draws only from its own split's pool.
SPLIT = {i.id: split for i, (split, _) in zip(builtin_instances(), instance_splits(builtin_instances()))}


def call(name, **arguments):
    return AssistantTurn(tool_calls=(ToolCall(name, arguments, id=f"id_{name}"),))


def content(messages):
    return "\n".join(m["content"] for m in messages)


@pytest.fixture(scope="module")
def env():
    env = rlgym_llm.make("rlgym/SWE-v0", tier="toy")  # the train split: lrucache-2, intervals-2, pqueue-1
    yield env
    env.close()


@pytest.fixture(scope="module")
def textkit_env():
    env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=SPLIT["textkit-1"])
    yield env
    env.close()


FIX_LRU2 = {
    "path": "lrucache/cache.py",
    "old_str": "        self._data[key] = value\n        if len",
    "new_str": "        if key in self._data:\n            self._data.move_to_end(key)\n        self._data[key] = value\n        if len",
}


# A test file the agent writes: run once, it plants poisoned modules where a careless runner imports from
# (the box's work dir, first on sys.path for `python -c`) and a usercustomize under $HOME (the work dir).
PLANT = """import os
import sys


def test_plant():
    base = os.path.abspath("..")
    for name in ("unittest.py", "json.py", "signal.py", "traceback.py"):
        with open(os.path.join(base, name), "w") as f:
            f.write("raise ImportError('planted')\\n")
    site = os.path.join(base, ".local", "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    os.makedirs(site, exist_ok=True)
    with open(os.path.join(site, "usercustomize.py"), "w") as f:
        f.write("raise SystemExit(3)\\n")
"""


def test_at_least_fifteen_instances_over_several_repos():
    instances = builtin_instances()
    assert len(instances) >= 15
    assert len({i.repo for i in instances}) >= 5
    assert len({i.id for i in instances}) == len(instances)
    for inst in instances:
        assert inst.fail_to_pass and inst.pass_to_pass and inst.gold_files
        assert not set(inst.fail_to_pass) & set(inst.pass_to_pass)


def test_opening_is_the_issue_and_hides_the_ground_truth(env):
    messages, info = env.reset(seed=3)
    task = env.unwrapped.task
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == task.prompt
    assert task.meta["repo"] in messages[0]["content"]
    text = json.dumps(messages)
    assert task.answer.startswith("--- a/") and task.answer not in text
    for test_id in task.hidden["fail_to_pass"]:
        assert test_id not in text
    assert [t["function"]["name"] for t in info["tools"]] == [
        "list_files",
        "read_file",
        "edit_file",
        "run_tests",
        "submit",
    ]


def test_same_seed_same_instance_and_instance_options(env):
    assert env.reset(seed=11)[1]["task_id"] == env.reset(seed=11)[1]["task_id"]
    _, info = env.reset(options={"instance_id": "pqueue-1"})
    assert info["task_id"] == "pqueue-1"
    _, info = env.reset(options={"task_index": 0})
    assert info["task_id"] == env.unwrapped.instances[0].id
    with pytest.raises(ValueError, match="not one of"):
        env.reset(options={"instance_id": "nope"})


def test_list_and_read_files(env):
    env.reset(options={"instance_id": "lrucache-2"})
    listing = env.step(call("list_files", path="."))[0][0]["content"]
    assert "lrucache/cache.py" in listing.splitlines() and "tests/test_cache.py" in listing.splitlines()
    assert env.step(call("list_files", path="tests"))[0][0]["content"].startswith("tests/")
    text = env.step(call("read_file", path="lrucache/cache.py", start_line=33, end_line=35))[0][0]["content"]
    lines = text.splitlines()
    assert lines[0].startswith("33  ") and "def put" in lines[0] and lines[2].startswith("35")
    assert "[lines 33-35 of" in text


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("read_file", {"path": "nope.py"}, "no file 'nope.py'"),
        ("read_file", {"path": "../etc/passwd"}, "invalid path"),
        ("read_file", {"path": "/etc/passwd"}, "invalid path"),
        ("read_file", {"path": "lrucache/cache.py", "start_line": 9999}, "past the end"),
        ("list_files", {"path": "no_such_dir"}, "no directory"),
        ("edit_file", {"path": "lrucache/cache.py", "old_str": "not in the file", "new_str": "x"}, "was not found"),
        ("edit_file", {"path": "lrucache/cache.py", "old_str": "self._data", "new_str": "x"}, "occurs"),
        ("edit_file", {"path": "lrucache/cache.py", "old_str": "", "new_str": "x"}, "exists"),
        ("edit_file", {"path": "missing.py", "old_str": "a", "new_str": "b"}, "no file"),
        ("edit_file", {"path": "lrucache/cache.py"}, "invalid arguments for edit_file"),
        ("read_file", {"path": 5}, "invalid arguments for read_file"),
        ("run_tests", {"selector": "x" * 600}, "invalid arguments for run_tests"),
        ("rm_rf", {}, "unknown tool"),
    ],
)
def test_bad_calls_get_error_observations(env, tool, args, expected):
    env.reset(options={"instance_id": "lrucache-2"})
    before = dict(env.unwrapped._files)
    messages, reward, terminated, truncated, info = env.step(call(tool, **args))
    assert messages[0]["role"] == "tool" and messages[0]["content"].startswith("Error")
    assert expected in messages[0]["content"]
    assert info["signals"]["tool_ok"] is False and info["signals"]["reward_components"]["tool_ok"] == 0.0
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.unwrapped._files == before


def test_ambiguous_edit_names_the_lines(env):
    env.reset(options={"instance_id": "lrucache-2"})
    message = env.step(call("edit_file", path="lrucache/cache.py", old_str="capacity < 1", new_str="x"))[0][0]
    assert "occurs 2 times" in message["content"] and "lines 15, 44" in message["content"]


def test_malformed_actions_and_text_turns(env):
    env.reset(options={"instance_id": "lrucache-2"})
    messages, *_, info = env.step({"role": "assistant", "tool_calls": [{"name": "edit_file", "arguments": "{oops"}]})
    assert "not valid JSON" in content(messages) and info["signals"]["tool_ok"] is False
    assert info["signals"]["reward_components"]["tool_ok"] == 0.0 and NO_TOOL_CALL not in content(messages)
    messages, *_, info = env.step(42)
    assert messages[0]["content"].startswith("Error") and info["signals"]["tool_ok"] is False
    messages, *_, info = env.step("I think the bug is in put().")
    assert messages == [{"role": "user", "content": NO_TOOL_CALL}] and info["signals"]["tool_ok"] is None


def test_edit_then_tests_then_submit_resolves(env):
    env.reset(options={"instance_id": "lrucache-2"})
    report = env.step(call("run_tests", selector="tests/test_cache.py"))[0][0]["content"]
    assert "FAILED tests/test_cache.py::TestLRUCache::test_put_existing_key_updates_and_refreshes" in report
    assert "1 failed, 10 passed in" in report
    assert "/tmp/" not in report  # tracebacks show repository paths
    _, _, _, _, info = env.step(call("edit_file", **FIX_LRU2))
    assert info["signals"]["progress"] == 1.0 and info["signals"]["reward_components"]["files_modified"] == 1.0
    report = env.step(call("run_tests", selector="put_existing"))[0][0]["content"]
    assert "1 passed, 15 deselected in" in report
    _, reward, terminated, truncated, info = env.step(call("submit"))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["outcome"]["reward"] == 1.0
    assert info["outcome"]["components"]["submitted"] == 1.0 and info["outcome"]["components"]["modified"] == 1.0
    assert info["signals"]["reward_components"]["submitted"] == 1.0


def test_signals_follow_the_tree(env):
    _, _ = env.reset(options={"instance_id": "intervals-2"})
    inst = next(i for i in builtin_instances() if i.id == "intervals-2")
    _, _, _, _, info = env.step(call("list_files"))
    signals = info["signals"]
    assert not signal_problems(signals)
    assert signals["progress"] == 0.0
    assert signals["tests"]["total"] == len(inst.tests)
    assert signals["tests"]["vector"] == [False] * len(inst.fail_to_pass) + [True] * len(inst.pass_to_pass)
    start_key = signals["state_key"]
    # Fix one of the two symptoms wrongly: a different tree, and the graded vector says what changed.
    _, _, _, _, info = env.step(
        call("edit_file", path="intervals/sets.py", old_str="def gaps(intervals):", new_str="def gaps(intervals):  # x")
    )
    assert info["signals"]["state_key"] != start_key and info["signals"]["progress"] == 0.0
    _, _, _, _, info = env.step(
        call("edit_file", path="intervals/sets.py", old_str="def gaps(intervals):  # x", new_str="def gaps(intervals):")
    )
    assert info["signals"]["state_key"] == start_key  # back to the start: same state, same key


def test_editing_the_tests_earns_nothing(textkit_env):
    """Make the failing test pass by rewriting it, and touch a source file so grading really runs."""
    textkit_env.reset(options={"instance_id": "textkit-1"})
    textkit_env.step(
        call(
            "edit_file",
            path="tests/test_text.py",
            old_str='self.assertEqual(wrap("abcd efgh ij", 9), ["abcd efgh", "ij"])',
            new_str="pass",
        )
    )
    textkit_env.step(call("edit_file", path="textkit/text.py", old_str='"""Slugs,', new_str='"""Text: slugs,'))
    report = textkit_env.step(call("run_tests", selector="tests/test_text.py"))[0][0]["content"]
    assert "failed" not in report and " passed in " in report  # the agent's own run is green...
    _, reward, terminated, _, info = textkit_env.step(call("submit"))
    assert terminated and reward == 0.0  # ...but grading uses fresh test files
    assert info["outcome"]["components"]["fail_to_pass"] == 0.0
    assert info["outcome"]["components"]["pass_to_pass"] == 1.0


def test_deleting_test_files_earns_nothing(textkit_env):
    textkit_env.reset(options={"instance_id": "textkit-1"})
    source = next(i for i in builtin_instances() if i.id == "textkit-1").files["tests/test_text.py"]
    textkit_env.step(call("edit_file", path="tests/test_text.py", old_str=source, new_str="\n"))
    textkit_env.step(call("edit_file", path="textkit/text.py", old_str='"""Slugs,', new_str='"""Text: slugs,'))
    _, reward, _, _, info = textkit_env.step(call("submit"))
    assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 0.0


def test_disabling_assertions_earns_nothing(textkit_env):
    """Source code that disables assertions at import makes every test pass, in pytest's eyes: the
    traced run's records still hold the buggy values, so the FAIL_TO_PASS tests fail."""
    textkit_env.reset(options={"instance_id": "textkit-1"})
    hack = "import unittest\nunittest.TestCase.assertEqual = lambda *args, **kwargs: None\n"
    textkit_env.step(call("edit_file", path="textkit/__init__.py", old_str='"""Small', new_str=hack + '"""Small'))
    report = textkit_env.step(call("run_tests"))[0][0]["content"]
    assert "failed" not in report and " passed in " in report  # the hack works on the agent's own run
    _, reward, _, _, info = textkit_env.step(call("submit"))
    assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 0.0


def test_calls_after_submit_are_ignored(env):
    env.reset(options={"instance_id": "lrucache-2"})
    turn = AssistantTurn(
        tool_calls=(ToolCall("submit", {}, "a"), ToolCall("edit_file", FIX_LRU2, "b")),
    )
    messages, reward, terminated, _, info = env.step(turn)
    assert terminated and reward == 0.0 and "Ignored" in messages[1]["content"]
    assert info["outcome"]["components"]["modified"] == 0.0


def _instance(test_source: str, files=None) -> Instance:
    files = {"pkg/__init__.py": "", "tests/__init__.py": "", "tests/test_big.py": test_source, **(files or {})}
    return Instance(
        id="custom-1",
        repo="custom",
        problem_statement="Something is broken.",
        files=files,
        test_files={p: t for p, t in files.items() if p.startswith("tests/")},
        fail_to_pass=("tests/test_big.py::test_fails",),
        pass_to_pass=(),
        split="train",  # the data's own split: a single instance could not be split by content
    )


def test_long_test_output_is_cut():
    source = "def test_fails():\n    assert False, 'x' * 100000\n\n"
    source += "".join(
        f"def test_bad_{i}():\n    print('noise ' * 50)\n    assert False, 'y' * 500\n\n" for i in range(200)
    )
    source += "".join(f"def test_ok_{i}():\n    assert True\n\n" for i in range(200))
    env = SWEEnv(dataset=[_instance(source)])
    try:
        env.reset(seed=0)
        report = env.step(call("run_tests"))[0][0]["content"]
        assert len(report) <= MAX_REPORT_CHARS + 100 and "characters cut" in report
        assert "201 failed, 200 passed in " in report.splitlines()[-1]
        small = env.step(call("run_tests", selector="tests/test_big.py::test_ok_1 tests/test_big.py::test_fails"))[0][
            0
        ]["content"]
        assert "PASSED tests/test_big.py::test_ok_1" in small and "characters cut" in small  # the 100k message
    finally:
        env.close()


def test_a_hanging_test_is_stopped():
    source = "def test_fails():\n    while True:\n        pass\n\ndef test_ok():\n    assert True\n"
    env = SWEEnv(dataset=[_instance(source)], test_timeout=0.5)
    try:
        env.reset(seed=0)
        report = env.step(call("run_tests"))[0][0]["content"]
        assert "ran past its 0.5s time limit" in report and "1 failed, 1 passed in" in report
    finally:
        env.close()


def test_turn_limit_grades_the_tree_as_it_stands():
    env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", max_turns=2)
    try:
        env.reset(options={"instance_id": "lrucache-2"})
        env.step(call("edit_file", **FIX_LRU2))
        _, reward, terminated, truncated, info = env.step("done, I think")
        assert truncated and not terminated and reward == 0.0
        assert info["outcome"]["reward"] == 1.0 and info["outcome"]["components"]["submitted"] == 0.0
    finally:
        env.close()


def test_sparse_signals_grade_only_at_the_end():
    env = SWEEnv(tier="toy", instance_ids=["lrucache-2"], dense_signals=False)
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step(call("edit_file", **FIX_LRU2))
        assert info["signals"]["progress"] is None and info["signals"]["tests"] is None
        _, reward, _, _, info = env.step(call("submit"))
        assert reward == 1.0 and info["signals"]["progress"] == 1.0
    finally:
        env.close()


def test_config_errors():
    with pytest.raises(ConfigError, match="unknown instance id"):
        SWEEnv(tier="toy", instance_ids=["nope"])
    with pytest.raises(ConfigError, match="does not exist"):
        SWEEnv(dataset="/no/such/file.jsonl")
    with pytest.raises(ConfigError) as err:
        SWEEnv(backend="vm", test_timeout=0, tier="huge")
    assert len(err.value.problems) == 3 and "unknown sandbox backend 'vm'" in err.value.problems[0]
    assert "unknown tier 'huge'" in err.value.problems[1]


def test_breaking_a_passing_test_lowers_progress(env):
    env.reset(options={"instance_id": "lrucache-2"})
    _, _, _, _, info = env.step(call("edit_file", **FIX_LRU2))
    assert info["signals"]["progress"] == 1.0
    _, _, _, _, info = env.step(
        call("edit_file", path="lrucache/cache.py", old_str="if lookups else 0.0", new_str="if lookups else 1.0")
    )
    inst = next(i for i in builtin_instances() if i.id == "lrucache-2")
    broken = "tests/test_cache.py::TestLRUCache::test_hit_rate_without_lookups"
    vector = info["signals"]["tests"]["vector"]
    assert vector[inst.tests.index(broken)] is False and sum(vector) == len(vector) - 1
    assert info["signals"]["progress"] == pytest.approx((len(inst.pass_to_pass) - 1) / len(inst.pass_to_pass))
    _, reward, _, _, info = env.step(call("submit"))
    assert reward == 0.0 and info["outcome"]["components"]["fail_to_pass"] == 1.0


def test_envs_in_threads_share_the_sandbox_loop():
    """The rollout manager steps envs from worker threads; each env has its own box."""
    from concurrent.futures import ThreadPoolExecutor

    def episode(instance_id):
        env = rlgym_llm.make("rlgym/SWE-v0", tier="toy", split=SPLIT[instance_id])
        try:
            env.reset(options={"instance_id": instance_id})
            inst = env.unwrapped.task
            for path, edits in inst.hidden["gold_edits"].items():
                for old, new in edits:
                    env.step(call("edit_file", path=path, old_str=old, new_str=new))
            env.step(call("run_tests"))
            return env.step(call("submit"))[1]
        finally:
            env.close()

    ids = ["iniparse-1", "intervals-2", "pqueue-1", "statkit-2"]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(episode, ids)) == [1.0] * 4


def test_modules_planted_in_the_box_are_never_imported_by_the_grader(env):
    env.reset(options={"instance_id": "lrucache-2"})
    step = lambda name, **args: env.step(AssistantTurn(tool_calls=(ToolCall(name, args, "c"),)))  # noqa: E731
    step("edit_file", path="tests/test_plant.py", old_str="", new_str=PLANT)
    assert "1 passed" in step("run_tests", selector="test_plant")[0][0]["content"]
    assert "1 passed" in step("run_tests", selector="test_plant")[0][0]["content"]  # pytest unharmed
    step("edit_file", **FIX_LRU2)
    _, reward, _, _, info = step("submit")
    assert reward == 1.0, info["outcome"]  # grading ran in the same box, untouched by the planted files


def test_unittest_mock_and_async_tests_run_under_pytest():
    source = (
        "import unittest\nimport unittest.mock\nfrom unittest import IsolatedAsyncioTestCase\n\n\n"
        "class TestA(unittest.TestCase):\n    def test_mock(self):\n"
        "        self.assertEqual(unittest.mock.Mock(return_value=3)(), 3)\n\n\n"
        "class TestB(IsolatedAsyncioTestCase):\n    async def test_async(self):\n        self.assertTrue(True)\n\n\n"
        "def test_fails():\n    assert False\n"
    )
    inst = _instance(source)
    inst = Instance(
        **{
            **inst.__dict__,
            "pass_to_pass": ("tests/test_big.py::TestA::test_mock", "tests/test_big.py::TestB::test_async"),
        }
    )
    # no gold fix: the failing test records the same on both trees (trace-blind), so the default
    # would void the grade; this test is about what runs under pytest
    env = SWEEnv(dataset=[inst], trace_blind="pay")
    try:
        env.reset(seed=0)
        report = env.step(call("run_tests"))[0][0]["content"]
        assert "1 failed, 2 passed in" in report
        assert "tests/test_big.py:17: in test_fails" in report or "tests/test_big.py:17: AssertionError" in report
        info = env.step(call("submit"))[4]
        assert info["outcome"]["components"]["pass_to_pass"] == 1.0
    finally:
        env.close()
