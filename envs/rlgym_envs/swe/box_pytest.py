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
package parses pytest logs. A run with `"trace": true` runs traced test files (`rlgym_envs.swe.trace`):
the child also loads `RECORDER`, whose records (`T <node id>` / `R <site> <hash>` lines) come back
as the run's `records` instead of its log; the host compares them with the gold fix's.
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
# The recorder of traced test files (`rlgym_envs.swe.trace`): canonical value -> short hash, one line
# per record on a file of the run's scratch folder. The code under test can write that file too;
# that is allowed for: the host pays only records equal to the gold fix's, which never enter the box.
RECORDER = r"""
import hashlib, re, sys, types
_out = [None]
_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")
_OPAQUE = {"socket", "_socket", "_io", "io", "select", "selectors", "ssl", "_ssl", "threading", "_thread", "subprocess"}

def _canon(v, depth=0):
    t = type(v)
    name = t.__module__ + "." + t.__qualname__
    if depth > 6:
        return name + ":..."
    if v is None or t in (bool, int, str, bytes, complex):
        return name + ":" + repr(v)
    if t is float:
        return name + ":" + ("%.9g" % v)
    if t in (list, tuple) or isinstance(v, (list, tuple)):
        return name + "[" + ",".join(_canon(x, depth + 1) for x in list(v)[:2000]) + "]"
    if isinstance(v, dict):
        items = sorted((_canon(k, depth + 1), _canon(x, depth + 1)) for k, x in list(v.items())[:2000])
        return name + "{" + ",".join(k + ":" + x for k, x in items) + "}"
    if isinstance(v, (set, frozenset)):
        return name + "{" + ",".join(sorted(_canon(x, depth + 1) for x in list(v)[:2000])) + "}"
    if isinstance(v, BaseException):
        return name + "(" + _canon(v.args, depth + 1) + ")"
    if isinstance(v, type):
        return "type:" + v.__module__ + "." + v.__qualname__
    if t.__module__ in _OPAQUE:  # sockets, files, threads: fds, ports and ids differ from box to box
        return name
    if t.__repr__ is object.__repr__ and hasattr(v, "__dict__"):
        return name + "<" + _canon(dict(vars(v)), depth + 1) + ">"
    return name + ":" + _ADDR.sub(" at 0x?", repr(v))

def _write(line):
    if _out[0] is not None:
        _out[0].write(line + "\n")
        _out[0].flush()

def _hash(v):
    try:
        text = _canon(v)
    except Exception as exc:
        text = "unencodable:" + type(exc).__name__
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()[:16]

_RELATIONS = {
    "Eq": lambda a, b: a == b, "NotEq": lambda a, b: a != b, "Lt": lambda a, b: a < b,
    "LtE": lambda a, b: a <= b, "Gt": lambda a, b: a > b, "GtE": lambda a, b: a >= b,
    "In": lambda a, b: a in b, "NotIn": lambda a, b: a not in b, "Is": lambda a, b: a is b,
    "IsNot": lambda a, b: a is not b,
}

def _rlgym_rec(site, *values, ctx=None, rel=()):
    _write("R %s %s" % (site, _hash(tuple(values))))
    if rel:  # the relation between computed values (no expected value is in the box)
        try:
            result = all(bool(_RELATIONS[op](values[i], values[i + 1])) for i, op in enumerate(rel))
        except Exception as exc:
            result = "raised " + type(exc).__name__
        _write("R %s.r %s" % (site, _hash(result)))
    if ctx is not None and all(v is None or type(v) is bool for v in values):
        try:  # a lone bit is guessable: the state it was read from is recorded with it
            context = ctx()
        except Exception as exc:
            context = "context raised " + type(exc).__name__
        _write("R %s.c %s" % (site, _hash(context)))

class _Raised:
    def __init__(self, site, message):
        self.site, self.message = site, message
        self.value = self.exception = self.type = self.tb = None
    def __enter__(self):
        return self
    def __exit__(self, tp, value, tb):
        if tp is not None and not issubclass(tp, Exception):
            return False
        self.type, self.value, self.exception, self.tb = tp, value, value, tb
        what = "no exception" if tp is None else tp.__module__ + "." + tp.__qualname__
        _write("R %s %s" % (self.site, _hash(what)))
        if value is not None:  # the class alone is guessable (ValueError?); its message is not
            _write("R %s.e %s" % (self.site, _hash(str(value))))
        return True
    def match(self, pattern):
        _write("R %s.m %s" % (self.site, _hash(str(self.value))))
        return True
    errisinstance = lambda self, exc: True

def _rlgym_raises(site, message=False):
    return _Raised(site, message)

def _rlgym_call_raises(site, func, *args, **kwargs):
    with _Raised(site, False) as raised:
        func(*args, **kwargs)
    return raised

module = types.ModuleType("_rlgym_trace")
module._rlgym_rec, module._rlgym_raises, module._rlgym_call_raises = _rlgym_rec, _rlgym_raises, _rlgym_call_raises
sys.modules["_rlgym_trace"] = module

class TracePlugin:
    def pytest_runtest_logstart(self, nodeid, location):
        _write("T " + nodeid)
    def pytest_runtest_logreport(self, report):
        _write("R @%s %s" % (report.when, report.outcome))
"""

# The child: put pytest and the repository on sys.path, arm a per-test alarm, run pytest.
BOOT = r"""
import json, os, signal, sys
cfg = json.loads(sys.argv.pop(1))
sys.path[:0] = cfg["path"]
import pytest
plugins = []
if cfg.get("records"):
    scope = {}
    exec(cfg["recorder"], scope)
    scope["_out"][0] = open(cfg["records"], "a", encoding="utf-8")
    plugins.append(scope["TracePlugin"]())

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

sys.exit(pytest.main(sys.argv[1:], plugins=[_PerTestAlarm(), *plugins]))
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
    records = os.path.join(scratch, "records") if run.get("trace") else None
    cfg = json.dumps(
        {
            "path": path,
            "test_timeout": float(request.get("test_timeout") or 10),
            "records": records,
            "recorder": RECORDER,
        }
    )
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
    limit = int(request.get("log_chars") or 600000)
    result = {"exit": code, "timed_out": timed_out}
    if records:  # a traced run reports its records, not its log (the host does not read it)
        try:
            with open(records, "rb") as f:
                data = f.read(limit + 1).decode("utf-8", "replace")
            os.remove(records)
        except OSError:
            data = ""
        result.update(log=_clip(text, 4000), records=data[:limit], records_cut=len(data) > limit)
    else:
        result["log"] = _clip(text, limit)
    return result


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
