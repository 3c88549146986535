# ruff: noqa: F821, SIM105  (a fragment: os, sys, json, ctypes, landlock, _load... come from _harness.py)
# Appended to `_harness.py` (whose `landlock`, `_writable` and `_load` it uses) and sent as
# `python3 -c SOURCE check`: grades HumanEval/MBPP-style tasks, whose tests are Python code that
# asserts on the candidate's results (`def check(candidate): assert candidate(1) == 2`).
#
# Integrity: the test code, and so its expected values, must never be readable by the submission,
# and the verdict must be one the submission cannot fake. Two processes:
# - the judge (this process) reads the nonce, the task's prompt and its test code from stdin (never
#   argv, which other processes can read), makes itself non-dumpable (no /proc/PID/mem or fd access
#   for other processes of the same user), and never runs submitted code;
# - the worker (a child: `check-worker`) confines itself with Landlock, loads `solution.py` and calls
#   the entry point with the arguments the judge sends. Arguments and results cross the pipe as
#   `repr` text that the judge parses with `ast.literal_eval`: plain data only, so an object whose
#   `__eq__` always says True, a patched builtin, or an early exit stays in the worker.
# The judge runs `check(candidate)` with a proxy as the candidate, and writes `NONCE PASS` or
# `NONCE FAIL reason` as the only line of its stdout.

import ast as _ast
import subprocess as _subprocess

_MAX_LINE = 1 << 22  # 4 MiB of repr per call: larger results fail the test


def _read_line(stream):
    line = stream.readline(_MAX_LINE + 1)
    if not line:
        raise RuntimeError("the code exited or crashed during the test (no result)")
    if len(line) > _MAX_LINE:
        raise RuntimeError("the result is too large")
    return line


def run_check_worker():
    entry = sys.stdin.readline().strip()
    channel_in, channel_out = sys.stdin, os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the code's prints go to stderr
    landlock(_writable())
    try:
        source, namespace = _load("solution")
        exec(compile(source, "solution.py", "exec"), namespace)
        candidate = namespace.get(entry)
        if not callable(candidate):
            raise NameError(f"the code defines no function named {entry!r}")
    except BaseException as exc:
        _print_user_traceback(exc)
        channel_out.write(repr(("error", f"{type(exc).__name__}: {exc}"[:500])) + "\n")
        channel_out.flush()
        return
    channel_out.write(repr(("ready", None)) + "\n")
    channel_out.flush()
    for line in channel_in:
        args = _ast.literal_eval(line)
        try:
            reply = ("ok", repr(candidate(*args)))
        except BaseException as exc:
            reply = ("raised", f"{type(exc).__name__}: {exc}"[:500])
        channel_out.write(repr(reply) + "\n")
        channel_out.flush()


def run_check():
    request = json.loads(sys.stdin.read())
    nonce = request["nonce"]
    out = os.dup(1)
    os.dup2(2, 1)
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except Exception:
        pass
    worker = _subprocess.Popen(
        [sys.executable, "-c", f"_SOURCE = {_SOURCE!r}\nexec(_SOURCE)\n", "check-worker", "-"],
        stdin=_subprocess.PIPE,
        stdout=_subprocess.PIPE,
        text=True,
        encoding="utf-8",
        close_fds=True,
    )

    def candidate(*args):
        worker.stdin.write(repr(args) + "\n")
        worker.stdin.flush()
        kind, value = _ast.literal_eval(_read_line(worker.stdout))
        if kind == "raised":
            raise RuntimeError(f"the candidate raised {value}")
        try:
            return _ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise RuntimeError(f"the candidate returned something that is not plain data: {value[:200]}") from None

    verdict = "PASS"
    try:
        worker.stdin.write(request["entry_point"] + "\n")
        worker.stdin.flush()
        kind, value = _ast.literal_eval(_read_line(worker.stdout))
        if kind != "ready":
            raise RuntimeError(value)
        namespace = {"__name__": "__check__", "__builtins__": __builtins__}
        exec(compile(request["prompt"], "prompt.py", "exec"), namespace)  # the task's own helpers
        namespace[request["entry_point"]] = candidate
        exec(compile(request["test"], "test.py", "exec"), namespace)
        namespace["check"](candidate)
    except AssertionError as exc:
        verdict = "FAIL a test assertion failed" + (f": {exc}" if str(exc) else "")
    except BaseException as exc:
        verdict = f"FAIL {type(exc).__name__}: {exc}"
    finally:
        try:
            worker.stdin.close()
        except OSError:
            pass
        worker.kill()
        worker.wait()
    os.write(out, f"{nonce} {verdict[:600]}\n".encode())


def check_main():
    if sys.argv[1] == "check":
        run_check()
    else:
        run_check_worker()
