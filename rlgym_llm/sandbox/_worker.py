"""The warm worker behind `LocalSandbox`: one long-lived process per box that forks per execution.

Run as a script (`python _worker.py`, stdlib only, so forking is cheap and `python -c` code runs in
a clean interpreter). It speaks length-prefixed JSON on fds 0/1 with `rlgym_llm.sandbox.local`.

Isolation layers (each is reported back in the `init` answer; all need root, see `local.py`):
- the worker itself enters new mount, IPC and (network off) network namespaces once and moves into
  a fresh root holding only the system dirs and the interpreter, read-only (site-packages hidden),
  and one size-capped tmpfs for the work dir, /tmp, /var/tmp and /dev/shm (see `_isolation.py`);
  the interpreter keeps the path it was started by (its symlinks are made again there); `init`
  fails (`_isolation.Refused`) when that root cannot hold the interpreter at that path, or the
  box's uid cannot reach it;
- each execution gets a fresh PID namespace whose init is a tiny forked supervisor: when the
  command exits (or the timeout kills the supervisor) the kernel kills every process left in the
  namespace, including ones that called setsid or double-forked;
- every execution (and file helper) joins the box's cgroup (`_cgroup.py`): one memory budget,
  tmpfs files and shared memory included, and one process budget for the whole box;
- the command runs as a per-box uid (so RLIMIT_NPROC counts only this box and host files with
  0600/0700 modes are unreadable), with rlimits, no_new_privs, a seccomp filter (no new
  namespaces, ptrace, keyrings, bpf, mounts: `_isolation.DENIED_SYSCALLS`) and a scrubbed
  environment;
- a worker serves one episode: `LocalSandbox.reset` replaces it (new namespaces, tmpfs, uid, cgroup,
  and a heap that never held the last episode's data).
"""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import os
import resource
import select
import signal
import stat
import struct
import sys
import time
from typing import Any

if __package__:  # imported as rlgym_llm.sandbox._worker
    from rlgym_llm.sandbox import _isolation as iso
else:  # run as a script (the normal case): import the sibling file, not the heavier package
    import _isolation as iso  # type: ignore[no-redef]

    if os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # box code must not import this file's siblings by bare name

_PYTHON_NAMES = {"python", "python3", f"python3.{sys.version_info.minor}"}
_FILE_OP_S = 10.0  # longest a read_file/write_file helper may take
CONFIG: dict = {}  # set by `init`; read by the forked children


# ---------------------------------------------------------------- protocol


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _send(fd: int, obj: dict) -> None:
    data = json.dumps(obj).encode()
    data = struct.pack(">I", len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


# ---------------------------------------------------------------- one-time isolation of the worker


def op_init(req: dict) -> dict:
    CONFIG.update(req)
    report: dict[str, Any] = {"root": os.geteuid() == 0, "netns": False, "mountns": False, "pidns": False, "uid": None}
    work = req["work_dir"]
    report["cgroup"] = _open_cgroup(req.get("cgroup"))
    if os.geteuid() == 0:
        if not req["limits"]["network"]:
            try:
                iso.unshare(iso.CLONE_NEWNET)
                iso.loopback_up()
                report["netns"] = True
            except OSError as exc:
                report["netns_error"] = str(exc)
        try:
            iso.isolate_fs(work, req["expose"], req["disk_mb"], report)
            report["mountns"] = True
            sys.path_importer_cache.clear()  # directory listings cached from the host's filesystem
        except OSError as exc:
            report["mountns_error"] = str(exc)
        try:  # probe: the per-exec PID namespace needs unshare + setns back
            CONFIG["pidns_fd"] = os.open("/proc/self/ns/pid", os.O_RDONLY)
            iso.unshare(iso.CLONE_NEWPID)
            iso.check(iso.libc.setns(CONFIG["pidns_fd"], iso.CLONE_NEWPID), "setns")
            report["pidns"] = True
        except OSError as exc:
            report["pidns_error"] = str(exc)
        os.chown(work, req["uid"], req["uid"])
        os.chmod(work, 0o700)
        report["uid"] = req["uid"]
    CONFIG["seccomp"] = iso.seccomp_program()
    report["seccomp"] = CONFIG["seccomp"] is not None and _probe_seccomp()
    CONFIG["report"] = report
    CONFIG["tmp"] = "/tmp" if report["mountns"] else work
    if report["mountns"] and report["uid"] is not None:  # bound as on the host: modes such as 0700 hold
        wanted = [(sys.executable, os.R_OK | os.X_OK), (os.__file__, os.R_OK)]
        closed = _as_box_user(_closed_to_box, wanted).decode()
        if closed:
            raise iso.Refused(
                f"the box's user (uid {report['uid']}) cannot reach {closed}, on the way to the interpreter "
                f"{sys.executable} and its standard library: make it readable by all (chmod o+rx {closed}), "
                "or run a Python that other users may read"
            )
    return {"isolation": report}


def _closed_to_box(wanted: list[tuple[str, int]]) -> bytes:
    """The first folder (or file) on the way to a wanted (path, access mode) that this process lacks."""
    for path, mode in wanted:
        if os.access(path, mode):
            continue
        for chain in (os.path.abspath(path), os.path.realpath(path)):  # a venv's python links to its base's
            parts = chain.strip("/").split("/")
            for depth in range(1, len(parts)):
                folder = "/" + "/".join(parts[:depth])
                if not os.access(folder, os.X_OK):
                    return folder.encode()
        return path.encode()
    return b""


def _open_cgroup(cgroup: dict | None) -> bool:
    """Opens the box cgroup's files now: after `isolate_fs` the worker no longer sees /sys."""
    if not cgroup:
        return False
    try:
        CONFIG["cg_procs"] = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in cgroup["procs"]]
        CONFIG["cg_oom"] = os.open(cgroup["oom_file"], os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        CONFIG["cg_procs"], CONFIG["cg_oom"] = [], None
        return False
    return True


def _join_box_cgroups() -> None:
    """Moves this (forked) process into the box's cgroups, first in line for the OOM killer."""
    for fd in CONFIG.get("cg_procs", []):
        os.write(fd, b"0")  # "0": the writing process itself, whatever its pid namespace
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _oom_kills() -> int:
    fd = CONFIG.get("cg_oom")
    return iso.read_oom_kills(fd) if fd is not None else 0


def _probe_seccomp() -> bool:
    """Whether the filter installs here (a kernel without seccomp, or a stricter parent filter, refuses it)."""
    pid = os.fork()
    if pid == 0:
        try:
            iso.prctl(iso.PR_SET_NO_NEW_PRIVS, 1)
            iso.install_seccomp(CONFIG["seccomp"])
            os._exit(0 if iso.libc.unshare(iso.CLONE_NEWNS) != 0 else 1)  # denied by the filter
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


# ---------------------------------------------------------------- file operations (as the box user)


def _as_box_user(fn, *args):
    """Runs fn in a forked child with the box's uid, so box-made symlinks can't reach host files.

    Bounded: a helper that does not answer within `_FILE_OP_S` is killed (and it dies with the worker).
    """
    uid = CONFIG["report"]["uid"]
    if uid is None:
        return fn(*args)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _join_box_cgroups()  # files it writes count against the box's memory
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
            if os.getppid() == 1:
                os._exit(1)  # the worker is already gone
            out: dict[str, Any] = {"value": base64.b64encode(fn(*args) or b"").decode()}
        except OSError as exc:
            out = {"errno": exc.errno, "msg": exc.strerror or str(exc), "path": args[0]}
        except BaseException as exc:
            out = {"errno": errno.EIO, "msg": repr(exc), "path": args[0]}
        with contextlib.suppress(BaseException):
            os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + _FILE_OP_S
    try:
        while (left := deadline - time.monotonic()) > 0 and select.select([r], [], [], left)[0]:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        else:
            os.kill(pid, signal.SIGKILL)
            raise OSError(errno.ETIMEDOUT, f"the file operation took more than {_FILE_OP_S:g}s", args[0])
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    out = json.loads(b"".join(chunks) or b'{"errno": 5, "msg": "file helper died", "path": ""}')
    if "errno" in out:
        raise OSError(out["errno"], out["msg"], out["path"])
    return base64.b64decode(out["value"])


def _open_regular(path: str, flags: int) -> int:
    """Opens a regular file without blocking: a FIFO, socket or device the box left there is refused."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC, 0o644)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
        raise OSError(code, "not a regular file")
    os.set_blocking(fd, True)
    return fd


def _write(path: str, data: bytes) -> bytes:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = _open_regular(path, os.O_WRONLY | os.O_CREAT)  # a FIFO without a reader: ENXIO, never a hang
    os.ftruncate(fd, 0)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return b""


def _read(path: str, limit: int) -> bytes:
    with os.fdopen(_open_regular(path, os.O_RDONLY), "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"file is larger than the {limit}-byte read limit")
    return data


def op_write(req: dict) -> dict:
    path = os.path.join(CONFIG["work_dir"], req["path"])
    _as_box_user(_write, path, base64.b64decode(req["data"]))
    return {}


def op_read(req: dict) -> dict:
    data = _as_box_user(_read, os.path.join(CONFIG["work_dir"], req["path"]), req["limit"])
    return {"data": base64.b64encode(data).decode()}


# ---------------------------------------------------------------- execution


def _set_limits(limits: dict, nproc: bool) -> None:
    mem = limits["memory_mb"] * 1024 * 1024
    cpu = max(1, int(-(-limits["cpu_s"] // 1)))  # whole seconds, rounded up
    wanted = {
        resource.RLIMIT_AS: (mem, mem),
        resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
        resource.RLIMIT_FSIZE: (CONFIG["disk_mb"] * 1024 * 1024,) * 2,
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_NOFILE: (1024, 1024),
    }
    if nproc:  # per real uid, system-wide: only meaningful when the box has a uid of its own
        wanted[resource.RLIMIT_NPROC] = (limits["max_procs"],) * 2
    for which, value in wanted.items():
        resource.setrlimit(which, value)


def _python_target(argv: list[str]) -> tuple[str, str] | None:
    """('-c', code) or ('file', path) when argv is a plain `python -c`/`python FILE` we can run in-process."""
    if len(argv) < 2 or not (argv[0] == sys.executable or os.path.basename(argv[0]) in _PYTHON_NAMES):
        return None
    if argv[1] == "-c" and len(argv) >= 3:
        return ("-c", argv[2])
    if not argv[1].startswith("-"):
        return ("file", argv[1])
    return None


def _run_python(kind: str, target: str, argv: list[str], env: dict) -> None:
    """Runs code in this (forked, warm) interpreter the way `python -c`/`python FILE` would; never returns."""
    import builtins
    import types

    os.environ.clear()
    os.environ.update(env)
    sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)  # type: ignore[misc]  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)  # type: ignore[misc]  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(  # type: ignore[misc]  # noqa: SIM115
        2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    if kind == "-c":
        sys.argv, filename, first = ["-c", *argv[3:]], "<string>", ""
        source: str | bytes = target
    else:
        sys.argv, filename = argv[1:], target
        first = os.path.dirname(os.path.abspath(target))
        try:
            with open(target, "rb") as f:
                source = f.read()
        except OSError as exc:
            sys.stderr.write(f"{argv[0]}: can't open file {target!r}: [Errno {exc.errno}] {exc.strerror}\n")
            os._exit(2)
        main.__file__ = target
    sys.path.insert(0, first)
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(compile(source, filename, "exec"), main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code & 0xFF
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    except BaseException as exc:
        tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # hide this runner's frame
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        code = 1
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()  # like interpreter exit: wait for non-daemon threads
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120  # CPython's status when flushing stdout fails at exit
    os._exit(code)


def _close_all_but(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1 << 20)


def _box_child(req: dict, fds: dict) -> None:
    """The box process (second fork): plumbing, limits, privilege drop, then the command. Never returns."""
    try:
        _join_box_cgroups()  # the box's memory and pids budget, for everything forked from here on
        os.dup2(fds["in_r"], 0)
        os.dup2(fds["out_w"], 1)
        os.dup2(fds["err_w"], 2)
        _close_all_but({fds["ex_w"]})
        os.chdir(req["cwd"])
        os.umask(0o022)
        uid = CONFIG["report"]["uid"]
        _set_limits(CONFIG["limits"], nproc=uid is not None)
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        iso.prctl(iso.PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries (su, mount...) can't regain privileges
        if CONFIG["report"]["seccomp"]:
            iso.install_seccomp(CONFIG["seccomp"])  # no namespaces, ptrace, keyrings, bpf, mounts...
        python = _python_target(req["argv"])
        if python is not None:
            os.close(fds["ex_w"])
            _run_python(*python, req["argv"], req["env"])
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):  # CPython changed these; programs expect defaults
            signal.signal(sig, signal.SIG_DFL)
        os.execvpe(req["argv"][0], req["argv"], req["env"])
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            os.write(2, f"sandbox: {exc}\n".encode())
        err = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EINVAL
        with contextlib.suppress(BaseException):
            os.write(fds["ex_w"], struct.pack("<i", err) + str(exc).encode()[:500])
    os._exit(127)


def _supervisor(req: dict, fds: dict) -> None:
    """First fork: init of the fresh PID namespace. Its exit makes the kernel kill every leftover."""
    try:
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)  # the worker died: take the whole box down
        _close_all_but({fds[k] for k in ("in_r", "out_w", "err_w", "ex_w", "st_w")} | set(CONFIG.get("cg_procs", [])))
        os.setsid()
        if CONFIG["report"]["pidns"] and CONFIG["report"]["mountns"]:
            with contextlib.suppress(OSError):  # a /proc of this namespace only: host processes stay invisible
                iso.unshare(iso.CLONE_NEWNS)
                iso.mount("proc", "/proc", "proc", iso.MS_NOSUID | iso.MS_NODEV | iso.MS_NOEXEC)
        child = os.fork()
        if child == 0:
            _box_child(req, fds)
        for fd in (fds["in_r"], fds["out_w"], fds["err_w"], fds["ex_w"]):
            os.close(fd)
        while True:  # also reaps orphans reparented to us (we are their init)
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                break
        os.write(fds["st_w"], struct.pack("<i", status))
    finally:
        os._exit(0)


def _kill_uid_leftovers(uid: int) -> None:
    """Fallback when PID namespaces are unavailable: kill every host process running as the box uid."""
    for _ in range(3):
        found = False
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if os.stat(f"/proc/{entry}").st_uid == uid:
                        os.kill(int(entry), signal.SIGKILL)
                        found = True
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.01)


def op_exec(req: dict) -> dict:
    limits = CONFIG["limits"]
    cap, flood = limits["output_bytes"], CONFIG["flood_bytes"]
    req["env"] = {**CONFIG["base_env"], "TMPDIR": CONFIG["tmp"], **req["env"]}
    req["cwd"] = os.path.join(CONFIG["work_dir"], req.get("cwd") or "")
    stdin = base64.b64decode(req["stdin"])
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    ex_r, ex_w = os.pipe()
    fds = {"in_r": in_r, "out_w": out_w, "err_w": err_w, "st_w": st_w, "ex_w": ex_w}
    pidns = CONFIG["report"]["pidns"]
    oom_before = _oom_kills()
    start = time.monotonic()
    if pidns:
        iso.unshare(iso.CLONE_NEWPID)  # our next child is PID 1 of a fresh namespace
    try:
        pid = os.fork()
        if pid == 0:
            _supervisor(req, fds)
    finally:
        if pidns:
            iso.check(iso.libc.setns(CONFIG["pidns_fd"], iso.CLONE_NEWPID), "setns")
    for fd in (in_r, out_w, err_w, st_w, ex_w):
        os.close(fd)
    pidfd = os.pidfd_open(pid)
    os.set_blocking(in_w, False)
    out = {out_r: bytearray(), err_r: bytearray()}
    dropped, open_fds, killed, timed_out = 0, {out_r, err_r}, False, False
    writing = in_w if stdin else None
    if writing is None:
        os.close(in_w)
    deadline = start + req["timeout"]
    exited = False
    while open_fds or not exited:
        wait = deadline - time.monotonic()
        if wait <= 0 and not killed:
            timed_out = killed = True
            os.kill(pid, signal.SIGKILL)  # from outside the namespace: kills its init, hence everything
        watch = [*open_fds] + ([pidfd] if not exited else [])
        ready, can_write, _ = select.select(watch, [writing] if writing is not None else [], [], max(wait, 0.05))
        for fd in ready:
            if fd == pidfd:
                exited = True
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                os.close(fd)
                continue
            room = cap - len(out[fd])
            out[fd] += chunk[: max(room, 0)]
            dropped += max(len(chunk) - max(room, 0), 0)
            if dropped > flood and not killed:
                killed = True  # an output flood: keep what fits and stop it instead of draining forever
                os.kill(pid, signal.SIGKILL)
        if can_write and writing is not None:
            try:
                stdin = stdin[os.write(writing, stdin[:65536]) :]
            except BrokenPipeError:
                stdin = b""
            if not stdin:
                os.close(writing)
                writing = None
    if writing is not None:
        os.close(writing)
    os.waitpid(pid, 0)
    os.close(pidfd)
    duration = time.monotonic() - start
    status_bytes = os.read(st_r, 4)
    exec_error = os.read(ex_r, 600)
    os.close(st_r)
    os.close(ex_r)
    if not pidns:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)  # the supervisor's session: the box and its group
        if CONFIG["report"]["uid"] is not None:
            _kill_uid_leftovers(CONFIG["report"]["uid"])
    oom_kills = _oom_kills()
    exit_code, sig, error = None, None, None
    if len(status_bytes) == 4:
        status = struct.unpack("<i", status_bytes)[0]
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
        else:
            exit_code = os.WEXITSTATUS(status)
    elif killed or oom_kills > oom_before:
        sig = signal.SIGKILL.value
    else:
        error = "the box supervisor died without reporting a status"
    if exec_error:
        exit_code, error = None, f"could not execute {req['argv'][0]!r}: {exec_error[4:].decode(errors='replace')}"
    if sig == signal.SIGXCPU:
        timed_out = True  # the CPU-seconds limit is a time limit too
    stderr = out[err_r].decode("utf-8", "replace")
    tail = stderr.rstrip().rsplit("\n", 1)[-1]
    return {
        "stdout": out[out_r].decode("utf-8", "replace"),
        "stderr": stderr,
        "exit_code": exit_code,
        "timed_out": timed_out,
        "duration_s": round(duration, 6),
        "truncated": dropped > 0,
        "oom_killed": oom_kills > oom_before or tail.startswith("MemoryError") or "std::bad_alloc" in tail,
        "signal": sig,
        "error": error,
    }


OPS = {"init": op_init, "exec": op_exec, "write": op_write, "read": op_read}


def main() -> None:
    # Move the protocol off fds 0/1 so nothing forked later can inherit or scribble on it.
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    with contextlib.suppress(OSError):
        iso.prctl(iso.PR_SET_PDEATHSIG, signal.SIGKILL)  # never outlive the process that owns the sandbox
    while True:
        try:
            (size,) = struct.unpack(">I", _read_exact(rfd, 4))
            req = json.loads(_read_exact(rfd, size))
        except EOFError:
            return
        try:
            answer = {"ok": True, **OPS[req["op"]](req)}
        except OSError as exc:
            answer = {"ok": False, "errno": exc.errno, "error": str(exc)}
        except iso.Refused as exc:  # a box that cannot be built as asked: the host refuses to start it
            answer = {"ok": False, "errno": None, "error": str(exc)}
        except Exception as exc:  # report to the host instead of dying: the host decides what broke
            answer = {"ok": False, "errno": None, "error": f"{type(exc).__name__}: {exc}"}
        _send(wfd, answer)


if __name__ == "__main__":
    main()
