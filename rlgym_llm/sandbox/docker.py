"""The `docker` sandbox backend: one warm container per box, driven through the real Docker daemon.

    async with make_sandbox("docker", Limits(wall_s=5)) as box:
        result = await box.exec(["python3", "-c", "print(1)"])

Each box is a long-running container (`network_mode="none"`, memory and swap capped, a pids limit,
read-only root, `no-new-privileges`, a seccomp profile denying the local backend's list: no
namespaces, ptrace, keyrings, bpf, mounts) with size-capped tmpfs mounts at /work (the work dir)
and /tmp. Box code runs as uid 65534 with no capabilities at all.

Processes that keep the box honest run as root (with only KILL, SETUID and SETGID) so box code can
neither signal, trace nor read them:
- PID 1 is Docker's init (tini, `init=True`); its child, the sweeper, SIGKILLs every other process
  on SIGUSR1 from the host (a signal needs no new process, so it works even under a fork bomb);
- each execution is a `docker exec` of a small `sh` wrapper that runs the command as 65534 (setpriv),
  kills every box process it left behind, and adds a trailer line (cwd missing, program not found,
  OOM-kill count) tagged with a per-exec nonce that lives only in the wrapper's environment.
  The exit status is Docker's own record of the wrapper's (`exec inspect`), never parsed from output.

Timeouts and output floods are enforced from outside: the host's watchdog sweeps the box; if the
execution has not ended `_KILL_GRACE_S` later, the host kills the whole container. A container found
unhealthy (that, a failed reset, survivors or a stopped init at reset) is replaced, never reused.
`reset()` also removes SysV IPC objects: nothing of one episode is visible to the next.

The default image `rlgym-sandbox:py3` is built locally by `sandboxes/image/build.sh` (or
`.ci/docker-setup.sh`, which also installs and starts the daemon). Containers carry the label
`rlgym_llm.sandbox=1` and their owner's pid; `cleanup_containers()` removes leftovers of dead processes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import json
import logging
import math
import os
import platform
import re
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.sandbox._isolation import DENIED_SYSCALLS
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

__all__ = ["DEFAULT_IMAGE", "LABEL", "DockerSandbox", "cleanup_containers"]

DEFAULT_IMAGE = "rlgym-sandbox:py3"
LABEL = "rlgym_llm.sandbox"
WORK_DIR = "/work"
USER = "65534:65534"
_FIX = "start the daemon (`dockerd --bridge=none --iptables=false --ip-masq=false &`) or run .ci/docker-setup.sh"
_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1
_INTERNAL_TIMEOUT_S = 30.0
_KILL_GRACE_S = 5.0  # after a sweep, how long an exec may take to end before the container is killed
_ROOT_CAPS = ("KILL", "SETUID", "SETGID", "DAC_READ_SEARCH")  # the last: see box dirs made 0700
_IMAGE_NEEDS = ("sh", "setpriv", "python3", "ipcrm")
_SECCOMP_ARCHES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}
_STDERR_TAIL = 256  # bytes of stderr kept past the cap so the trailer is always seen

# The sweeper, as root (the box's code runs as 65534 and can neither signal nor trace it): on SIGUSR1
# from the host it SIGKILLs every process of the box's uid. A signal needs no new process, so it
# works even when a fork bomb holds every pid the box may have; root processes (tini, a wrapper, an
# exec Docker is starting) are left alone. Without tini it is PID 1 itself and reaps orphans too.
_SWEEPER = """
import os, signal
def sweep(*_):
    for _ in range(100):
        found = False
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and os.stat("/proc/" + entry).st_uid == 65534:
                    with open("/proc/" + entry + "/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                            os.kill(int(entry), signal.SIGKILL)
                            found = True
            except (OSError, IndexError):
                pass
        if not found:
            return
signal.signal(signal.SIGUSR1, sweep)
signal.signal(signal.SIGCHLD, lambda *_: None)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        signal.pause()
"""

# Runs each command (as root; argv: cwd, CPU seconds, OOM counter file, the number of NAME=VALUE
# pairs for the command's environment, the pairs, then the command). The
# command runs as 65534 (setpriv): it cannot signal, trace or read this shell, whose environment
# holds the per-exec nonce (its cmdline holds none). Exit status: the host reads it from Docker
# (`exec inspect`), never from the output. The trailer line, written after every box process is dead,
# only adds what Docker cannot say: cwd missing, program not found, and the cgroup's OOM-kill count.
_WRAPPER = r"""n=$RLGYM_EXEC_NONCE; unset RLGYM_EXEC_NONCE; d=$1; t=$2; f=$3; k=$4; shift 4
up=$PATH; i=0
for a in "$@"; do [ $i -ge "$k" ] && break; case $a in PATH=*) up=${a#PATH=};; esac; i=$((i + 1)); done
eval "p=\${$((k + 1))}"
drop='/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups --'
if [ ! -d "$d" ]; then tag=cwd; rc=126
elif ! PATH=$up command -v "$p" >/dev/null 2>&1; then tag=nf; rc=127
else
    tag=x
    (echo 1000 > /proc/self/oom_score_adj; exec $drop /bin/sh -c \
        'ulimit -S -t "$1"; ulimit -H -t $(($1 + 1)); cd "$2" || exit 126; shift 2; exec /usr/bin/env "$@"' \
        rlgym "$t" "$d" "$@")
    rc=$?
    $drop /bin/sh -c 'i=0; while kill -9 -1 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); done'
fi
o=0; if [ -r "$f" ]; then while read -r key v; do [ "$key" = oom_kill ] && o=$v; done < "$f"; fi
printf 'RLGYM-%s-%s-%s\n' "$n" "$tag" "$o" >&2
exit $rc
"""
_NONCE_VAR = "RLGYM_EXEC_NONCE"

# Wipes the box for the next episode and checks its health: exit 3 if files remain, 4 if a process
# of the box survived or the init/sweeper is stopped (e.g. traced). Either way the box is replaced.
_RESET = r"""
import os, shutil, signal, subprocess, time
for _ in range(100):
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        break
subprocess.run(["ipcrm", "--all"], stderr=subprocess.DEVNULL)  # SysV shm, semaphores, queues
def unlock(fn, path, _):
    os.chmod(os.path.dirname(path) or ".", 0o700)
    os.chmod(path, 0o700) if os.path.isdir(path) else None
    fn(path)
for top in ("/work", "/tmp", "/dev/shm"):
    if os.path.isdir(top):
        for name in os.listdir(top):
            path = os.path.join(top, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    os.chmod(path, 0o700)
                    shutil.rmtree(path, onerror=unlock)
                else:
                    os.unlink(path)
            except OSError:
                pass
if os.listdir("/work") or os.listdir("/tmp"):
    raise SystemExit(3)
me, deadline = os.getpid(), time.monotonic() + 2
while True:
    problems = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open("/proc/" + entry + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            uid = os.stat("/proc/" + entry).st_uid
        except (OSError, IndexError):
            continue
        state, ppid = fields[0], int(fields[1])
        if state == "Z" or ppid == me:
            continue
        if uid == 0 and (entry == "1" or ppid == 1):
            if state in "tT":
                problems.append("init or sweeper stopped: " + entry)
        else:
            problems.append("left over: " + entry)
    if not problems or time.monotonic() > deadline:
        break
    time.sleep(0.02)
print(" ".join(problems))
raise SystemExit(4 if problems else 0)
"""

# Exit statuses name the errno of `file_error`; a FIFO or device is refused before it is opened.
_FILE_CHECKS = '[ -L "$1" ] && exit 40; [ -d "$1" ] && exit 21; [ -e "$1" ] && { [ -f "$1" ] || exit 22; }; '
_WRITE = _FILE_CHECKS + 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
_READ = _FILE_CHECKS + '[ -e "$1" ] || exit 2; exec cat -- "$1"'
_FILE_STATUS = {2: errno.ENOENT, 21: errno.EISDIR, 22: errno.EINVAL, 40: errno.ELOOP}

# Containers this process started and has not removed yet; removed at interpreter exit.
_LIVE: dict[str, Any] = {}  # container id -> its API client
_LIVE_LOCK = threading.Lock()


def _docker_module() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise MissingDependencyError("docker", "docker", "the docker sandbox") from exc
    return docker


def _api_errors() -> tuple[type[Exception], ...]:
    """What a call to the daemon raises when it fails: Docker's errors, and the HTTP layer's (a timeout,
    a dropped connection) that the SDK lets through."""
    import requests

    return (_docker_module().errors.DockerException, requests.exceptions.RequestException)


def _connect(base_url: str | None) -> Any:
    """Returns a low-level API client for the daemon, or a `SandboxError` that says how to start one."""
    docker = _docker_module()
    kwargs = docker.utils.kwargs_from_env()
    if base_url:
        kwargs["base_url"] = base_url
    try:
        api = docker.APIClient(version="auto", timeout=60, max_pool_size=32, **kwargs)
        api.ping()
    except docker.errors.DockerException as exc:
        where = kwargs.get("base_url", "unix:///var/run/docker.sock")
        raise SandboxError(f"cannot reach the Docker daemon at {where}: {exc}. Fix: {_FIX}") from exc
    return api


@atexit.register
def _remove_live_containers() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE.items())
        _LIVE.clear()
    for cid, api in live:
        with contextlib.suppress(Exception):  # best effort at exit: cleanup_containers() catches the rest
            api.remove_container(cid, force=True)


def cleanup_containers(all_owners: bool = False, base_url: str | None = None) -> int:
    """Removes sandbox containers left behind by processes that died without closing their boxes.

    Args:
        all_owners: Also remove containers of live processes and of other hosts (use when nothing else
            runs sandboxes against this daemon).
        base_url: Daemon address; defaults to `DOCKER_HOST` or the local socket.

    Returns:
        The number of containers removed.
    """
    api = _connect(base_url)
    host = socket.gethostname()
    removed = 0
    for info in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        labels = info.get("Labels") or {}
        if not all_owners:
            if labels.get(f"{LABEL}.host") != host:
                continue
            try:
                os.kill(int(labels.get(f"{LABEL}.pid", "0")), 0)
                continue  # owner still alive
            except ProcessLookupError:
                pass
            except (PermissionError, ValueError):
                continue
        with contextlib.suppress(Exception):  # it may vanish concurrently
            api.remove_container(info["Id"], force=True)
            removed += 1
    logger.info("removed %d leftover sandbox container(s)", removed)
    return removed


@dataclass
class _Capture:
    """One output stream: the first `cap` bytes, the byte count, and the last few bytes."""

    cap: int
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0
    tail: bytes = b""

    def add(self, data: bytes) -> None:
        if len(self.kept) < self.cap:
            self.kept += data[: self.cap - len(self.kept)]
        self.total += len(data)
        self.tail = (self.tail + data)[-_STDERR_TAIL:]

    def drop_suffix(self, n: int) -> None:
        """Forgets the last `n` bytes (the trailer), wherever the cap cut the stream."""
        self.total -= n
        del self.kept[self.total :]


@dataclass
class _Raw:
    stdout: _Capture
    stderr: _Capture
    exec_id: str
    killed: bool  # the host swept the box (timeout or output flood)
    timed_out: bool
    duration_s: float


class DockerSandbox(Sandbox):
    """A sandbox backed by one long-running Docker container.

    Args:
        limits: Resource limits; `memory_mb` caps the whole container (tmpfs contents and shared memory
            included, no swap), `max_procs` its pids (the init, sweeper and wrapper are not counted).
        image: Image to run; it needs `sh`, coreutils, util-linux (`setpriv`, `ipcrm`) and `python3`.
        base_url: Daemon address; defaults to `DOCKER_HOST` or the local socket.
        disk_mb: Size of the /work tmpfs.
        tmp_mb: Size of the /tmp tmpfs.
        network_mode: Docker network when `limits.network` is on (default: the daemon's default network).
        cpus: Optional CPU quota (e.g. 1.0 = one core).
        flood_factor: Once a command has written this many times `output_bytes` in total, it is killed.
        read_only_mounts: Host directory -> absolute path in the container, bind-mounted read-only
            (e.g. a cached toolchain).
        init: Run Docker's init (tini) as PID 1; falls back to the sweeper as PID 1 where the daemon has none.
    """

    backend: ClassVar[str] = "docker"

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        image: str = DEFAULT_IMAGE,
        base_url: str | None = None,
        disk_mb: int = 256,
        tmp_mb: int = 64,
        network_mode: str | None = None,
        cpus: float | None = None,
        flood_factor: int = 16,
        read_only_mounts: Mapping[str, str] | None = None,
        init: bool = True,
    ):
        super().__init__(limits)
        _docker_module()  # fail at construction, with the install hint, when the SDK is missing
        self.image = image
        self.base_url = base_url
        self.disk_mb = disk_mb
        self.tmp_mb = tmp_mb
        self.network_mode = network_mode
        self.cpus = cpus
        self.read_only_mounts = {os.path.realpath(h): b for h, b in (read_only_mounts or {}).items()}
        self.flood_bytes = max(flood_factor * self.limits.output_bytes, 1 << 22)
        self.init = init
        self.container_id: str | None = None
        self.replaced = 0  # containers thrown away because they were found unhealthy
        self._api: Any = None
        self._oom_file = ""
        self._oom_seen = 0
        self._unhealthy = ""  # why the container must be replaced before its next use
        self._lock = asyncio.Lock()  # the wrapper's sweep would kill a concurrent exec: one at a time

    @property
    def broken(self) -> str:
        """Why the container will be replaced at the next use (`""` while it is healthy)."""
        return self._unhealthy if self.container_id is not None else ""

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Creates and starts the container; idempotent."""
        if self.container_id is None:
            await asyncio.to_thread(self._start_sync)

    def _start_sync(self) -> None:
        docker = _docker_module()
        api = _connect(self.base_url)
        try:
            api.inspect_image(self.image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(
                f"docker image {self.image!r} not found; build it with sandboxes/image/build.sh "
                "(or run .ci/docker-setup.sh, which also starts the daemon)"
            ) from exc
        try:
            cid = self._create(api, self.init)
        except docker.errors.APIError as exc:
            if not (self.init and "init" in str(exc).lower()):
                raise SandboxError(f"could not start a sandbox container from {self.image!r}: {exc}") from exc
            logger.warning("the docker daemon has no init (tini); the sweeper runs as PID 1: %s", exc)
            try:
                cid = self._create(api, False)
            except docker.errors.APIError as exc2:
                raise SandboxError(f"could not start a sandbox container from {self.image!r}: {exc2}") from exc2
        self._api, self.container_id, self._unhealthy = api, cid, ""
        # Probe: proves execs work and finds the cgroup's OOM-kill counter (v1 and v2 differ).
        probe = "for f in " + " ".join(_OOM_FILES) + '; do [ -r "$f" ] && { echo "$f"; cat "$f"; break; }; done'
        probe = f"command -v {' '.join(_IMAGE_NEEDS)} >/dev/null || exit 3; {probe}"
        raw = self._run(["sh", "-c", probe], None, _INTERNAL_TIMEOUT_S, 1 << 16)
        if (status := self._status(raw)) != 0:
            self._close_sync()
            needs = f" (the image needs {', '.join(_IMAGE_NEEDS)})" if status == 3 else ""
            raise SandboxError(
                f"sandbox container from {self.image!r} failed its probe{needs}: {bytes(raw.stderr.kept)!r}"
            )
        lines = bytes(raw.stdout.kept).decode().splitlines()
        self._oom_file = lines[0] if lines else ""
        self._oom_seen = _oom_count(lines[1:])
        logger.debug("started sandbox container %s (%s)", cid[:12], self.image)

    def _create(self, api: Any, init: bool) -> str:
        """Creates and starts one container; removes it again if it would not start."""
        docker = _docker_module()
        tmpfs_opts = "rw,exec,nosuid,nodev,size={}m,uid=65534,gid=65534,mode={}"
        host_config = api.create_host_config(
            network_mode=(self.network_mode or "default") if self.limits.network else "none",
            mem_limit=f"{self.limits.memory_mb}m",
            memswap_limit=f"{self.limits.memory_mb}m",  # equal to mem_limit: no swap
            pids_limit=self.limits.max_procs + 3,  # + init, sweeper, wrapper
            read_only=True,
            tmpfs={WORK_DIR: tmpfs_opts.format(self.disk_mb, "0755"), "/tmp": tmpfs_opts.format(self.tmp_mb, "1777")},
            cap_drop=["ALL"],
            cap_add=list(_ROOT_CAPS),  # root's only (the sweeper, the wrapper); box code runs as 65534 with none
            security_opt=["no-new-privileges", "seccomp=" + json.dumps(seccomp_profile())],
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],  # SIGXCPU would dump core into /work
            nano_cpus=int(self.cpus * 1e9) if self.cpus else None,
            shm_size="16m",
            binds={host: {"bind": box, "mode": "ro"} for host, box in self.read_only_mounts.items()} or None,
            init=init,
        )
        labels = {LABEL: "1", f"{LABEL}.pid": str(os.getpid()), f"{LABEL}.host": socket.gethostname()}
        cid = api.create_container(
            self.image,
            command=["python3", "-I", "-S", "-c", _SWEEPER],
            user="0:0",
            working_dir=WORK_DIR,
            hostname="sandbox",
            labels=labels,
            host_config=host_config,
            network_disabled=not self.limits.network,
        )["Id"]
        with _LIVE_LOCK:
            _LIVE[cid] = api
        try:
            api.start(cid)
        except BaseException:
            with _LIVE_LOCK:
                _LIVE.pop(cid, None)
            with contextlib.suppress(Exception):
                api.remove_container(cid, force=True)
            raise
        return cid

    async def close(self) -> None:
        """Removes the container; idempotent."""
        if self.container_id is not None:
            await asyncio.to_thread(self._close_sync)

    def _close_sync(self) -> None:
        cid, self.container_id = self.container_id, None
        if cid is None:
            return
        with _LIVE_LOCK:
            _LIVE.pop(cid, None)
        try:
            self._api.remove_container(cid, force=True)
        except Exception as exc:  # already gone is fine; anything else is logged, cleanup_containers() retries
            if "No such container" not in str(exc):
                logger.warning("could not remove sandbox container %s: %r", cid[:12], exc)

    def _replace_if_unhealthy(self) -> None:
        """A container found unhealthy (stopped init, survivors, a sweep that did not end an exec) is
        never reused: it is removed and a fresh one started in its place."""
        if self._unhealthy and self.container_id is not None:
            logger.warning("replacing sandbox container %s: %s", self.container_id[:12], self._unhealthy)
            self._close_sync()
            self.replaced += 1
            self._start_sync()

    async def reset(self) -> None:
        """Kills every process in the box, wipes /work, /tmp, /dev/shm and SysV IPC, checks the box's
        health; a box that fails any of it is replaced by a fresh container."""
        async with self._lock:
            await asyncio.to_thread(self._reset_sync)

    def _reset_sync(self) -> None:
        self._require_started()
        self._replace_if_unhealthy()
        raw = self._run(["python3", "-I", "-S", "-c", _RESET], None, _INTERNAL_TIMEOUT_S, 1 << 16)
        if (status := self._status(raw)) != 0:
            self._unhealthy = f"reset failed (exit {status}): {bytes(raw.stdout.kept + raw.stderr.kept)[:300]!r}"
            self._replace_if_unhealthy()

    # -- files -------------------------------------------------------------------------------------

    async def write_file(self, path: str, data: str | bytes) -> None:
        """Writes `data` to `path` under /work, creating parent directories."""
        target = f"{WORK_DIR}/{check_box_path(path)}"
        payload = data.encode() if isinstance(data, str) else bytes(data)
        async with self._lock:
            raw, status = await asyncio.to_thread(self._run_checked, ["sh", "-c", _WRITE, "sh", target], payload, 4096)
        if status in _FILE_STATUS:
            raise file_error(path, _FILE_STATUS[status])
        if status != 0:
            raise OSError(f"could not write {path!r} in the sandbox: {bytes(raw.stderr.kept).decode(errors='replace')}")

    async def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        """Returns the bytes of `path` under /work (at most `max_bytes`, else `OSError`)."""
        target = f"{WORK_DIR}/{check_box_path(path)}"
        async with self._lock:
            raw, status = await asyncio.to_thread(
                self._run_checked, ["sh", "-c", _READ, "sh", target], None, max_bytes + 1
            )
        if status in _FILE_STATUS:
            raise file_error(path, _FILE_STATUS[status])
        if raw.stdout.total > max_bytes:
            raise file_error(path, errno.EFBIG)
        if status != 0:
            raise OSError(f"could not read {path!r} from the sandbox (exit {status}, {raw.stdout.total} bytes)")
        return bytes(raw.stdout.kept)

    # -- execution ---------------------------------------------------------------------------------

    async def exec(
        self,
        argv: list[str],
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Runs `argv` in the container; see `Sandbox.exec`."""
        args = check_exec_args(argv, stdin, timeout, env, cwd, self.limits.wall_s)
        workdir = WORK_DIR if args.cwd is None else f"{WORK_DIR}/{args.cwd}"
        async with self._lock:
            return await asyncio.to_thread(self._exec_sync, args.argv, args.stdin, args.timeout, args.env, workdir)

    def _exec_sync(
        self, argv: list[str], stdin: bytes | None, wall: float, env: dict[str, str], workdir: str
    ) -> ExecResult:
        self._require_started()
        self._replace_if_unhealthy()
        nonce = secrets.token_hex(16)  # only in the root wrapper's environment: unreadable by box code
        cpu = max(1, math.ceil(self.limits.cpu_s))
        # The caller's env reaches the command only (through `env`, as 65534): never the root wrapper,
        # whose programs are named by absolute path, so a PATH into the box's files runs nothing as root.
        pairs = [f"{k}={v}" for k, v in env.items()]
        cmd = ["/bin/sh", "-c", _WRAPPER, "rlgym-exec", workdir, str(cpu), self._oom_file, str(len(pairs))]
        raw = self._run(cmd + pairs + argv, stdin, wall, self.limits.output_bytes, {_NONCE_VAR: nonce}, user="0:0")
        status = None if raw.killed else self._exit_code(raw.exec_id)  # from Docker, never from the output
        match = re.search(rb"RLGYM-" + nonce.encode() + rb"-(\w+)-(\d+)\n\Z", raw.stderr.tail)
        error, oom = None, False
        if match:
            raw.stderr.drop_suffix(len(match.group(0)))
            tag = match.group(1)
            if tag == b"cwd":
                error, status = f"working directory {workdir!r} does not exist in the sandbox", None
            elif tag == b"nf":
                error, status = f"executable not found in the sandbox: {argv[0]!r}", None
            oom = self._saw_oom(int(match.group(2)))
        elif not raw.killed:
            # The wrapper itself died (OOM): sweep what is left, then read the OOM counter.
            self._sweep()
            oom = self._saw_oom(self._read_oom())
        signum = None
        if status is not None and 128 < status <= 128 + 64:  # 128+N: the command was killed by signal N
            signum, status = status - 128, None
        if raw.killed:
            signum, status = 9, None
        cpu_hit = signum == 24  # SIGXCPU: the soft RLIMIT_CPU
        return ExecResult(
            stdout=bytes(raw.stdout.kept).decode("utf-8", "replace"),
            stderr=bytes(raw.stderr.kept).decode("utf-8", "replace"),
            exit_code=status,
            timed_out=raw.timed_out or cpu_hit,
            duration_s=raw.duration_s,
            truncated=raw.stdout.total > raw.stdout.cap or raw.stderr.total > raw.stderr.cap,
            oom_killed=oom and not raw.timed_out,
            signal=signum,
            error=error,
        )

    def _saw_oom(self, count: int) -> bool:
        seen, self._oom_seen = self._oom_seen, max(self._oom_seen, count)
        return count > seen

    def _read_oom(self) -> int:
        if not self._oom_file:
            return self._oom_seen
        raw = self._run(["cat", self._oom_file], None, _INTERNAL_TIMEOUT_S, 4096)
        return _oom_count(bytes(raw.stdout.kept).decode(errors="replace").splitlines())

    def _sweep(self) -> None:
        """Asks the sweeper (via PID 1) to SIGKILL every other process (needs no free pid)."""
        try:
            self._api.kill(self._require_started(), signal="SIGUSR1")
        except Exception as exc:
            self._unhealthy = f"the container is gone or stopped: {exc}"
            raise SandboxError(f"sandbox container is gone or stopped: {exc}") from exc

    def _kill_container(self, why: str) -> None:
        """The last resort, from outside: SIGKILL the whole container (ends every exec stream)."""
        self._unhealthy = why
        with contextlib.suppress(Exception):
            self._api.kill(self.container_id, signal="SIGKILL")

    def _require_started(self) -> str:
        if self.container_id is None:
            raise SandboxError("the sandbox is not started; use `async with` or `await box.start()` first")
        return self.container_id

    def _run(
        self,
        cmd: list[str],
        stdin: bytes | None,
        wall: float,
        cap: int,
        env: dict[str, str] | None = None,
        user: str = USER,
    ) -> _Raw:
        """One `docker exec`: streams output; enforces the wall clock and the flood limit from outside."""
        cid = self._require_started()
        t0 = time.perf_counter()
        try:
            exec_id = self._api.exec_create(
                cid, cmd, stdin=stdin is not None, user=user, workdir=WORK_DIR,
                environment=[f"{k}={v}" for k, v in (env or {}).items()] or None,
            )["Id"]  # fmt: skip
            sio = self._api.exec_start(exec_id, socket=True)
        except _api_errors() as exc:
            self._unhealthy = f"cannot run commands: {exc}"
            raise SandboxError(f"sandbox container {cid[:12]} cannot run commands: {exc}") from exc
        # Read through the HTTP response's buffered reader: it may already hold the first frames.
        response = getattr(sio, "_response", None)
        reader = response.raw._fp.fp if response is not None else sio
        sock = sio._sock
        sock.settimeout(wall + _KILL_GRACE_S + _INTERNAL_TIMEOUT_S)  # backstop behind the container kill
        state = {"killed": False, "timed_out": False, "flooded": False}
        timers: list[threading.Timer] = []

        def interrupt(reason: str) -> None:
            if not state["killed"]:
                state["killed"] = state[reason] = True
                with contextlib.suppress(SandboxError):
                    self._sweep()
                # A healthy sweeper ends the exec at once; if the stream is still open after the grace,
                # the box cannot enforce its own limits: kill it from outside and replace it later.
                later = threading.Timer(
                    _KILL_GRACE_S, self._kill_container, args=(f"a {reason} sweep did not end the exec",)
                )
                later.daemon = True
                timers.append(later)
                later.start()

        watchdog = threading.Timer(wall, interrupt, args=("timed_out",))
        watchdog.daemon = True
        timers.append(watchdog)
        watchdog.start()
        if stdin is not None:
            threading.Thread(target=_feed, args=(sock, stdin), daemon=True).start()
        out, err = _Capture(cap), _Capture(cap)
        buf = b""
        try:
            while True:
                chunk = reader.read1(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 8:
                    size = int.from_bytes(buf[4:8], "big")
                    if len(buf) < 8 + size:
                        break
                    (err if buf[0] == 2 else out).add(buf[8 : 8 + size])
                    buf = buf[8 + size :]
                if out.total + err.total > self.flood_bytes:
                    interrupt("flooded")
        except TimeoutError:  # even the container kill did not end the stream
            state["killed"] = state["timed_out"] = True
            self._unhealthy = "an exec stream outlived the container kill"
        except OSError as exc:
            if not (state["killed"] and self._unhealthy):  # the host's own container kill may reset the stream
                self._unhealthy = f"lost an exec stream: {exc}"
                raise SandboxError(f"lost the exec stream of sandbox container {cid[:12]}: {exc}") from exc
        finally:
            # A timer that already fired runs to its end here: a container kill must land before the
            # next exec starts (it did not always: the next exec then met a dying container).
            watchdog.cancel()
            watchdog.join()
            for timer in timers[1:]:  # the kill timers `interrupt` armed; none is added after the join
                timer.cancel()
                timer.join()
            with contextlib.suppress(OSError):
                sock.close()
        return _Raw(out, err, exec_id, state["killed"], state["timed_out"], time.perf_counter() - t0)

    def _status(self, raw: _Raw) -> int | None:
        """Exit code of an internal command (None if the host killed it)."""
        return None if raw.killed else self._exit_code(raw.exec_id)

    def _run_checked(self, cmd: list[str], stdin: bytes | None, cap: int) -> tuple[_Raw, int | None]:
        self._require_started()
        self._replace_if_unhealthy()
        raw = self._run(cmd, stdin, _INTERNAL_TIMEOUT_S, cap)
        return raw, self._status(raw)

    def _exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + 2.0
        while True:
            try:
                info = self._api.exec_inspect(exec_id)
            except _api_errors() as exc:  # the container went away under the exec
                self._unhealthy = f"cannot inspect an exec: {exc}"
                raise SandboxError(f"sandbox container {self.container_id or '?'} lost an exec: {exc}") from exc
            if not info.get("Running") or time.monotonic() > deadline:
                return info.get("ExitCode")
            time.sleep(0.002)


def seccomp_profile() -> dict[str, Any]:
    """The containers' seccomp profile: the local backend's deny list (`_isolation.DENIED_SYSCALLS`).

    Everything else is allowed; with every capability dropped for the box's uid that is what
    Docker's default profile leaves too, plus ptrace, which the default allows on kernels >= 4.8.
    """
    flags = [0x10000000, 0x20000000, 0x40000000, 0x08000000, 0x04000000, 0x02000000, 0x00020000, 0x80]
    clone_rules = [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": errno.EPERM,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}],
        }
        for flag in flags
    ]
    return {
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": _SECCOMP_ARCHES.get(platform.machine(), []),
        "syscalls": [
            {"names": sorted(DENIED_SYSCALLS), "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
            {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},  # libc falls back to clone
            *clone_rules,
        ],
    }


def _feed(sock: socket.socket, data: bytes) -> None:
    """Writes stdin then half-closes, so the command sees EOF; a command that exits early is fine."""
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _oom_count(lines: list[str]) -> int:
    for line in lines:
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0
