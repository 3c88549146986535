"""SWE-bench compatibility: our pytest log parsing matches the `swebench` package's, on real logs.

The logs come from real pytest runs in the sandbox (every status pytest reports, parametrized ids,
a fixture error, skips with their `[N]` counts). swebench lives in its own venv (`make
swebench-venv`, `.venv-swebench`, part of `make services`; its dependencies are heavy): the
cross-check skips without it, except in CI, where it fails.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from rlgym_envs.swe.grading import judge, parse_log_pytest
from rlgym_envs.swe.harness import TestHarness

ROOT = Path(__file__).resolve().parents[2]
SWEBENCH_PYTHON = Path(os.environ.get("RLGYM_SWEBENCH_PYTHON", ROOT / ".venv-swebench" / "bin" / "python"))

TESTS = """import pytest


def test_passes():
    assert 1 + 1 == 2


def test_fails():
    assert [1, 2] == [1, 3], "lists differ - on purpose"


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known bug")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="fixed already")
def test_xpass():
    assert True


@pytest.fixture
def broken():
    raise RuntimeError("fixture blew up")


def test_error(broken):
    pass


@pytest.mark.parametrize("a,b", [(1, 2), (3, 3), ("x", "x")])
def test_param(a, b):
    assert a == b


class TestGroup:
    def test_method(self):
        assert True

    def test_method_fails(self):
        raise ValueError("boom - with a dash")
"""


@pytest.fixture(scope="module")
def logs():
    """Logs of the same file run as grading runs it, and as the agent's `run_tests` runs it."""
    harness = TestHarness("local")
    try:
        request = {
            "root": "compat",
            "fresh": True,
            "files": {"tests/test_compat.py": TESTS},
            "runs": [{"args": ["-q", "--tb=no", "tests"]}, {"args": ["-q", "--tb=short", "tests"]}],
        }
        return [run.log for run in harness.run(request)]
    finally:
        harness.close()


def test_statuses_of_every_kind(logs):
    statuses = parse_log_pytest(logs[0])
    expected = {
        "tests/test_compat.py::test_passes": "PASSED",
        "tests/test_compat.py::test_fails": "FAILED",
        "tests/test_compat.py::test_xfail": "XFAIL",
        "tests/test_compat.py::test_error": "ERROR",
        "tests/test_compat.py::test_param[1-2]": "FAILED",
        "tests/test_compat.py::test_param[3-3]": "PASSED",
        "tests/test_compat.py::test_param[x-x]": "PASSED",
        "tests/test_compat.py::TestGroup::test_method": "PASSED",
        "tests/test_compat.py::TestGroup::test_method_fails": "FAILED",
    }
    assert {k: statuses.get(k) for k in expected} == expected
    assert "[1]" not in statuses  # "SKIPPED [1] tests/...: reason" is a count, not a test
    verdict = judge(logs[0], 1, list(expected))
    assert [t for t in expected if verdict.passed(t)] == [t for t, s in expected.items() if s in ("PASSED", "XFAIL")]


def test_same_map_as_swebench_parse_log_pytest(logs):
    if not SWEBENCH_PYTHON.exists():  # CI builds it (`make services`): there a missing venv is a failure
        if os.environ.get("CI", "").lower() not in ("", "0", "false"):
            pytest.fail(f"CI must run the swebench cross-check, but {SWEBENCH_PYTHON} is missing (make swebench-venv)")
        pytest.skip("no swebench venv (make swebench-venv)")
    code = (
        "import json, sys\n"
        "from swebench.harness.log_parsers.python import parse_log_pytest\n"
        "print(json.dumps([parse_log_pytest(log, None) for log in json.load(sys.stdin)]))\n"
    )
    proc = subprocess.run(
        [str(SWEBENCH_PYTHON), "-c", code], input=json.dumps(logs), capture_output=True, text=True, cwd="/"
    )
    assert proc.returncode == 0, proc.stderr
    theirs = json.loads(proc.stdout)
    assert theirs == [parse_log_pytest(log) for log in logs]
    assert len(theirs[0]) >= 9
