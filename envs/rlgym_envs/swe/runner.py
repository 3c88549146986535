"""The in-box test runner of `rlgym/SWE-v0`: standard library only, run as `python3 -c <this file>`.

It reads one JSON request on stdin, so a test run is a single sandbox execution:

    {"nonce": "...", "root": "repo", "fresh": false, "files": {"pkg/mod.py": "..."},
     "selectors": ["tests/test_x.py::TestY"], "ids": null, "test_timeout": 10, "quiet": false,
     "cleanup": false}

- `files` are written under `root` first (`fresh` empties `root` before, `cleanup` removes it after);
- then the tests are collected: `unittest.TestCase` methods, plain `test_*` functions (assert style)
  and methods of plain `Test*` classes, in files named `test_*.py` or `*_test.py`. Ids look like
  pytest's: `tests/test_x.py::TestY::test_z`, `tests/test_x.py::test_f`;
- `ids` (exact ids, used by the grader) or `selectors` (id prefixes, files, directories, or a
  substring of the id) pick the tests; nothing picks every test;
- each test runs with its output captured and a per-test alarm; a readable report goes to stdout.

Results also go to stdout as machine lines `@@<nonce> <STATUS> <id>`, written as each test ends
(a hard kill keeps what was reported). The nonce is read from stdin before any repository code is
imported, so code under test cannot easily forge results. Code under test runs in this process, so
the runner snapshots the unittest machinery and its own globals before importing anything and
reports `@@<nonce> TAMPERED` if they changed: the grader then fails every test.
"""

import os
import sys

# `python -c` puts the working directory (the box's work dir) first on sys.path, and code under test
# can write there: drop it before importing anything, so a planted `unittest.py` is never loaded.
_cwd = os.getcwd()
sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != _cwd and not p.startswith(_cwd + os.sep)]

import builtins  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import unittest  # noqa: E402

_write = os.write
_out_fd = os.dup(1)  # results go to a private copy of stdout that code under test never touches
_BUILTIN_NAMES = frozenset(dir(builtins))
_LIST_PASSED = 40  # larger runs list only their failures (and the counts)
_TB_CHARS = 1500
_CAPTURE_CHARS = 1000


class _TestTimeout(BaseException):
    """Raised in a test by the per-test alarm (a BaseException so `except Exception` cannot eat it)."""


def _emit(text):
    data = text.encode("utf-8", "backslashreplace")
    while data:
        data = data[_write(_out_fd, data) :]


def _clip(text, limit):
    return text if len(text) <= limit else text[: limit // 2] + "\n[...]\n" + text[-limit // 2 :]


def _prepare(request):
    root = os.path.abspath(request["root"])
    if request.get("fresh"):
        shutil.rmtree(root, ignore_errors=True)
    for rel, content in (request.get("files") or {}).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
    os.makedirs(root, exist_ok=True)
    os.chdir(root)
    sys.path.insert(0, root)
    return root


def _test_files(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py")):
                found.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return found


def _module_name(root, rel):
    """Dotted name when every directory on the way is a package, else the bare name (its dir goes on sys.path)."""
    parts = rel[:-3].split("/")
    for i in range(1, len(parts)):
        if not os.path.exists(os.path.join(root, *parts[:i], "__init__.py")):
            folder = os.path.join(root, *parts[:-1])
            if folder not in sys.path:
                sys.path.insert(1, folder)
            return parts[-1]
    return ".".join(parts)


def _collect(module, rel):
    """(id, runner) pairs of one module; a runner returns (status, details)."""
    tests = []
    for name, obj in sorted(vars(module).items(), key=lambda item: str(getattr(item[1], "__qualname__", item[0]))):
        if getattr(obj, "__module__", None) != module.__name__:
            continue
        if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
            for method in unittest.TestLoader().getTestCaseNames(obj):
                tests.append((f"{rel}::{name}::{method}", ("case", obj, method)))
        elif isinstance(obj, type) and name.startswith("Test"):
            for method in sorted(m for m in vars(obj) if m.startswith("test") and callable(getattr(obj, m))):
                tests.append((f"{rel}::{name}::{method}", ("plain_method", obj, method)))
        elif callable(obj) and name.startswith("test"):
            tests.append((f"{rel}::{name}", ("function", obj, None)))
    return tests


def _selected(test_id, selectors):
    if not selectors:
        return True
    for sel in selectors:
        sel = sel.strip().rstrip("/")
        if not sel:
            return True
        if test_id == sel or test_id.startswith(sel + "::") or test_id.startswith(sel + "/"):
            return True
        if "::" not in sel and "/" not in sel and not sel.endswith(".py") and sel in test_id:
            return True
    return False


def _file_wanted(rel, selectors):
    """Whether any selector may pick a test of file `rel` (bare words match every file's ids)."""
    for sel in selectors or [""]:
        sel = sel.strip().rstrip("/")
        path = sel.split("::", 1)[0]
        if "::" in sel or "/" in sel or sel.endswith(".py"):
            if rel == path or rel.startswith(path + "/"):
                return True
        else:
            return True
    return False


class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def addSuccess(self, test):
        self.outcomes[test.id()] = ("PASS", "")

    def addSkip(self, test, reason):
        self.outcomes[test.id()] = ("PASS", f"skipped: {reason}")

    def addExpectedFailure(self, test, err):
        self.outcomes[test.id()] = ("PASS", "expected failure")

    def addFailure(self, test, err):
        self.outcomes[test.id()] = ("FAIL", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        self.outcomes[test.id()] = ("FAIL", self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):
        self.outcomes[test.id()] = ("FAIL", "unexpected success")


def _on_alarm(signum, frame):
    raise _TestTimeout("the test ran past its time limit")


def _run_one(kind, obj, method, timeout):
    """Runs one test; returns (status, details, captured output)."""
    buffer = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = buffer
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        if kind == "case":
            result = _Result()
            unittest.TestSuite([obj(method)]).run(result)  # a suite runs setUpClass/tearDownClass too
            status, details = next(iter(result.outcomes.values()), ("FAIL", _class_error(result)))
        else:
            try:
                if kind == "plain_method":
                    instance = obj()
                    if hasattr(instance, "setup_method"):
                        instance.setup_method(getattr(instance, method))
                    getattr(instance, method)()
                else:
                    obj()
                status, details = "PASS", ""
            except Exception as exc:  # the report starts at the test's frame, not the runner's
                status, details = "FAIL", "".join(traceback.format_exception(exc, exc, exc.__traceback__.tb_next))
    except _TestTimeout:
        status, details = "FAIL", f"timed out after {timeout:g}s"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = saved
    return status, details, buffer.getvalue()


def _class_error(result):
    errors = [text for _, text in result.errors + result.failures]
    return errors[0] if errors else "the test did not run"


def _snapshot(main_globals):
    """Identities of what decides a test's outcome: unittest's classes (strict) and modules, this runner."""
    case, result, suite = unittest.case, unittest.result, unittest.suite
    watched = [unittest.TestCase, case._Outcome, unittest.TestResult, unittest.TestSuite, suite.BaseTestSuite, _Result]
    classes = {f"{cls.__qualname__}.{k}": id(v) for cls in watched for k, v in vars(cls).items()}
    modules = {f"runner.{k}": id(v) for k, v in main_globals.items() if not k.startswith("__")}
    for module in (unittest, case, result, suite, traceback, signal, os):
        modules.update({f"{module.__name__}.{k}": id(v) for k, v in vars(module).items() if not k.startswith("__")})
    return classes, modules


def _tampered(before, after):
    """A changed or removed entry, a new class attribute, or a new module global that shadows a builtin.

    Other new module globals are normal (`import unittest.mock` adds `unittest.mock`).
    """
    (classes, modules), (classes_now, modules_now) = before, after
    if classes != classes_now or any(modules_now.get(k) != v for k, v in modules.items()):
        return True
    return any(k.rsplit(".", 1)[1] in _BUILTIN_NAMES for k in set(modules_now) - set(modules))


def main():
    raw = sys.stdin.read()
    request = json.loads(raw)
    nonce = request["nonce"]
    before = _snapshot(globals())
    start = time.monotonic()
    root = _prepare(request)
    files = _test_files(root)
    wanted = request.get("ids")
    selectors = [s for s in request.get("selectors") or [] if s.strip()]
    quiet = bool(request.get("quiet"))  # machine lines only (grading output is never shown)
    if wanted is not None:
        wanted_files = {w.split("::", 1)[0] for w in wanted}
        files = [f for f in files if f in wanted_files]
    tests, broken = [], []
    for rel in files:
        if wanted is None and not _file_wanted(rel, selectors):
            continue
        try:
            module = __import__(_module_name(root, rel), fromlist=["_"])
        except BaseException:  # a test file that cannot be imported fails every test in it
            broken.append((rel, traceback.format_exc()))
            continue
        tests += _collect(module, rel)
    if wanted is not None:
        known = dict(tests)
        plan = [(w, known.get(w)) for w in wanted]
    else:
        plan = [(t, spec) for t, spec in tests if _selected(t, selectors)]
    counts = {"PASS": 0, "FAIL": 0}
    failures = []
    for rel, tb in broken:
        if wanted is None:
            counts["FAIL"] += 1
            failures.append((f"{rel} (import)", tb, ""))
            _emit(f"ERROR {rel} (could not import)\n@@{nonce} FAIL {rel}\n")
    for test_id, spec in plan:
        if spec is None:
            status, details, captured = "FAIL", "no such test (it was not collected)", ""
            for rel, tb in broken:
                if test_id.startswith(rel + "::"):
                    details = f"its file could not be imported:\n{tb}"
        else:
            status, details, captured = _run_one(*spec, float(request.get("test_timeout") or 10))
        counts[status] += 1
        if status == "FAIL":
            failures.append((test_id, details, captured))
        shown = not quiet and (status == "FAIL" or len(plan) <= _LIST_PASSED)
        human = f"{'PASSED' if status == 'PASS' else 'FAILED'} {test_id}\n" if shown else ""
        _emit(f"{human}@@{nonce} {status} {test_id}\n")
    if _tampered(before, _snapshot(globals())):
        _emit(f"@@{nonce} TAMPERED\nThe test machinery was modified while the tests ran; no result counts.\n")
    if not plan and not broken:
        _emit(f"no tests matched {selectors or 'the repository'}; test ids look like tests/test_x.py::TestY::test_z\n")
    prefix = root.rstrip(os.sep) + os.sep  # tracebacks show repository paths, not the box's layout
    for test_id, details, captured in [] if quiet else failures:
        details = details.replace(prefix, "")
        _emit(f"\n____ {test_id} ____\n{_clip(details.rstrip(), _TB_CHARS)}\n")
        if captured.strip():
            _emit(f"---- captured output ----\n{_clip(captured.rstrip(), _CAPTURE_CHARS)}\n")
    if request.get("cleanup"):
        os.chdir("/")
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.monotonic() - start
    _emit(f"\n{counts['PASS']} passed, {counts['FAIL']} failed in {elapsed:.2f}s\n@@{nonce} DONE\n")
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: atexit hooks of code under test must not print after DONE


main()
