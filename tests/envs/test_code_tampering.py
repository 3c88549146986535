"""Code that tampers with the grading harness earns nothing (rlgym/Code-v0; local, and docker under -m docker).

Each attack is submitted as the solution of a real task; the reward must be 0 and no hidden test may
count as passed. Controls show the attacks are real: run outside the box, the file-reading attack
does produce the right answers.
"""

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import rlgym_llm
from rlgym_envs.code.grading import harness_source, json_depth
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import load_specs, resolve_tasks
from rlgym_llm.sandbox import SandboxError, make_sandbox
from rlgym_llm.sandbox.sync import run_sync

TASK_FILE = str(resolve_tasks("builtin").resolve())
# The content split of each shipped task: an env draws only from its own split's pool.
SPLIT = {spec.id: split for spec, (split, _) in zip(load_specs("builtin"), task_splits(load_specs("builtin")))}

# Looks its own test up in the installed task file and returns the expected value.
READ_TASK_FILE = f"""
import json
def digit_sum(n):
    try:
        with open({TASK_FILE!r}) as f:
            for line in f:
                task = json.loads(line)
                if task["id"] == "digit-sum":
                    for case in task["tests"] + task["examples"]:
                        if case["args"] == [n]:
                            return case["expected"]
    except OSError:
        pass
    try:
        from rlgym_envs.code.tasks import load_specs
        for spec in load_specs("builtin"):
            if spec.id == "digit-sum":
                return [c.expected for c in spec.tests if c.args == [n]][0]
    except Exception:
        pass
    return -1
"""

FUNCTION_ATTACKS = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)\ndef digit_sum(n):\n    return 0\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "os._exit(0) in the call": "import os\ndef digit_sum(n):\n    os._exit(0)\n",
    "fake PASS lines": (
        "def digit_sum(n):\n    print('PASS')\n    print('All tests passed.')\n    print('OK (passed=1)')\n    return -1\n"
    ),
    "forged report on every fd": (
        "import os, sys\n"
        "nonce = sys.argv[-1]\n"
        "def digit_sum(n):\n"
        "    line = (nonce + ' ' + '{\"ok\": true, \"passed\": true, \"value\": true}' + '\\n').encode()\n"
        "    for fd in range(1, 20):\n"
        "        try:\n"
        "            os.write(fd, line)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    ),
    "monkeypatched json, print and exit": (
        "import json, builtins, sys, os\n"
        'json.dumps = lambda *a, **k: \'{"ok": true, "value": "PASS"}\'\n'
        "json.loads = lambda *a, **k: {'ok': True}\n"
        "builtins.print = lambda *a, **k: None\n"
        "sys.exit = os._exit = lambda *a: None\n"
        "def digit_sum(n):\n    return 'PASS'\n"
    ),
    "an object equal to everything": (
        "class Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def digit_sum(n):\n    return Any(-7)\n"
    ),
    "reads the hidden tests": READ_TASK_FILE,
    "searches the box for test files": (
        "import os\n"
        "def digit_sum(n):\n"
        "    for top in ('.', '/tmp', '..', '/work'):\n"
        "        for root, dirs, files in os.walk(top):\n"
        "            for f in files:\n"
        "                if f.endswith(('.json', '.jsonl')) or 'test' in f:\n"
        "                    print(root, f)\n"
        "    return -1\n"
    ),
}

STDIO_ATTACKS = {
    "sys.exit(0) at once": "import sys\nsys.exit(0)\n",
    "fake PASS lines": "print('PASS')\nprint('All tests passed')\n",
    "reads the hidden tests": (
        "import json, sys\n"
        "data = sys.stdin.read()\n"
        "try:\n"
        f"    with open({TASK_FILE!r}) as f:\n"
        "        for line in f:\n"
        "            for case in json.loads(line).get('tests', []):\n"
        "                if case.get('input') == data:\n"
        "                    print(case['output'], end='')\n"
        "except OSError:\n"
        "    pass\n"
    ),
}


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def env(request):
    """An env of digit-sum's split (the function task the attacks target)."""
    env = rlgym_llm.make("rlgym/Code-v0", test_timeout_s=2.0, sandbox_backend=request.param, split=SPLIT["digit-sum"])
    yield env
    env.close()


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def stdio_env(request):
    """An env of sum-two's split (the stdio task the attacks target)."""
    env = rlgym_llm.make("rlgym/Code-v0", test_timeout_s=2.0, sandbox_backend=request.param, split=SPLIT["sum-two"])
    yield env
    env.close()


def submit(env, task_id, code):
    env.reset(seed=0, options={"task_id": task_id})
    call = {"id": "s", "name": "submit", "arguments": {"code": code}}
    _, reward, terminated, _, info = env.step({"role": "assistant", "content": "", "tool_calls": [call]})
    assert terminated
    return reward, info


@pytest.mark.parametrize("name", sorted(FUNCTION_ATTACKS))
def test_function_task_attack_earns_nothing(env, name):
    reward, info = submit(env, "digit-sum", FUNCTION_ATTACKS[name])
    assert reward == 0.0
    assert info["outcome"]["reward"] == 0.0
    assert info["signals"]["tests"]["passed"] == 0, info["test_results"]
    assert info["outcome"]["components"]["pass_rate"] == 0.0


@pytest.mark.parametrize("name", sorted(STDIO_ATTACKS))
def test_stdio_task_attack_earns_nothing(stdio_env, name):
    reward, info = submit(stdio_env, "sum-two", STDIO_ATTACKS[name])
    assert reward == 0.0
    assert info["signals"]["tests"]["passed"] == 0, info["test_results"]


def test_the_file_reading_attack_is_real_outside_the_box():
    """Control: run on the host, the attack returns the hidden expected values."""
    namespace = {}
    exec(READ_TASK_FILE, namespace)
    with open(TASK_FILE) as f:
        task = next(t for t in map(json.loads, f) if t["id"] == "digit-sum")
    assert all(namespace["digit_sum"](*c["args"]) == c["expected"] for c in task["tests"])


def test_the_box_cannot_read_the_task_file(env):
    env.reset(seed=0)
    env.unwrapped._sandbox()
    assert env.unwrapped.isolation["landlock"] >= 1
    assert env.unwrapped.isolation["readable"] == []


def test_the_env_still_grades_correctly_after_the_attacks(env):
    task = next(t for t in env.unwrapped.tasks if t.id == "digit-sum")
    reward, info = submit(env, "digit-sum", task.answer)
    assert reward == 1.0
    assert all(info["signals"]["tests"]["vector"])


# A module the harness might import from the work dir: it forges a correct report for any input.
PLANTED = """
import sys, json
request = json.loads(sys.stdin.read())
value = sum(int(c) for c in str(request["args"][0]))
sys.stdout.write(sys.argv[-1] + " " + json.dumps({"ok": True, "value": value}) + "\\n")
raise SystemExit(0)
"""
PLANT_MODULES = f"""
for name in ("ctypes.py", "traceback.py", "secrets.py"):
    with open(name, "w") as f:
        f.write({PLANTED!r})
def digit_sum(n):
    return -1
"""


def test_the_planted_module_would_forge_a_correct_report():
    """Control: imported by the harness, the planted module would earn the reward."""
    out = subprocess.run(
        [sys.executable, "-c", PLANTED, "NONCE"], input='{"args": [9999]}', capture_output=True, text=True, timeout=60
    )
    assert out.stdout == 'NONCE {"ok": true, "value": 36}\n'


def test_modules_planted_in_the_work_dir_do_not_reach_the_grading(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    run = {"id": "r", "name": "run_examples", "arguments": {"code": PLANT_MODULES}}
    env.step({"role": "assistant", "content": "", "tool_calls": [run]})
    sub = {"id": "s", "name": "submit", "arguments": {"code": "def digit_sum(n):\n    return -1\n"}}
    _, reward, terminated, _, info = env.step({"role": "assistant", "content": "", "tool_calls": [sub]})
    assert terminated and reward == 0.0 and info["signals"]["tests"]["passed"] == 0


# --- the caller's folders never reach the box (issue: a checkout under /tmp leaked the hidden tests) ---


def reader_of(task_file):
    return READ_TASK_FILE.replace(repr(TASK_FILE), repr(task_file))


@pytest.fixture
def checkout_under_tmp(monkeypatch):
    """A task file in a folder under /tmp that is also the caller's cwd and on its sys.path (a clone there)."""
    folder = tempfile.mkdtemp(prefix="rlgym-clone-", dir="/tmp")
    os.chmod(folder, 0o755)  # as a `git clone` leaves it: readable by every uid
    task_file = os.path.join(folder, "tasks.jsonl")
    shutil.copy(TASK_FILE, task_file)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(folder)
    yield task_file
    shutil.rmtree(folder, ignore_errors=True)


def test_the_reader_of_a_checkout_under_tmp_is_real_outside_the_box(checkout_under_tmp):
    """Control: on the host the same attack reads the copied task file and gets every answer."""
    namespace = {}
    exec(reader_of(checkout_under_tmp), namespace)
    task = next(s for s in load_specs(checkout_under_tmp) if s.id == "digit-sum")
    assert all(namespace["digit_sum"](*c.args) == c.expected for c in task.tests)


@pytest.mark.parametrize("backend", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_hidden_tests_stay_hidden_whatever_the_callers_cwd(checkout_under_tmp, backend):
    env = rlgym_llm.make(
        "rlgym/Code-v0", tasks=checkout_under_tmp, test_timeout_s=2.0, sandbox_backend=backend, split=SPLIT["digit-sum"]
    )
    try:
        reward, info = submit(env, "digit-sum", reader_of(checkout_under_tmp))
        assert reward == 0.0 and info["signals"]["tests"]["passed"] == 0, info["test_results"]
        assert env.unwrapped.isolation["readable"] == []
        # Nothing of the caller's folder exists in the box at all (not merely unreadable).
        box = env.unwrapped._sandbox()
        seen = run_sync(box.exec(["sh", "-c", f"ls -d {os.path.dirname(checkout_under_tmp)} {os.getcwd()}"]))
        assert seen.exit_code != 0 and "No such file" in seen.stderr, seen
    finally:
        env.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="the local box's own filesystem needs root")
def test_the_local_box_holds_no_folder_of_the_caller(checkout_under_tmp):
    async def scenario():
        async with make_sandbox("local") as box:
            return await box.exec(["python3", "-c", LIST_FOLDERS], stdin=json.dumps([*sys.path, os.getcwd()]))

    result = asyncio.run(scenario())
    assert result.ok, result
    found = json.loads(result.stdout)
    assert found["present"] == [], found  # the caller's cwd and sys.path folders: absent
    assert found["site_packages"] == []  # installed packages (a non-editable install's task data): hidden


LIST_FOLDERS = """
import json, os, site, sys
paths = json.loads(sys.stdin.read())
present = [p for p in paths if p and os.path.isdir(p) and "site-packages" not in p and os.listdir(p)]
present = [p for p in present if not p.startswith(os.path.dirname(os.__file__))]  # the stdlib is meant to be there
packages = [p for p in site.getsitepackages() if os.path.isdir(p) and os.listdir(p)]
print(json.dumps({"present": present, "site_packages": packages}))
"""


def test_a_leak_found_at_start_up_is_an_error(checkout_under_tmp):
    """A box that can read the task data (here: its folder exposed on purpose) refuses to grade at all."""
    folder = os.path.dirname(checkout_under_tmp)
    env = rlgym_llm.make(
        "rlgym/Code-v0", tasks=checkout_under_tmp, sandbox_options={"expose": [folder]}, split=SPLIT["digit-sum"]
    )
    try:
        env.reset(seed=0, options={"task_id": "digit-sum"})
        call = {"id": "s", "name": "submit", "arguments": {"code": "def digit_sum(n):\n    return 0\n"}}
        with pytest.raises(SandboxError, match="could read"):
            env.step({"role": "assistant", "content": "", "tool_calls": [call]})
        assert env.unwrapped._box is None  # not kept
    finally:
        env.close()


# --- a value nested thousands deep must not crash the host's parser (env.step never raises) ---

DEEP = """
import sys
sys.setrecursionlimit(100_000)
def digit_sum(n):
    value = []
    for _ in range(5000):
        value = [value]
    return value
"""


def test_the_deep_value_really_reaches_the_host():
    """Control: the harness does print the 5,000-deep value, and a plain `json.loads` of it raises."""

    async def scenario():
        async with make_sandbox("local") as box:
            await box.write_file("solution.py", DEEP)
            request = json.dumps({"entry": "digit_sum", "args": [1]})
            return await box.exec(["python3", "-c", harness_source(), "function", "NONCE"], stdin=request)

    result = asyncio.run(scenario())
    assert result.stdout.startswith("NONCE ") and json_depth(result.stdout) > 5000, result.stdout[:200]
    with pytest.raises(RecursionError):
        json.loads(result.stdout[len("NONCE ") :])


@pytest.mark.parametrize("tool", ["run_examples", "submit"])
def test_a_deeply_nested_return_value_is_a_failed_test_not_a_crash(env, tool):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    call = {"id": "c", "name": tool, "arguments": {"code": DEEP}}
    messages, reward, _, _, info = env.step({"role": "assistant", "content": "", "tool_calls": [call]})
    assert reward == 0.0
    if tool == "submit":
        assert info["signals"]["tests"]["passed"] == 0
        assert {t["status"] for t in info["test_results"]} == {"error"}
    else:
        assert "nested more than" in messages[0]["content"], messages[0]["content"]


# --- the code leaves a box the host cannot write into: the next run is an error observation, not a crash ---

BLOCK_THE_SOLUTION = """
import os
def digit_sum(n):
    os.unlink("solution.py")
    os.mkfifo("solution.py")  # the host's next write_file meets a FIFO (before: a hang, then an exception)
    return -1
"""


def test_a_box_the_host_cannot_write_into_is_an_error_observation(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    fill = {"id": "f", "name": "run_examples", "arguments": {"code": BLOCK_THE_SOLUTION}}
    env.step({"role": "assistant", "content": "", "tool_calls": [fill]})
    again = {"id": "a", "name": "run_examples", "arguments": {"code": "def digit_sum(n):\n    return 0\n"}}
    messages, reward, terminated, _, _ = env.step({"role": "assistant", "content": "", "tool_calls": [again]})
    assert not terminated and reward == 0.0
    assert "could not write solution.py" in messages[0]["content"], messages[0]["content"]
    task = next(t for t in env.unwrapped.tasks if t.id == "digit-sum")
    sub = {"id": "s", "name": "submit", "arguments": {"code": task.answer}}
    _, reward, terminated, _, _ = env.step({"role": "assistant", "content": "", "tool_calls": [sub]})
    assert terminated and reward == 1.0  # hidden grading starts from a wiped box
