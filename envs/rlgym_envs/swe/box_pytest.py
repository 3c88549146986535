"""The in-box side of `rlgym/SWE-v0`'s test runs: standard library only, run as `python3 -I -B -c <this file>`.

It never imports repository code. It reads one JSON request on stdin:

    {"root": "repo", "fresh": false, "cleanup": false, "files": {"pkg/mod.py": "..."},
     "pytest_dir": "/.../pytest-9.0.3-...", "python_path": ["src"], "timeout": 50, "test_timeout": 10,
     "log_chars": 600000, "runs": [{"files": {"tests/test_x.py": "..."}, "args": ["tests/test_x.py::test_y"]}]}

writes `files` under `root` (`fresh` empties it first, `cleanup` removes it at the end), and for each
run writes the run's own files, then starts pytest in a child process (`python3 -s -P -B` with an environment of its own
making, hash seed 0, plugin autoloading off, an empty ini given with `-c` so the repository's config files cannot add options or
plugins) with the run's arguments. The child's stdout and stderr go to a file, never to this
process's stdout, and this process makes itself non-dumpable first, so the code under test cannot
reach the one line this process prints at the end: `{"runs": [{"log": ..., "exit": ..., "timed_out": ...}]}`.
The host (`rlgym_envs.swe.grading`) reads the per-test outcomes from each log, as the swebench
package parses pytest logs.
"""

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

# The child: put pytest and the repository on sys.path, arm a per-test alarm, run pytest.
BOOT = r"""
import json, os, signal, sys
cfg = json.loads(sys.argv.pop(1))
sys.path[:0] = cfg["path"]
import pytest

class _PerTestAlarm:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        def expire(signum, frame):
            raise TimeoutError("the test ran past its %gs time limit" % cfg["test_timeout"])
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, cfg["test_timeout"])
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

sys.exit(pytest.main(sys.argv[1:], plugins=[_PerTestAlarm()]))
"""

_ARGS = ["-p", "no:cacheprovider", "-o", "console_output_style=classic", "-rfEsxXp", "--color=no"]


def _no_dumping():
    """Makes /proc/<this pid>/fd and ptrace of this process off limits to the (same-uid) child."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _write(root, files):
    for rel, content in (files or {}).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)


def _clip(text, limit):
    if len(text) <= limit:
        return text
    head = limit // 4
    return text[:head] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-(limit - head) :]


def _pytest(request, root, run, scratch):
    ini = os.path.join(scratch, "pytest.ini")
    with open(ini, "w") as f:
        f.write("[pytest]\n")
    path = [request["pytest_dir"], root] + [os.path.join(root, p) for p in request.get("python_path") or []]
    cfg = json.dumps({"path": path, "test_timeout": float(request.get("test_timeout") or 10)})
    # Not -I, which would drop PYTHONHASHSEED: the environment below is the child's whole environment,
    # -s skips user site-packages and -P keeps the working directory off sys.path.
    argv = [sys.executable, "-s", "-P", "-B", "-c", BOOT, cfg, "-c", ini, "--rootdir", root, *_ARGS, *run["args"]]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", root),
        "LANG": "C.UTF-8",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "COLUMNS": "120",
    }
    log_path = os.path.join(scratch, "log")
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            argv, cwd=root, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True
        )
        timed_out = False
        try:
            code = child.wait(timeout=float(request.get("timeout") or 60))
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        with contextlib.suppress(OSError):  # whatever the tests left running goes too
            os.killpg(child.pid, signal.SIGKILL)
        if code is None:
            code = child.wait()
    with open(log_path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return {"log": _clip(text, int(request.get("log_chars") or 600000)), "exit": code, "timed_out": timed_out}


def main():
    request = json.loads(sys.stdin.read())
    _no_dumping()
    out_fd = os.dup(1)
    root = os.path.abspath(request["root"])
    if request.get("fresh"):
        shutil.rmtree(root, ignore_errors=True)
    _write(root, request.get("files"))
    os.makedirs(root, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="rlgym-pytest-")
    results = []
    try:
        for run in request["runs"]:
            _write(root, run.get("files"))
            results.append(_pytest(request, root, run, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if request.get("cleanup"):
            shutil.rmtree(root, ignore_errors=True)
    data = (json.dumps({"runs": results}) + "\n").encode()
    while data:
        data = data[os.write(out_fd, data) :]


main()
