"""The `local` backend: a warm worker process per box that forks per execution.

    async with LocalSandbox(Limits(wall_s=5)) as box:
        result = await box.exec(["python", "-c", "print(1)"])

Each box owns one long-lived worker (`_worker.py`, run with `sys.executable`, stdlib only) that
speaks length-prefixed JSON over pipes. Per execution the worker forks: `python -c CODE` and
`python FILE` run inside the already-warm interpreter (no new interpreter start-up, ~5x faster than
`subprocess.run`), any other argv is exec'd after the same setup.

Isolation, when the host process is root (the usual case in containers and CI):
- no network: the worker lives in its own network namespace with only loopback;
- filesystem: a private mount namespace and a fresh root that holds only the system dirs (/usr,
  /etc, /lib...) and the interpreter, read-only, with every site-packages hidden; the work dir,
  /tmp, /var/tmp and /dev/shm share one private tmpfs capped at `disk_mb`. The caller's folders
  (cwd, `sys.path`, a checkout under /tmp) are not in it; `expose` adds read-only paths. The
  interpreter (the one running this process) may live anywhere, a venv under /tmp included: it is
  bound inside the box's private /tmp, the only host folder there. It runs at the path it was
  started by: the symlinks on the way (a venv at /opt/link/venv, /opt/link -> /data/real) are made
  again in the box. `start()` refuses, in one line saying what to change, an interpreter whose
  folder is or holds /tmp, /var/tmp or /dev/shm (e.g. /tmp/python3), that the box's uid cannot read
  (e.g. a venv in a 0700 folder), or reached through a link where the box keeps a folder of its own;
- processes: each execution gets a fresh PID namespace; when the command exits or times out the
  kernel kills everything left in it (background jobs, setsid/double-fork daemons). The command
  cannot see or signal the worker or the host;
- memory and processes per box, not per process: a cgroup of its own (v2 where the host delegates
  it, else v1; `_cgroup.py` states the difference) caps `memory_mb` for all its processes together,
  the files in its tmpfs and its shared memory included, and `max_procs` tasks; an OOM kill there
  is reported as `oom_killed`;
- a per-box uid (1,000,000 + worker pid): RLIMIT_NPROC then counts only this box, and host files
  without world permissions are unreadable; plus rlimits (AS, CPU, NPROC, FSIZE, CORE, NOFILE),
  no_new_privs, a seccomp filter (no user or other namespaces, ptrace, keyrings, bpf, mounts) and
  a scrubbed environment (the caller's variables never reach the box);
- `reset()` replaces the worker: new namespaces, tmpfs, IPC namespace, uid and cgroup, and a heap
  that never held the last episode's data; nothing of one episode (files, SysV shared memory,
  processes, stale memory) is visible to the next.

Without root, only rlimits, seccomp, the scrubbed environment and process-group kills apply;
`isolation` reports what is in effect and `require_isolation=True` refuses to start with less.
Known differences from a fresh interpreter for in-process runs: modules the worker imported (stdlib
only) are already in `sys.modules`, and the hash seed is shared by all runs of a box.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import errno
import json
import logging
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.sandbox._cgroup import PREFIX, BoxCgroup
from rlgym_llm.sandbox.base import (
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    check_box_path,
    check_exec_args,
    file_error,
)

logger = logging.getLogger(__name__)


def _under(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


_WORKER = Path(__file__).with_name("_worker.py")
_UID_BASE = 1_000_000  # far above distro ranges; uid = base + worker pid is unique among live boxes
_WORKER_STATE = ("_proc", "_stderr_task", "_cgroup", "work_dir", "isolation")  # what `reset` swaps
_WARNED: set[tuple[str, ...]] = set()  # isolation gaps already logged
_CALL_GRACE_S = 15.0  # the worker enforces timeouts itself; this only catches a hung worker


class LocalSandbox(Sandbox):
    """Sandbox backed by a warm local worker process (see the module docstring for the layers).

    Args:
        limits: Resource limits; defaults to `Limits()`.
        root_dir: Where the box's work dir is created; defaults to the system temp dir.
        disk_mb: Size of the private work dir and scratch tmpfs, and the largest file a box may write.
        flood_bytes: Output dropped past `limits.output_bytes` before the command is killed as a flood.
        read_limit_bytes: Largest file `read_file` returns.
        expose: Extra host paths mounted read-only in the box, at the same place. By default a box
            sees only the system dirs and the interpreter's standard library, never the caller's
            folders (its cwd, `sys.path`, site-packages). A path under /tmp shows inside the box's
            private /tmp; /tmp, /var/tmp, /dev/shm themselves (or a folder holding one) are refused.
        require_isolation: Raise `SandboxError` in `start()` unless every isolation layer is in effect.
        read_only_mounts: Host directory -> path in the box, read, never written (e.g. a cached
            toolchain). Every mount but the work dir is read-only here and host folders keep their
            path, so each must map to itself; they are exposed.
    """

    backend = "local"

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        root_dir: str | None = None,
        disk_mb: int = 256,
        flood_bytes: int = 8 * 1024 * 1024,
        read_limit_bytes: int = 64 * 1024 * 1024,
        expose: tuple[str, ...] = (),
        require_isolation: bool = False,
        read_only_mounts: Mapping[str, str] | None = None,
    ):
        super().__init__(limits)
        self.root_dir = root_dir
        self.disk_mb = disk_mb
        self.flood_bytes = flood_bytes
        self.read_limit_bytes = read_limit_bytes
        moved = [f"{h} -> {b}" for h, b in (read_only_mounts or {}).items() if os.path.abspath(h) != b]
        private = ("/tmp", "/var/tmp", "/dev/shm")
        shown = (*expose, *(read_only_mounts or {}))
        scratch = [h for h in shown if any(_under(os.path.realpath(h), d) for d in private)]
        problems = [f"the local backend shows host folders at their own path; cannot mount {m}" for m in moved]
        problems += [
            f"cannot show {h} to the box: it is or holds a dir the box replaces with its own private /tmp, "
            "/var/tmp or /dev/shm (a folder inside one, such as /tmp/data, is fine)"
            for h in scratch
        ]
        if problems:
            raise ConfigError(problems)
        self.expose = tuple(expose) + tuple(read_only_mounts or {})
        self.require_isolation = require_isolation
        self.isolation: dict[str, Any] = {}
        self.work_dir: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr_task: asyncio.Task | None = None
        self._cgroup: BoxCgroup | None = None
        self._spare: asyncio.Future[LocalSandbox] | None = None  # the next reset's worker, warming up
        self._closing: set[asyncio.Future[None]] = set()  # old workers being torn down
        self._lock = asyncio.Lock()

    @property
    def worker_pid(self) -> int | None:
        """Pid of the worker process, or None when not started."""
        return self._proc.pid if self._proc is not None else None

    @property
    def uid(self) -> int | None:
        """The uid commands run as, or None when the box could not drop privileges."""
        return self.isolation.get("uid")

    async def start(self) -> None:
        if self._proc is not None:
            return
        self.work_dir = tempfile.mkdtemp(prefix="rlgym-box-", dir=self.root_dir)
        bin_dir = os.path.dirname(sys.executable)
        base_env = {
            "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
            "HOME": self.work_dir,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "USER": "sandbox",
        }
        # The worker starts from a minimal environment: the caller's secrets are not even in its memory.
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(_WORKER),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={"PATH": base_env["PATH"], "LANG": "C.UTF-8"},
            cwd="/",
        )
        self._stderr_task = asyncio.create_task(_log_worker_stderr(self._proc.pid, self._proc.stderr))
        expose = [os.path.abspath(p) for p in self.expose]
        if os.geteuid() == 0:  # the box's own memory and process budget (v2, else v1); see _cgroup.py
            memory = self.limits.memory_mb * 1024 * 1024
            self._cgroup = BoxCgroup.create(f"{PREFIX}{self._proc.pid}", memory, self.limits.max_procs)
        init = {
            "op": "init",
            "work_dir": self.work_dir,
            "limits": self.limits.to_dict(),
            "uid": _UID_BASE + self._proc.pid,
            "disk_mb": self.disk_mb,
            "flood_bytes": self.flood_bytes,
            "expose": sorted(set(expose)),
            "base_env": base_env,
            "cgroup": {"procs": self._cgroup.procs, "oom_file": self._cgroup.oom_file} if self._cgroup else None,
        }
        try:
            self.isolation = (await self._call(init, timeout=30.0))["isolation"]
        except BaseException:
            await self.close()
            raise
        if self.isolation.get("cgroup") and self._cgroup is not None:
            self.isolation["cgroup"] = self._cgroup.describe()
        missing = self.missing_isolation()
        if missing and self.require_isolation:
            await self.close()
            raise SandboxError(
                f"local sandbox isolation incomplete (missing: {', '.join(missing)}); run as root, "
                "or pass require_isolation=False to accept rlimits-only isolation"
            )
        if missing and tuple(missing) not in _WARNED:  # once per process: every reset starts a worker
            _WARNED.add(tuple(missing))
            logger.warning(
                "local sandbox runs without %s (needs root; cgroup: a writable memory controller); isolation: %s",
                missing,
                self.isolation,
            )

    def missing_isolation(self) -> list[str]:
        """Names of the isolation layers that are not in effect for this box."""
        wanted = ["mountns", "pidns", "uid", "cgroup", "seccomp"] + ([] if self.limits.network else ["netns"])
        return [k for k in wanted if not self.isolation.get(k)]

    async def _call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise SandboxError("the sandbox is not started; use `async with sandbox:` or `await sandbox.start()`")
        async with self._lock:
            if proc.returncode is not None:
                raise SandboxError(f"the sandbox worker exited (status {proc.returncode}); start a new sandbox")
            data = json.dumps(request).encode()
            try:
                proc.stdin.write(struct.pack(">I", len(data)) + data)
                await proc.stdin.drain()
                header = await asyncio.wait_for(proc.stdout.readexactly(4), timeout)
                answer = json.loads(await proc.stdout.readexactly(struct.unpack(">I", header)[0]))
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                raise SandboxError(f"the sandbox worker broke during {request['op']!r}: {exc!r}") from exc
        if not answer.pop("ok"):
            if answer.get("errno") is not None and request["op"] in ("read", "write"):
                raise OSError(answer["errno"], answer["error"])
            raise SandboxError(f"sandbox {request['op']!r} failed: {answer['error']}")
        return answer

    async def exec(
        self,
        argv: list[str],
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        args = check_exec_args(argv, stdin, timeout, env, cwd, self.limits.wall_s)
        request = {
            "op": "exec",
            "argv": args.argv,
            "stdin": base64.b64encode(args.stdin or b"").decode(),
            "timeout": args.timeout,
            "env": args.env,
            "cwd": "" if args.cwd is None else str(args.cwd),
        }
        return ExecResult(**await self._call(request, timeout=args.timeout + _CALL_GRACE_S))

    async def write_file(self, path: str, data: str | bytes) -> None:
        raw = data.encode() if isinstance(data, str) else bytes(data)
        request = {"op": "write", "path": str(check_box_path(path)), "data": base64.b64encode(raw).decode()}
        await self._file_call(request, path)

    async def read_file(self, path: str) -> bytes:
        request = {"op": "read", "path": str(check_box_path(path)), "limit": self.read_limit_bytes}
        return base64.b64decode((await self._file_call(request, path))["data"])

    async def _file_call(self, request: dict[str, Any], path: str) -> dict[str, Any]:
        try:
            return await self._call(request, timeout=_CALL_GRACE_S)
        except OSError as exc:  # the same errors as the docker backend, for the same cases
            raise file_error(path, exc.errno or errno.EIO) from None

    async def reset(self) -> None:
        """Replaces the worker with a fresh one: new namespaces, tmpfs, IPC namespace, uid and cgroup.

        Wiping files is not enough: in-process Python runs are forks of the worker, so they inherit
        its heap, where freed buffers of earlier requests (another episode's stdin: hidden tests)
        linger. A new worker process holds nothing of the last episode.
        """
        if self._proc is None:
            raise SandboxError("the sandbox is not started; use `async with sandbox:` or `await sandbox.start()`")
        if self._proc.returncode is not None:  # the box broke: its owner (e.g. a pool) replaces it
            raise SandboxError(f"the sandbox worker exited (status {self._proc.returncode}); start a new sandbox")
        fresh = None
        spare, self._spare = self._spare, None
        if spare is not None:  # started in the background at the last reset: the swap costs nothing
            try:
                fresh = await spare
            except Exception as exc:  # a spare that failed to start is replaced by a synchronous start
                logger.warning("the spare sandbox worker failed to start: %r", exc)
        if fresh is None:
            fresh = self._twin()
            await fresh.start()
        for name in _WORKER_STATE:  # self takes the fresh worker, `fresh` the old one, closed below
            mine, theirs = getattr(self, name), getattr(fresh, name)
            setattr(self, name, theirs)
            setattr(fresh, name, mine)
        self._spare = asyncio.ensure_future(self._started_twin())
        self._closing.add(asyncio.ensure_future(fresh.close()))  # tearing namespaces down takes a while
        self._closing = {task for task in self._closing if not task.done()}

    def _twin(self) -> LocalSandbox:
        return LocalSandbox(
            self.limits,
            root_dir=self.root_dir,
            disk_mb=self.disk_mb,
            flood_bytes=self.flood_bytes,
            read_limit_bytes=self.read_limit_bytes,
            expose=self.expose,
            require_isolation=self.require_isolation,
        )

    async def _started_twin(self) -> LocalSandbox:
        twin = self._twin()
        await twin.start()
        return twin

    async def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            with contextlib.suppress(Exception):
                await (await spare).close()
        closing, self._closing = self._closing, set()
        for task in closing:
            with contextlib.suppress(Exception):
                await task
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: the worker exits, its namespaces and tmpfs go with it
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._stderr_task, 1.0)
            self._stderr_task = None
        if self._cgroup is not None:  # empty now: the worker and every box process are gone
            self._cgroup.remove()
            self._cgroup = None
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self.work_dir = None


async def _log_worker_stderr(pid: int, stream: asyncio.StreamReader | None) -> None:
    if stream is None:
        return
    while line := await stream.readline():
        logger.warning("sandbox worker %s: %s", pid, line.decode(errors="replace").rstrip())
