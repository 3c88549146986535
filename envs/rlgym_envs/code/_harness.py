"""The in-box test harness of `rlgym/Code-v0` (stdlib only; sent as `python3 -c SOURCE MODE NONCE`).

It never sees an expected output: the host sends one test's *input*, the harness reports what the
submitted code *did* with it, and the host compares that with the hidden expectation. So code that
patches this harness, `json`, builtins or the exit path can only change what it reports about
itself; without the expected value it cannot make a wrong answer pass.

Modes:
- `function`: stdin is `{"entry", "args", "kwargs"}`. The code's own prints go to stderr; the only
  line on stdout is `NONCE {"ok": true, "value": ...}` (or `{"ok": false, "error": ...}`), written
  after the call returns. Code that exits early leaves no such line and fails the test.
- `stdio`: stdin is the program's input; the program's stdout is compared by the host.
- `probe`: stdin is a JSON list of paths; prints which of them the box can still read.

Before running the submitted code the harness restricts itself with Landlock (Linux >= 5.13; a
no-op elsewhere): reads only under the interpreter's standard library (not its site-packages) and
system library dirs, writes only in the work dir and the temp dir. So the code cannot read the task
files of the installed package even where the sandbox's filesystem shows the host's (the local
backend without root); with root the local box does not hold them at all.
"""

import os  # os and sys are loaded at interpreter start-up, before any search of sys.path
import sys

# Never import from the work dir: a `json.py` the code left there in an earlier run must not run here.
sys.path[:] = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != os.getcwd()]

import ctypes  # noqa: E402
import json  # noqa: E402

_SYS_CREATE, _SYS_ADD, _SYS_RESTRICT = 444, 445, 446  # the same numbers on x86-64 and arm64
_READ = 1 | 4 | 8  # EXECUTE | READ_FILE | READ_DIR
_FILE_ONLY = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # the rights a rule on a single file may carry
_SYSTEM_RO = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/etc", "/usr/share")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_PACKAGES = ("site-packages", "dist-packages")


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _readable_roots():
    """The standard library (without its site-packages) and system library dirs: what plain Python needs.

    Never `sys.path`: it may hold the caller's folders (an editable install, a checkout under /tmp).
    """
    stdlib = os.path.dirname(os.__file__)
    roots = [os.path.join(stdlib, n) for n in os.listdir(stdlib) if n not in _PACKAGES]
    return roots + [p for p in _SYSTEM_RO if os.path.isdir(p)]


def _writable():
    """The work dir and the box's temp dir (the local backend without root points TMPDIR at the work dir)."""
    return [os.getcwd(), os.environ.get("TMPDIR") or "/tmp"]


def landlock(writable):
    """Confine this process (and its children) to the readable roots and `writable`; returns the ABI or 0."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall, arg = libc.syscall, ctypes.c_long
        abi = syscall(arg(_SYS_CREATE), None, arg(0), arg(1))  # LANDLOCK_CREATE_RULESET_VERSION
        if abi < 1:
            return 0
        handled = (1 << 13) - 1
        handled |= (1 << 13 if abi >= 2 else 0) | (1 << 14 if abi >= 3 else 0) | (1 << 15 if abi >= 5 else 0)
        attr = ctypes.c_uint64(handled)
        ruleset = syscall(arg(_SYS_CREATE), ctypes.byref(attr), arg(8), arg(0))
        if ruleset < 0:
            return 0
        rules = [(p, handled) for p in writable] + [(p, _READ) for p in _readable_roots()]
        rules += [(p, 2 | 4) for p in _DEVICES]
        # Listing the stdlib folder itself: the import system lists a sys.path entry before it finds
        # any module there (without it, `import heapq` fails). Listing only: site-packages below it
        # shows names, and none of its files can be opened.
        rules += [(os.path.dirname(os.__file__), 8)]  # READ_DIR
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not os.path.isdir(path):
                    rights &= _FILE_ONLY & handled
                rule = _PathBeneath(rights, fd)
                syscall(arg(_SYS_ADD), arg(ruleset), arg(1), ctypes.byref(rule), arg(0))
            finally:
                os.close(fd)
        libc.prctl(arg(38), arg(1), arg(0), arg(0), arg(0))  # PR_SET_NO_NEW_PRIVS, required by Landlock
        ok = syscall(arg(_SYS_RESTRICT), arg(ruleset), arg(0)) == 0
        os.close(ruleset)
        return abi if ok else 0
    except Exception:  # no Landlock here (old kernel, seccomp): the sandbox's own isolation still holds
        return 0


def _load(name):
    """The submitted code as a module namespace (its `if __name__ == "__main__":` block does not run)."""
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    namespace = {"__name__": name, "__file__": os.path.abspath("solution.py"), "__builtins__": __builtins__}
    return source, namespace


def run_function(nonce):
    request = json.loads(sys.stdin.read())
    report_fd = os.dup(1)
    os.dup2(2, 1)  # the code's prints go to stderr: stdout carries only the harness's report
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115
    landlock(_writable())
    try:
        source, namespace = _load("solution")
        exec(compile(source, "solution.py", "exec"), namespace)
        entry = namespace.get(request["entry"])
        if not callable(entry):
            raise NameError(f"the code defines no function named {request['entry']!r}")
        value = entry(*request["args"], **request.get("kwargs", {}))
        try:
            report = {"ok": True, "value": value}
            text = json.dumps(report)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"ok": False, "error": f"the return value is not JSON data ({exc})"})
    except BaseException as exc:
        _print_user_traceback(exc)
        text = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
    sys.stdout.flush()
    sys.stderr.flush()
    os.write(report_fd, f"{nonce} {text}\n".encode())


def _print_user_traceback(exc):
    """The traceback from the submitted code's frames on (the harness's own frame is noise to the model)."""
    import traceback

    tb = exc.__traceback__.tb_next if exc.__traceback__ else None
    traceback.print_exception(type(exc), exc, tb)


def run_stdio():
    landlock(_writable())
    source, namespace = _load("__main__")
    try:
        exec(compile(source, "solution.py", "exec"), namespace)
    except SystemExit:
        raise
    except BaseException as exc:
        _print_user_traceback(exc)
        sys.exit(1)


def probe():
    paths = json.loads(sys.stdin.read())
    abi = landlock(_writable())
    readable = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.read(1)
            readable.append(path)
        except OSError:
            pass
    sys.stdout.write(json.dumps({"landlock": abi, "readable": readable}) + "\n")


def main():
    mode, nonce = sys.argv[1], sys.argv[2]
    if mode == "function":
        run_function(nonce)
    elif mode == "stdio":
        run_stdio()
    elif mode == "probe":
        probe()
    else:
        raise SystemExit(f"unknown harness mode {mode!r}")


if __name__ == "__main__":
    main()
