"""Attacks from inside the box: each is contained, reported in the ExecResult, and the box keeps working."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from rlgym_llm.sandbox import Limits, SandboxArgumentError, check_exec_args
from tests.sandbox.conftest import host_processes, still_works

HERE = Path(__file__).resolve().parent


def py(code: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(code)]


def test_network_is_unreachable(boxed):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        code = f"""
            import socket
            for what, call in [
                ("connect", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2)),
                ("dns", lambda: socket.getaddrinfo("example.com", 80)),
                ("outside", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2)),
            ]:
                try:
                    call()
                    print(what, "REACHED")
                except OSError as exc:
                    print(what, "blocked", type(exc).__name__)
            """

        async def scenario(box):
            result = await box.exec(py(code))
            await still_works(box)
            return result

        result = boxed(scenario, Limits(wall_s=10))
        server.setblocking(False)
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected to the host's port
    assert result.exit_code == 0, result
    assert "REACHED" not in result.stdout
    assert result.stdout.count("blocked") == 3


def test_writes_outside_the_work_dir_do_not_reach_the_host(boxed):
    tag = uuid.uuid4().hex
    targets = [f"/etc/rlgym-{tag}", f"/root/rlgym-{tag}", str(HERE / f"rlgym-{tag}"), f"/tmp/rlgym-{tag}"]
    targets.append(f"/dev/shm/rlgym-{tag}")
    code = f"""
        for path in {targets!r}:
            try:
                with open(path, "w") as f:
                    f.write("pwned")
                print(path, "written")
            except OSError as exc:
                print(path, "refused", exc.errno)
        """

    async def scenario(box):
        result = await box.exec(py(code))
        await still_works(box)
        return result

    result = boxed(scenario)
    assert result.exit_code == 0, result
    for path in targets:  # refused, or landed in a throwaway layer that the host never sees
        assert not os.path.exists(path), path
    assert "refused" in result.stdout  # at least the read-only system dirs refuse outright


def test_host_files_and_caller_env_are_unreadable(boxed, monkeypatch):
    secret = f"s3cret-{uuid.uuid4().hex}"
    monkeypatch.setenv("RLGYM_TEST_SECRET", secret)
    private_dir = tempfile.mkdtemp(dir=HERE, prefix=".probe-")
    try:
        os.chmod(private_dir, 0o755)
        secret_file = os.path.join(private_dir, "secret.txt")
        with open(secret_file, "w") as f:
            f.write(secret)
        os.chmod(secret_file, 0o600)
        code = f"""
            import os
            print("env", os.environ.get("RLGYM_TEST_SECRET"), sorted(os.environ))
            for path in [{secret_file!r}, "/proc/{os.getpid()}/environ", "/proc/1/environ", "/proc/self/environ"]:
                try:
                    print(path, open(path, "rb").read())
                except OSError as exc:
                    print(path, "refused", exc.errno)
            """

        async def scenario(box):
            result = await box.exec(py(code))
            shell = await box.exec(["sh", "-c", f"cat {secret_file}; env; cat /proc/{os.getpid()}/environ"])
            await still_works(box)
            return result, shell

        result, shell = boxed(scenario)
    finally:
        os.unlink(secret_file)
        os.rmdir(private_dir)
    assert result.exit_code == 0, result
    assert f"{secret_file} refused" in result.stdout
    for out in (result, shell):
        assert secret not in out.stdout + out.stderr


def test_fork_bomb_is_contained(boxed):
    code = """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """

    async def scenario(box):
        start = time.monotonic()
        result = await box.exec(py(code), timeout=3)
        elapsed = time.monotonic() - start
        await still_works(box)
        return result, elapsed

    result, elapsed = boxed(scenario, Limits(wall_s=3, max_procs=32, cpu_s=3))
    assert elapsed < 15, elapsed
    assert not result.ok
    assert result.timed_out or result.signal is not None, result


@pytest.mark.parametrize(
    "argv",
    [
        py("x = bytearray(4 * 1024**3)"),
        py("chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024**2))"),
        ["sh", "-c", "python3 -c 'bytearray(4 * 1024**3)'"],
    ],
    ids=["one-big", "growing", "subprocess"],
)
def test_memory_bomb_is_contained(boxed, argv):
    async def scenario(box):
        result = await box.exec(argv)
        await still_works(box)
        return result

    result = boxed(scenario, Limits(memory_mb=256, wall_s=20))
    assert not result.ok
    assert result.oom_killed or result.signal == signal.SIGKILL, result
    assert result.duration_s < 15


def test_cpu_loop_is_killed(boxed):
    async def scenario(box):
        result = await box.exec(py("while True:\n    pass"))
        await still_works(box)
        return result

    result = boxed(scenario, Limits(cpu_s=1, wall_s=5))
    assert result.timed_out, result
    assert result.duration_s < 6.5  # the CPU limit, or under heavy load the 5 s wall clock


def test_sleep_past_the_timeout_returns_near_the_timeout(boxed):
    async def scenario(box):
        start = time.monotonic()
        result = await box.exec(py("import time; print('start', flush=True); time.sleep(60)"), timeout=1.0)
        elapsed = time.monotonic() - start
        await still_works(box)
        return result, elapsed

    result, elapsed = boxed(scenario, Limits(wall_s=30))
    assert result.timed_out and not result.ok, result
    assert result.stdout == "start\n"  # output produced before the kill is kept
    assert 0.9 <= elapsed < 3.0, elapsed


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_capped_and_returns_fast(boxed, stream):
    code = f"import sys\nwhile True:\n    sys.{stream}.write('x' * 65536)"

    async def scenario(box):
        start = time.monotonic()
        result = await box.exec(py(code))
        elapsed = time.monotonic() - start
        await still_works(box)
        return result, elapsed

    result, elapsed = boxed(scenario, Limits(output_bytes=1000, wall_s=30))
    assert result.truncated, result
    assert len(getattr(result, stream).encode()) <= 1000
    assert set(getattr(result, stream)) == {"x"}
    assert elapsed < 10, elapsed


@pytest.mark.parametrize(
    "argv",
    [
        py("import os, signal; os.kill(os.getppid(), signal.SIGKILL); print('after')"),
        py("import os, signal; os.killpg(0, signal.SIGKILL)"),
        py("import os, signal; os.kill(-1, signal.SIGKILL)"),
        ["sh", "-c", "kill -9 -1; kill -9 0; kill -9 $PPID; echo done"],
    ],
    ids=["kill-parent", "killpg-own-group", "kill-all", "shell-kill"],
)
def test_signalling_the_parent_leaves_the_host_and_box_alive(boxed, argv):
    async def scenario(box):
        pid = getattr(box, "worker_pid", None)
        result = await box.exec(argv)
        await still_works(box)
        if pid is not None:
            os.kill(pid, 0)  # the worker is still there (raises if it died)
        return result

    result = boxed(scenario)
    assert result.duration_s < 5
    assert result.error is None


@pytest.mark.parametrize("how", ["shell-background", "double-fork-setsid"])
def test_background_processes_do_not_survive(boxed, how):
    marker = f"1000.{uuid.uuid4().int % 10**6}"
    if how == "shell-background":
        argv = ["sh", "-c", f"sleep {marker} & sleep {marker} & echo started"]
    else:
        argv = py(f"""
            import os
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    os.execvp("sleep", ["sleep", "{marker}"])
                os._exit(0)
            print("started")
            """)

    async def scenario(box):
        start = time.monotonic()
        result = await box.exec(argv, timeout=20)
        elapsed = time.monotonic() - start
        leftovers = [p for p in host_processes() if marker in p[2]]
        await still_works(box)
        return result, elapsed, leftovers

    result, elapsed, leftovers = boxed(scenario)
    assert result.stdout == "started\n", result
    assert elapsed < 10, "the exec waited for the background process instead of killing it"
    assert leftovers == []


@pytest.mark.parametrize("op", ["read", "write"])
def test_a_fifo_left_by_the_box_does_not_hang_the_host(boxed, op):
    async def scenario(box):
        made = await box.exec(["sh", "-c", "mkfifo trap && mkdir dir && echo ok"])
        start = time.monotonic()
        errors = []
        for path in ("trap", "dir"):
            with pytest.raises(OSError) as caught:
                if op == "read":
                    await box.read_file(path)
                else:
                    await box.write_file(path, "data")
            errors.append(caught.value)
        elapsed = time.monotonic() - start
        uid = getattr(box, "uid", None)
        helpers = [p for p in host_processes() if uid is not None and p[1] == uid]
        await still_works(box)
        return made, errors, elapsed, helpers

    made, (fifo, directory), elapsed, helpers = boxed(scenario)
    assert made.stdout == "ok\n", made
    assert elapsed < 5, elapsed
    assert fifo.errno == errno.EINVAL and "not a regular file" in str(fifo)
    assert isinstance(directory, IsADirectoryError)
    assert helpers == []  # no file helper is left blocked on the FIFO


def test_opening_a_fifo_blocks_without_the_check(tmp_path):
    """Control: a plain open() of a FIFO nobody writes to blocks (the old read_file hung on it)."""
    fifo = tmp_path / "trap"
    os.mkfifo(fifo)
    opened = threading.Event()

    def reader():
        with open(fifo, "rb"):
            opened.set()

    threading.Thread(target=reader, daemon=True).start()
    assert not opened.wait(1.0)
    with open(fifo, "wb"):  # unblock the reader thread
        pass


BAD_EXEC_ARGS = [
    ({"argv": "ls -la"}, "argv must be a non-empty list"),
    ({"argv": []}, "argv must be a non-empty list"),
    ({"argv": ["echo", 1]}, "argv must hold only strings"),
    ({"argv": ["echo", "a\x00b"]}, "NUL byte"),
    ({"argv": ["true"], "timeout": 0}, "timeout must be a positive"),
    ({"argv": ["true"], "timeout": float("nan")}, "timeout must be a positive"),
    ({"argv": ["true"], "env": {"A=B": "c"}}, "invalid environment variable"),
    ({"argv": ["true"], "env": {"A": 1}}, "env must map strings"),
    ({"argv": ["true"], "stdin": 42}, "stdin must be"),
    ({"argv": ["true"], "cwd": "../up"}, "contains '..'"),
]


def test_bad_exec_arguments_raise_the_same_error_on_every_backend(boxed):
    async def scenario(box):
        seen = []
        for kwargs, _ in BAD_EXEC_ARGS:
            with pytest.raises(SandboxArgumentError) as caught:
                await box.exec(**kwargs)
            seen.append(str(caught.value))
        await still_works(box)
        return seen

    seen = boxed(scenario)
    for (kwargs, fragment), message in zip(BAD_EXEC_ARGS, seen):
        assert fragment in message, (kwargs, message)
        with pytest.raises(SandboxArgumentError) as direct:  # the one shared check, so the same text
            check_exec_args(kwargs["argv"], kwargs.get("stdin"), kwargs.get("timeout"), kwargs.get("env"),
                            kwargs.get("cwd"), 10.0)  # fmt: skip
        assert str(direct.value) == message


SHM = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
key, create = 0x5EC2E7, sys.argv[1] == "write"
shmid = libc.shmget(key, 4096, (0o1000 | 0o600) if create else 0o600)  # IPC_CREAT
if shmid < 0:
    print("absent", ctypes.get_errno())
    raise SystemExit
address = libc.shmat(shmid, None, 0)
if create:
    ctypes.memmove(address, b"left by the last episode", 24)
    print("written")
else:
    print(ctypes.string_at(address, 24).decode())
"""


def test_system_v_shared_memory_does_not_survive_reset(boxed):
    async def scenario(box):
        written = await box.exec(["python3", "-c", SHM, "write"])
        same_episode = await box.exec(["python3", "-c", SHM, "read"])
        await box.reset()
        next_episode = await box.exec(["python3", "-c", SHM, "read"])
        return written, same_episode, next_episode

    written, same_episode, next_episode = boxed(scenario)
    assert written.stdout == "written\n", written
    assert same_episode.stdout == "left by the last episode\n", same_episode  # control: it persists until reset
    assert next_episode.stdout.startswith("absent"), next_episode


ESCAPES = """
import ctypes, os, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, call):
    result = call()
    print(name, "ALLOWED" if result == 0 else "denied")
attempt("unshare-user", lambda: libc.unshare(0x10000000))
attempt("unshare-mount", lambda: libc.unshare(0x20000))
attempt("ptrace-parent", lambda: libc.ptrace(16, os.getppid(), 0, 0))  # PTRACE_ATTACH
attempt("keyring", lambda: 0 if libc.syscall(248 if os.uname().machine == "x86_64" else 217, b"user", b"k", b"v", 1, -4) >= 0 else -1)
shell = subprocess.run(["unshare", "-Urm", "id", "-u"], capture_output=True, text=True)
print("unshare-Urm", "ALLOWED" if shell.returncode == 0 else "denied")
"""


def test_no_user_namespace_ptrace_or_keyring_inside_the_box(boxed):
    async def scenario(box):
        result = await box.exec(["python3", "-c", ESCAPES])
        await still_works(box)
        return result

    result = boxed(scenario)
    assert result.exit_code == 0, result
    assert "ALLOWED" not in result.stdout, result.stdout
    assert result.stdout.count("denied") == 5


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_an_unprivileged_uid_alone_may_create_user_namespaces():
    """Control: an unprivileged uid with no_new_privs (the box's confinement without seccomp) gets uid 0."""
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--no-new-privs"]
    out = subprocess.run([*argv, "unshare", "-Urm", "id", "-u"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == "0\n", out
