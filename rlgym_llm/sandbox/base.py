"""The sandbox protocol: limits, results, the `Sandbox` base class, a pool and `make_sandbox`.

A sandbox runs untrusted commands (model-written code, test suites) and always answers with an
`ExecResult`: code that crashes, loops, floods output or attacks the host is *data*, reported in
the result. Only a failure of the box itself (its worker died and cannot be restarted, its container
vanished) raises `SandboxError`.

    async with make_sandbox("local") as box:
        await box.write_file("main.py", "print(6 * 7)")
        result = await box.exec(["python", "main.py"])
        assert result.ok and result.stdout == "42\\n"

Backends implement the abstract methods of `Sandbox`; `make_sandbox` finds them by name:
`local` (`rlgym_llm.sandbox.local.LocalSandbox`) and `docker` (`rlgym_llm.sandbox.docker.DockerSandbox`).
Every backend takes `limits: Limits | None` as its first argument and backend options as keywords.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import errno
import importlib
import logging
import math
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, ClassVar

from rlgym_llm.core.errors import ConfigError, RlgymError

logger = logging.getLogger(__name__)

__all__ = [
    "BACKENDS",
    "ExecArgs",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxArgumentError",
    "SandboxError",
    "SandboxPathError",
    "SandboxPool",
    "check_box_path",
    "check_exec_args",
    "file_error",
    "make_sandbox",
]


class SandboxError(RlgymError):
    """The sandbox itself broke (not the code inside it): worker died, container gone, box not started.

    Code that fails inside a box is not an error: it is an `ExecResult` with a non-zero exit code,
    `timed_out`, `oom_killed` or a `signal`.
    """

    failure_kind = "sandbox"  # how the rollout manager classifies it


class SandboxArgumentError(RlgymError, TypeError, ValueError):
    """A sandbox was called wrongly (API misuse): a bad argv, env, timeout, stdin or path.

    Every backend raises it, with the same message, for the same bad argument (see `check_exec_args`).
    """


class SandboxPathError(SandboxArgumentError):
    """A file path given to a sandbox is absolute or escapes the box's work dir (API misuse)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for every execution in a sandbox.

    Attributes:
        wall_s: Wall-clock seconds per execution; the whole process tree is killed after it.
        cpu_s: CPU seconds per execution (RLIMIT_CPU where the backend supports it).
        memory_mb: Address-space / memory cap in MiB per execution.
        max_procs: Maximum number of processes (threads count on Linux) the box may hold at once.
        output_bytes: Bytes kept per stream (stdout, stderr); the rest is dropped and `truncated` set.
        network: Whether the box may use the network. Off by default.
    """

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_mb: int = 512
    max_procs: int = 64
    output_bytes: int = 64 * 1024
    network: bool = False

    def __post_init__(self) -> None:
        problems = []
        for name in ("wall_s", "cpu_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                problems.append(f"Limits.{name} must be a positive finite number of seconds, got {value!r}")
        minimums = {"memory_mb": 16, "max_procs": 1, "output_bytes": 1}
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                problems.append(f"Limits.{name} must be an integer >= {minimum}, got {value!r}")
        if not isinstance(self.network, bool):
            problems.append(f"Limits.network must be True or False, got {self.network!r}")
        if problems:
            raise ConfigError(problems)

    def to_dict(self) -> dict[str, Any]:
        """Returns the limits as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        """Builds limits from a dict; unknown keys are a `ConfigError` naming the valid ones."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ConfigError([f"unknown Limits field {k!r}; valid fields: {sorted(fields)}" for k in unknown])
        return cls(**data)


@dataclass(frozen=True)
class ExecResult:
    """What happened to one execution. Every attack or crash inside the box ends up here.

    Attributes:
        stdout: Captured standard output (decoded as UTF-8 with replacement), at most `output_bytes`.
        stderr: Captured standard error, same cap.
        exit_code: The process's exit status; `None` when it was killed by a signal or never started.
        timed_out: The wall-clock (or CPU) limit was hit and the process tree was killed.
        duration_s: Wall-clock seconds the execution took, as seen by the sandbox.
        truncated: Output was longer than `output_bytes` on at least one stream and was cut.
        oom_killed: The memory limit was hit (OOM kill, or a `MemoryError` the box could detect).
        signal: The signal number that ended the process, if any (e.g. 9 for SIGKILL, 24 for SIGXCPU).
        error: Sandbox-level description when the command could not be run as asked
            (e.g. executable not found); `None` for a normal run, whatever its exit code.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    duration_s: float = 0.0
    truncated: bool = False
    oom_killed: bool = False
    signal: int | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the command ran to completion with exit code 0 and no limit was hit."""
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed and self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Returns the result as a JSON-ready dict (includes `ok`)."""
        return {**dataclasses.asdict(self), "ok": self.ok}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExecResult:
        """Inverse of `to_dict` (the derived `ok` key is ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})


def check_box_path(path: str | PurePosixPath) -> PurePosixPath:
    """Validates a path relative to a box's work dir and returns it normalised.

    Raises:
        SandboxPathError: The path is empty, absolute, or has a `..` component.
    """
    text = str(path)
    pure = PurePosixPath(text)
    if not text or text in (".", "./") or "\x00" in text:
        raise SandboxPathError(f"invalid sandbox path {text!r}: give a file path relative to the box's work dir")
    if pure.is_absolute():
        raise SandboxPathError(
            f"sandbox path {text!r} is absolute; paths are relative to the box's work dir (e.g. 'src/main.py')"
        )
    if ".." in pure.parts:
        raise SandboxPathError(f"sandbox path {text!r} contains '..'; paths may not leave the box's work dir")
    return pure


@dataclass(frozen=True)
class ExecArgs:
    """The arguments of one `Sandbox.exec`, checked and normalised by `check_exec_args`."""

    argv: list[str]
    stdin: bytes | None
    timeout: float
    env: dict[str, str]
    cwd: PurePosixPath | None  # relative to the work dir; None for the work dir itself


def check_exec_args(argv: Any, stdin: Any, timeout: Any, env: Any, cwd: Any, default_timeout: float) -> ExecArgs:
    """Checks `Sandbox.exec`'s arguments the same way for every backend.

    Raises:
        SandboxArgumentError: argv is not a non-empty list of strings (a plain string is refused:
            it is not split), or holds a NUL byte; stdin is not str/bytes; timeout is not a positive
            number; env does not map names (no `=`, no NUL) to strings; cwd escapes the work dir.
    """
    if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)) or not argv:
        raise SandboxArgumentError(
            f"argv must be a non-empty list of strings such as ['python3', 'main.py'], got {argv!r:.200}"
        )
    if not all(isinstance(a, str) for a in argv):
        raise SandboxArgumentError(f"argv must hold only strings, got {argv!r:.200}")
    if not argv[0] or any("\x00" in a for a in argv):
        raise SandboxArgumentError(f"argv[0] must be a program name and no argument may hold a NUL byte: {argv!r:.200}")
    if stdin is not None and not isinstance(stdin, (str, bytes, bytearray, memoryview)):
        raise SandboxArgumentError(f"stdin must be str, bytes or None, got {type(stdin).__name__}")
    data = stdin.encode() if isinstance(stdin, str) else (bytes(stdin) if stdin is not None else None)
    if timeout is None:
        timeout = default_timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
        raise SandboxArgumentError(f"timeout must be a positive number of seconds, got {timeout!r}")
    env = {} if env is None else env
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise SandboxArgumentError(f"env must map strings to strings, got {env!r:.200}")
    for key, value in env.items():
        if not key or "=" in key or "\x00" in key + value:
            raise SandboxArgumentError(f"invalid environment variable {key!r}: names are non-empty, without '=' or NUL")
    if cwd is not None and not isinstance(cwd, str):
        raise SandboxArgumentError(f"cwd must be a path relative to the work dir, got {cwd!r}")
    where = None if cwd in (None, "", ".", "./") else check_box_path(cwd)
    return ExecArgs(list(argv), data, float(timeout), dict(env), where)


_FILE_ERRORS = {
    errno.ENOENT: "no such file in the sandbox: {path}",
    errno.EISDIR: "{path!r} in the sandbox is a directory, not a regular file",
    errno.EINVAL: "{path!r} in the sandbox is not a regular file (a FIFO, socket or device)",
    errno.ELOOP: "{path!r} in the sandbox is a symbolic link; sandbox file operations do not follow links",
    errno.EFBIG: "{path!r} in the sandbox is larger than the read limit",
}


def file_error(path: str, code: int) -> OSError:
    """The error `read_file`/`write_file` raise for `path`, the same on every backend.

    `ENOENT` gives `FileNotFoundError`, `EISDIR` `IsADirectoryError`; `EINVAL` is a FIFO, socket or
    device (never opened, so it cannot block), `ELOOP` a symbolic link, `EFBIG` past the read limit.
    """
    code = errno.EINVAL if code == errno.ENXIO else code  # a FIFO nobody reads, opened for writing
    text = _FILE_ERRORS.get(code, "{path!r} in the sandbox: " + os.strerror(code))
    return OSError(code, text.format(path=path))  # OSError picks the subclass from the errno


class Sandbox(abc.ABC):
    """An isolated place to run commands. Use as an async context manager.

    Subclasses implement `start`, `exec`, `write_file`, `read_file`, `reset` and `close`.
    Paths are relative to the box's work dir (see `check_box_path`).

    Args:
        limits: Resource limits for every execution; defaults to `Limits()`.
    """

    backend: ClassVar[str] = "abstract"

    def __init__(self, limits: Limits | None = None):
        self.limits = limits if limits is not None else Limits()

    async def __aenter__(self) -> Sandbox:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def broken(self) -> str:
        """Why the box must not be used again as it is (`""` while it is healthy).

        A backend that heals itself says here what it found, until it has healed (docker: a container
        found unhealthy, e.g. killed because it hung, is replaced at its next use). An owner may
        replace the box at once instead, and record why.
        """
        return ""

    @abc.abstractmethod
    async def start(self) -> None:
        """Brings the box up (worker process, container); idempotent."""

    @abc.abstractmethod
    async def exec(
        self,
        argv: list[str],
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
    ) -> ExecResult:
        """Runs `argv` in the box and reports what happened.

        Args:
            argv: Program and arguments (no shell; use `["sh", "-c", ...]` for one).
            stdin: Data fed to standard input (closed after); `None` gives an empty stdin.
            timeout: Wall-clock seconds for this call; defaults to `limits.wall_s`.
            env: Extra environment variables for the command, on top of the box's minimal env.
                The caller's own environment never leaks into the box.
            cwd: Working directory relative to the box's work dir; defaults to the work dir.

        Returns:
            The `ExecResult`; failures of the command are reported in it, never raised.

        Raises:
            SandboxArgumentError: Bad arguments (see `check_exec_args`), on every backend alike.
            SandboxError: The box itself is broken or not started.
        """

    @abc.abstractmethod
    async def write_file(self, path: str, data: str | bytes) -> None:
        """Writes `data` (str is UTF-8 encoded) to `path` in the work dir, creating parent dirs."""

    @abc.abstractmethod
    async def read_file(self, path: str) -> bytes:
        """Returns the bytes of `path` in the work dir.

        Raises:
            FileNotFoundError: No such file.
            OSError: `path` is not a regular file (see `file_error`; a FIFO never blocks), or is
                larger than the backend's read limit.
        """

    @abc.abstractmethod
    async def reset(self) -> None:
        """Wipes the work dir and kills leftovers so the box can be reused like a fresh one."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Stops the box and removes its files; idempotent."""


class SandboxPool:
    """Keeps `size` warm sandboxes and hands them out one caller at a time.

        pool = SandboxPool(lambda: make_sandbox("local"), size=4)
        async with pool:
            async with pool.acquire() as box:
                await box.exec(["python", "-c", "print(1)"])

    A released box is `reset()`; a box whose reset fails, or whose user raised `SandboxError`,
    is closed and replaced by a fresh one from `factory`.

    Args:
        factory: Builds a new (not yet started) sandbox.
        size: Number of sandboxes kept warm.
    """

    def __init__(self, factory: Callable[[], Sandbox], size: int = 1):
        if not isinstance(size, int) or size < 1:
            raise ConfigError([f"SandboxPool size must be an integer >= 1, got {size!r}"])
        self._factory = factory
        self.size = size
        self._idle: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._all: set[Sandbox] = set()
        self._started = False
        self._closed = False
        self.replaced = 0  # boxes thrown away because they broke; useful in tests and metrics

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Starts all `size` sandboxes concurrently; idempotent."""
        if self._closed:
            raise SandboxError("this SandboxPool is closed; create a new one")
        if self._started:
            return
        self._started = True
        boxes = await asyncio.gather(*(self._new_box() for _ in range(self.size)))
        for box in boxes:
            self._idle.put_nowait(box)

    async def _new_box(self) -> Sandbox:
        box = self._factory()
        await box.start()
        self._all.add(box)
        return box

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Sandbox]:
        """Waits for a warm sandbox and lends it for the `async with` block."""
        await self.start()
        box = await self._idle.get()
        broken = False
        try:
            yield box
        except SandboxError:
            broken = True
            raise
        finally:
            await self._release(box, broken)

    async def _release(self, box: Sandbox, broken: bool) -> None:
        if self._closed:
            await self._discard(box)
            return
        if not broken:
            try:
                await box.reset()
            except Exception as exc:  # any failure to reset means the box can't be trusted again
                logger.warning("sandbox reset failed, replacing the box: %r", exc)
                broken = True
        if broken:
            self.replaced += 1
            await self._discard(box)
            box = await self._new_box()
        self._idle.put_nowait(box)

    async def _discard(self, box: Sandbox) -> None:
        self._all.discard(box)
        try:
            await box.close()
        except Exception as exc:  # closing a broken box may fail too; it is gone either way
            logger.warning("closing a broken sandbox failed: %r", exc)

    async def close(self) -> None:
        """Closes every sandbox, lent or idle; idempotent."""
        self._closed = True
        boxes, self._all = list(self._all), set()
        for box in boxes:
            await self._discard(box)


# name -> (module, class); modules are imported only when the backend is asked for.
BACKENDS: dict[str, tuple[str, str]] = {
    "local": ("rlgym_llm.sandbox.local", "LocalSandbox"),
    "docker": ("rlgym_llm.sandbox.docker", "DockerSandbox"),
}


def make_sandbox(backend: str = "local", limits: Limits | None = None, **kwargs: Any) -> Sandbox:
    """Builds a (not yet started) sandbox of the named backend.

    Args:
        backend: "local" (default) or "docker".
        limits: Resource limits; defaults to `Limits()`.
        **kwargs: Backend options, passed to the backend's constructor.

    Raises:
        ConfigError: Unknown backend name.
    """
    if backend not in BACKENDS:
        raise ConfigError([f"unknown sandbox backend {backend!r}; choose one of {sorted(BACKENDS)}"])
    module_name, class_name = BACKENDS[backend]
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(limits, **kwargs)
