"""The `docker` sandbox backend: one warm container per box, driven through the real Docker daemon.

    async with make_sandbox("docker", Limits(wall_s=5)) as box:
        result = await box.exec(["python3", "-c", "print(1)"])

Each box is a long-running container (`network_mode="none"`, memory and swap capped, a pids limit,
read-only root, all capabilities dropped, `no-new-privileges`, uid 65534) with size-capped tmpfs
mounts at /work (the work dir) and /tmp. Executions are `docker exec`s of a small `sh` wrapper that
sets the CPU rlimit, runs the command, kills every process the command left behind and reports the
exit status and the cgroup's OOM-kill counter in a trailer line on stderr tagged with a per-exec nonce.

The container's PID 1 is a tiny Python init that reaps orphans and, on SIGUSR1 from the host, kills
every other process in the container. The host sends it on a timeout or an output flood: a signal
needs no new process, so it works even when a fork bomb holds every pid the box may have.

The default image `rlgym-sandbox:py3` is built locally by `sandboxes/image/build.sh` (or
`.ci/docker-setup.sh`, which also installs and starts the daemon). Containers carry the label
`rlgym_llm.sandbox=1` and their owner's pid; `cleanup_containers()` removes leftovers of dead processes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import logging
import math
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlgym_llm.core.errors import MissingDependencyError
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
_STDERR_TAIL = 256  # bytes of stderr kept past the cap so the trailer is always seen

# PID 1: reap orphans (zombies would count against the pids limit) and sweep the box on SIGUSR1.
_INIT = """
import os, signal
def sweep(*_):
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
signal.signal(signal.SIGUSR1, sweep)
signal.signal(signal.SIGCHLD, lambda *_: None)
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        signal.pause()
"""

# $1 nonce, $2 cwd, $3 CPU seconds, $4 OOM counter file, then argv. The soft CPU limit sends SIGXCPU
# (reported as a timeout); the hard one, a second later, is a SIGKILL for code that ignores it.
_WRAPPER = r"""n=$1; d=$2; t=$3; f=$4; shift 4
if ! cd "$d" 2>/dev/null; then printf 'RLGYM-%s-cwd\n' "$n" >&2; exit 126; fi
if ! command -v "$1" >/dev/null 2>&1; then printf 'RLGYM-%s-nf\n' "$n" >&2; exit 127; fi
ulimit -S -t "$t"; ulimit -H -t $((t + 1))
"$@"
rc=$?
kill -9 -1 2>/dev/null
o=0; if [ -r "$f" ]; then while read -r k v; do [ "$k" = oom_kill ] && o=$v; done < "$f"; fi
printf 'RLGYM-%s-x-%d-%s\n' "$n" "$rc" "$o" >&2
exit $rc
"""

_RESET = r"""kill -9 -1 2>/dev/null
for d in /work /tmp /dev/shm; do
    [ -d "$d" ] || continue
    chmod -R u+rwX "$d" 2>/dev/null
    rm -rf "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
done
[ -z "$(ls -A /work)" ] && [ -z "$(ls -A /tmp)" ]
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
        limits: Resource limits; `memory_mb` caps the whole container (tmpfs contents included, no swap),
            `max_procs` its pids (the init and the exec wrapper are not counted against it).
        image: Image to run; it needs `sh`, coreutils and `python3` (for the init).
        base_url: Daemon address; defaults to `DOCKER_HOST` or the local socket.
        disk_mb: Size of the /work tmpfs.
        tmp_mb: Size of the /tmp tmpfs.
        network_mode: Docker network when `limits.network` is on (default: the daemon's default network).
        cpus: Optional CPU quota (e.g. 1.0 = one core).
        flood_factor: Once a command has written this many times `output_bytes` in total, it is killed.
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
    ):
        super().__init__(limits)
        _docker_module()  # fail at construction, with the install hint, when the SDK is missing
        self.image = image
        self.base_url = base_url
        self.disk_mb = disk_mb
        self.tmp_mb = tmp_mb
        self.network_mode = network_mode
        self.cpus = cpus
        self.flood_bytes = max(flood_factor * self.limits.output_bytes, 1 << 22)
        self.container_id: str | None = None
        self._api: Any = None
        self._oom_file = ""
        self._oom_seen = 0
        self._lock = asyncio.Lock()  # the wrapper's sweep would kill a concurrent exec: one at a time

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
        tmpfs_opts = "rw,exec,nosuid,nodev,size={}m,uid=65534,gid=65534,mode={}"
        host_config = api.create_host_config(
            network_mode=(self.network_mode or "default") if self.limits.network else "none",
            mem_limit=f"{self.limits.memory_mb}m",
            memswap_limit=f"{self.limits.memory_mb}m",  # equal to mem_limit: no swap
            pids_limit=self.limits.max_procs + 2,
            read_only=True,
            tmpfs={WORK_DIR: tmpfs_opts.format(self.disk_mb, "0755"), "/tmp": tmpfs_opts.format(self.tmp_mb, "1777")},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            ulimits=[docker.types.Ulimit(name="core", soft=0, hard=0)],  # SIGXCPU would dump core into /work
            nano_cpus=int(self.cpus * 1e9) if self.cpus else None,
            shm_size="16m",
        )
        labels = {LABEL: "1", f"{LABEL}.pid": str(os.getpid()), f"{LABEL}.host": socket.gethostname()}
        cid = None
        try:
            cid = api.create_container(
                self.image,
                command=["python3", "-c", _INIT],
                user=USER,
                working_dir=WORK_DIR,
                hostname="sandbox",
                labels=labels,
                host_config=host_config,
                network_disabled=not self.limits.network,
            )["Id"]
            with _LIVE_LOCK:
                _LIVE[cid] = api
            api.start(cid)
        except docker.errors.APIError as exc:
            if cid is not None:  # created but would not start: don't leave it behind
                self._api, self.container_id = api, cid
                self._close_sync()
            raise SandboxError(f"could not start a sandbox container from {self.image!r}: {exc}") from exc
        self._api, self.container_id = api, cid
        # Probe: proves execs work and finds the cgroup's OOM-kill counter (v1 and v2 differ).
        probe = "for f in " + " ".join(_OOM_FILES) + '; do [ -r "$f" ] && { echo "$f"; cat "$f"; break; }; done'
        raw = self._run(["sh", "-c", probe], None, _INTERNAL_TIMEOUT_S, 1 << 16)
        if self._status(raw) != 0:
            self._close_sync()
            raise SandboxError(f"sandbox container from {self.image!r} failed its probe: {bytes(raw.stderr.kept)!r}")
        lines = bytes(raw.stdout.kept).decode().splitlines()
        self._oom_file = lines[0] if lines else ""
        self._oom_seen = _oom_count(lines[1:])
        logger.debug("started sandbox container %s (%s)", cid[:12], self.image)

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

    async def reset(self) -> None:
        """Kills every process in the box and wipes /work, /tmp and /dev/shm."""
        async with self._lock:
            await asyncio.to_thread(self._reset_sync)

    def _reset_sync(self) -> None:
        self._sweep()
        raw = self._run(["sh", "-c", _RESET], None, _INTERNAL_TIMEOUT_S, 1 << 16)
        if (status := self._status(raw)) != 0:
            raise SandboxError(f"sandbox reset failed (exit {status}): {bytes(raw.stderr.kept)[:500]!r}")

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
        nonce = secrets.token_hex(8)
        cpu = max(1, math.ceil(self.limits.cpu_s))
        cmd = ["sh", "-c", _WRAPPER, "rlgym-exec", nonce, workdir, str(cpu), self._oom_file, *argv]
        raw = self._run(cmd, stdin, wall, self.limits.output_bytes, env)
        match = re.search(rb"RLGYM-" + nonce.encode() + rb"-(cwd|nf|x-(\d+)-(\d+))\n\Z", raw.stderr.tail)
        error = None
        status: int | None = None
        oom = False
        if match:
            raw.stderr.drop_suffix(len(match.group(0)))
            if match.group(1) == b"cwd":
                error, status = f"working directory {workdir!r} does not exist in the sandbox", None
            elif match.group(1) == b"nf":
                error, status = f"executable not found in the sandbox: {argv[0]!r}", None
            else:
                status = int(match.group(2))
                oom = self._saw_oom(int(match.group(3)))
        elif not raw.killed:
            # The wrapper itself died (OOM, or the command killed it): sweep leftovers, check the OOM counter.
            status = self._exit_code(raw.exec_id)
            self._sweep()
            oom = self._saw_oom(self._read_oom())
        signum = None
        if status is not None and 128 < status <= 128 + 64:  # the shell's 128+N convention for "killed by N"
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
        """Asks the container's init to SIGKILL every other process (needs no free pid)."""
        try:
            self._api.kill(self._require_started(), signal="SIGUSR1")
        except Exception as exc:
            raise SandboxError(f"sandbox container is gone or stopped: {exc}") from exc

    def _require_started(self) -> str:
        if self.container_id is None:
            raise SandboxError("the sandbox is not started; use `async with` or `await box.start()` first")
        return self.container_id

    def _run(
        self, cmd: list[str], stdin: bytes | None, wall: float, cap: int, env: dict[str, str] | None = None
    ) -> _Raw:
        """One `docker exec`: streams output, enforces the wall clock and the flood limit."""
        docker = _docker_module()
        cid = self._require_started()
        t0 = time.perf_counter()
        try:
            exec_id = self._api.exec_create(
                cid, cmd, stdin=stdin is not None, user=USER, workdir=WORK_DIR,
                environment=[f"{k}={v}" for k, v in (env or {}).items()] or None,
            )["Id"]  # fmt: skip
            sio = self._api.exec_start(exec_id, socket=True)
        except docker.errors.APIError as exc:
            raise SandboxError(f"sandbox container {cid[:12]} cannot run commands: {exc}") from exc
        # Read through the HTTP response's buffered reader: it may already hold the first frames.
        response = getattr(sio, "_response", None)
        reader = response.raw._fp.fp if response is not None else sio
        sock = sio._sock
        sock.settimeout(wall + _INTERNAL_TIMEOUT_S)  # backstop in case the sweep cannot end the stream
        state = {"killed": False, "timed_out": False, "flooded": False}

        def interrupt(reason: str) -> None:
            if not state["killed"]:
                state["killed"] = state[reason] = True
                with contextlib.suppress(SandboxError):
                    self._sweep()

        watchdog = threading.Timer(wall, interrupt, args=("timed_out",))
        watchdog.daemon = True
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
        except TimeoutError:  # the backstop fired: the sweep could not end the stream
            state["killed"] = state["timed_out"] = True
        except OSError as exc:
            raise SandboxError(f"lost the exec stream of sandbox container {cid[:12]}: {exc}") from exc
        finally:
            watchdog.cancel()
            with contextlib.suppress(OSError):
                sock.close()
        return _Raw(out, err, exec_id, state["killed"], state["timed_out"], time.perf_counter() - t0)

    def _status(self, raw: _Raw) -> int | None:
        """Exit code of an internal command (None if the host killed it)."""
        return None if raw.killed else self._exit_code(raw.exec_id)

    def _run_checked(self, cmd: list[str], stdin: bytes | None, cap: int) -> tuple[_Raw, int | None]:
        raw = self._run(cmd, stdin, _INTERNAL_TIMEOUT_S, cap)
        return raw, self._status(raw)

    def _exit_code(self, exec_id: str) -> int | None:
        deadline = time.monotonic() + 2.0
        while True:
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running") or time.monotonic() > deadline:
                return info.get("ExitCode")
            time.sleep(0.002)


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
