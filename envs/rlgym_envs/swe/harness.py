"""Runs the in-box test runner (`runner.py`) in a sandbox, for the agent's test runs and for grading.

One `TestHarness` per env holds one sandbox, started on first use and reused across episodes
(wiped between them). Each test run is a single execution: `python3 -c <runner>` with a JSON request
on stdin carrying the files to write first, so neither backend needs a file upload per edit.

    harness = TestHarness("local", Limits(wall_s=60))
    run = harness.run({"root": "repo", "fresh": True, "files": files, "selectors": []})
    run.results      # {test id: "PASS" | "FAIL"} as the runner reported them
    run.report       # the readable report, machine lines removed
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlgym_llm.sandbox import ExecResult, Limits, Sandbox, make_sandbox
from rlgym_llm.sandbox.sync import run_sync

logger = logging.getLogger(__name__)

RUNNER_SOURCE = Path(__file__).with_name("runner.py").read_text(encoding="utf-8")
PYTHON = "python3"  # the box's interpreter: the local backend runs it in its warm worker


@dataclass(frozen=True)
class TestRun:
    """One execution of the runner.

    Args:
        results: per test id, "PASS" or "FAIL" (tests the run never reached are absent).
        report: what the model may see: the runner's report with the machine lines removed.
        complete: the runner reached its end (no timeout or crash cut it short).
        tampered: the code under test modified the test machinery; no result counts.
        exec_result: the sandbox's raw result.
    """

    results: dict[str, str]
    report: str
    complete: bool
    tampered: bool
    exec_result: ExecResult = field(repr=False)

    def passed(self, test_id: str) -> bool:
        """Whether the test passed in a run that finished untampered (a run cut short counts for nothing)."""
        return self.complete and not self.tampered and self.results.get(test_id) == "PASS"


def parse_output(stdout: str, nonce: str) -> tuple[dict[str, str], str, bool, bool]:
    """(results, readable report, complete, tampered) from the runner's stdout for one nonce."""
    tag = f"@@{nonce} "
    results: dict[str, str] = {}
    kept, complete, tampered = [], False, False
    for line in stdout.splitlines():
        if not line.startswith(tag):
            kept.append(line)
            continue
        fields = line[len(tag) :].split(" ", 1)
        if fields[0] in ("PASS", "FAIL") and len(fields) == 2:
            if fields[1] in results:  # the runner reports each test once: a second line is forged
                tampered = True
            results[fields[1]] = fields[0]
        elif fields[0] == "DONE":
            complete = True
        elif fields[0] == "TAMPERED":
            tampered = True
    return results, "\n".join(kept), complete, tampered


class TestHarness:
    """A sandbox that runs test requests; see the module docstring.

    Args:
        backend: the sandbox backend, "local" or "docker".
        limits: limits of every execution (a test run's wall-clock budget is `limits.wall_s`).
        options: backend options (e.g. `image` for docker).
    """

    __test__ = False  # not a pytest class, despite the name

    def __init__(self, backend: str = "local", limits: Limits | None = None, **options: Any) -> None:
        self.backend = backend
        self.limits = limits or Limits()
        self.options = options
        self._box: Sandbox | None = None
        self._dirty = False  # the box ran something since its last wipe
        self._wipe = False
        # A fresh interpreter runs `site` first, which would import a `usercustomize` planted under
        # $HOME (the writable work dir): `-I` skips user site-packages, PYTHON* variables and the cwd.
        # The local backend runs `python -c` inside its already started worker, so there is no startup.
        isolated = [] if backend == "local" else ["-I", "-B"]
        self._argv = [PYTHON, *isolated, "-c", RUNNER_SOURCE]

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

    def run(self, request: dict[str, Any], *, wipe_after: bool = False) -> TestRun:
        """Execute one runner request (see `runner.py` for its fields).

        `wipe_after` empties the box once the run is over, so files it wrote (hidden tests) cannot be
        read by later runs of the agent's code.
        """
        box = self._sandbox()
        nonce = secrets.token_hex(8)
        payload = json.dumps({**request, "nonce": nonce})
        self._dirty = True
        result = run_sync(box.exec(self._argv, stdin=payload))
        results, report, complete, tampered = parse_output(result.stdout, nonce)
        if result.stderr.strip() and not complete:
            report += "\n" + result.stderr.strip()[-2000:]
        if result.timed_out:
            report += f"\n[the test run was stopped after the {self.limits.wall_s:g}s time limit]"
        elif result.oom_killed:
            report += f"\n[the test run was stopped: it went over the {self.limits.memory_mb} MiB memory limit]"
        elif not complete:
            report += f"\n[the test run ended early (exit code {result.exit_code})]"
        if result.truncated:
            report += "\n[output was cut: too long]"
        if wipe_after:
            run_sync(box.reset())
            self._dirty = False
        logger.debug("test run: %d results, complete=%s, %.3fs", len(results), complete, result.duration_s)
        return TestRun(results, report.strip("\n"), complete, tampered, result)

    def close(self) -> None:
        """Stop the sandbox; idempotent."""
        box, self._box = self._box, None
        if box is not None:
            run_sync(box.close())
