"""Runs pytest in a sandbox for `rlgym/SWE-v0`, for the agent's test runs and for grading.

One `TestHarness` per env holds one sandbox, started on first use and reused across episodes
(wiped between them). A request is a single execution of `box_pytest.py` (`python3 -I -B -c`) with a
JSON request on stdin carrying the files to write first, so neither backend needs a file upload per
edit. The pinned pytest (`toolchain.ensure_pytest`) is mounted read-only at the same path.

    harness = TestHarness("local", Limits(wall_s=60))
    runs = harness.run({"root": "repo", "fresh": True, "files": files, "runs": [{"args": ["tests"]}]})
    runs[0].log          # pytest's output
    runs[0].verdict(ids) # per-test outcomes, judged on the host
    runs[0].records      # for a run with "trace": true, the traced tests' records (`trace.py`)
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgym_envs.swe.grading import Verdict, judge
from rlgym_envs.swe.toolchain import ensure_pytest
from rlgym_llm.sandbox import ExecResult, Limits, Sandbox, make_sandbox
from rlgym_llm.sandbox.sync import run_sync

logger = logging.getLogger(__name__)

BOX_SOURCE = Path(__file__).with_name("box_pytest.py").read_text(encoding="utf-8")
PYTHON = "python3"
BOX_PYTEST_DIR = "/opt/rlgym/pytest"  # where a container sees the pinned pytest
_SLACK_S = 10.0  # file writes and interpreter start-up, beyond the pytest runs' own budget


@dataclass(frozen=True)
class PytestRun:
    """One pytest process of a request.

    Args:
        log: pytest's output (stdout and stderr), as the box captured it.
        exit_code: pytest's exit status (None when the whole execution failed).
        timed_out: the run hit its time limit.
        ok: the execution that held this run finished normally and reported it.
        records: for a run with `"trace": true`, the records the graded tests wrote (None if cut).
    """

    log: str
    exit_code: int | None
    timed_out: bool
    ok: bool
    exec_result: ExecResult | None = field(default=None, repr=False)
    records: str | None = field(default=None, repr=False)  # a traced run's record stream (`trace.py`)

    def verdict(self, ids: list[str] | tuple[str, ...]) -> Verdict:
        """The host's reading of this run for the graded `ids` (a failed execution passes nothing)."""
        verdict = judge(self.log, self.exit_code, ids, self.timed_out)
        return verdict if self.ok else Verdict(verdict.statuses, False, verdict.duplicated)


class TestHarness:
    """A sandbox that runs pytest requests; see the module docstring.

    Args:
        backend: the sandbox backend, "local" or "docker".
        limits: limits of every execution.
        options: backend options (e.g. `image` for docker); `read_only_mounts` gains the pytest folder.
    """

    __test__ = False  # not a pytest class, despite the name

    def __init__(self, backend: str = "local", limits: Limits | None = None, **options: Any) -> None:
        self.backend = backend
        self.limits = limits or Limits()
        host_dir = str(ensure_pytest())
        # Local boxes see host folders at their own path; a container gets it at a fixed place
        # (its /root, where the cache usually lives, is closed to the box's user).
        self.pytest_dir = host_dir if backend == "local" else BOX_PYTEST_DIR
        mounts = dict(options.pop("read_only_mounts", None) or {})
        self.options = {**options, "read_only_mounts": {**mounts, host_dir: self.pytest_dir}}
        self._box: Sandbox | None = None
        self._dirty = False  # the box ran something since its last wipe
        self._wipe = False
        # `-I`: no user site-packages, PYTHON* variables or cwd on sys.path (the work dir is writable).
        # The local backend runs `python -c` inside its already started worker, so there is no startup.
        isolated = [] if backend == "local" else ["-I", "-B"]
        self._argv = [PYTHON, *isolated, "-c", BOX_SOURCE]

    def _sandbox(self) -> Sandbox:
        if self._box is None:
            box = make_sandbox(self.backend, self.limits, **self.options)
            run_sync(box.start())
            self._box, self._dirty = box, False
        elif self._dirty and self._wipe:
            run_sync(self._box.reset())  # a new episode: nothing of the last one survives
            self._dirty = False
        self._wipe = False
        return self._box

    def new_episode(self) -> None:
        """Wipe the box before its next run (lazily: an episode that runs nothing costs nothing)."""
        self._wipe = True

    def run(self, request: dict[str, Any], *, wipe_after: bool = False, fresh_box: bool = False) -> list[PytestRun]:
        """Execute one request (see `box_pytest.py` for its fields); one `PytestRun` per entry of `runs`.

        Each pytest run gets the sandbox's wall limit (`limits.wall_s`); the execution, all of them.
        `wipe_after` empties the box once the request is over, so files it wrote (hidden tests)
        cannot be read by later runs of the agent's code. `fresh_box` replaces the box first
        (local: a new worker, uid and tmpfs; docker: processes killed, /work, /tmp, /dev/shm wiped),
        so nothing an earlier run left behind (files, processes, shared memory) sees this one.
        """
        box = self._sandbox()
        if fresh_box and self._dirty:
            run_sync(box.reset())
            self._dirty = False
        n_runs = max(len(request["runs"]), 1)
        budget = self.limits.wall_s  # each pytest run; the execution gets them all plus start-up slack
        # JSON escaping can triple a log's size: keep the one stdout line under the box's output cap.
        log_chars = self.limits.output_bytes // (3 * n_runs)
        payload = json.dumps({"pytest_dir": self.pytest_dir, "timeout": budget, "log_chars": log_chars, **request})
        self._dirty = True
        result = run_sync(box.exec(self._argv, stdin=payload, timeout=n_runs * budget + _SLACK_S))
        if wipe_after:
            run_sync(box.reset())
            self._dirty = False
        try:
            lines = result.stdout.strip().splitlines()
            if len(lines) != 1:  # the box prints exactly one line; more is someone else's writing
                raise ValueError(f"{len(lines)} lines")
            reported = json.loads(lines[0])["runs"]
            ok = result.ok and len(reported) == len(request["runs"])
            runs = [
                PytestRun(
                    r["log"],
                    r["exit"],
                    bool(r["timed_out"]),
                    ok,
                    result,
                    None if r.get("records_cut") else r.get("records"),
                )
                for r in reported
            ]
        except (ValueError, KeyError, TypeError) as exc:
            why = (
                f"stopped after the {self.limits.wall_s:g}s time limit"
                if result.timed_out
                else f"stopped: over the {self.limits.memory_mb} MiB memory limit"
                if result.oom_killed
                else f"ended early (exit code {result.exit_code}; {exc})"
            )
            text = f"[the test run {why}]\n{result.stderr.strip()[-2000:]}".strip()
            runs = [PytestRun(text, None, result.timed_out, False, result) for _ in request["runs"]]
        logger.debug("pytest request: %d runs, ok=%s, %.3fs", len(runs), result.ok, result.duration_s)
        return runs

    def close(self) -> None:
        """Stop the sandbox; idempotent."""
        box, self._box = self._box, None
        if box is not None:
            run_sync(box.close())
