"""Run submitted code against a task's cases in a sandbox, and judge each case on the host.

Why a verdict cannot be forged from inside the box:
- a hidden test never enters the box whole: each case runs in its own execution, which receives only
  that case's input (function arguments, or the program's stdin);
- the expected value stays on the host. The in-box harness (`_harness.py`) reports what the code
  returned (function tasks) or the program prints (stdio tasks), and the host compares. Code that
  exits early, patches the harness, builtins or `json`, or prints "PASS" lines only changes what it
  reports about itself;
- the report line carries a fresh per-execution nonce, so the code's own prints (moved to stderr in
  function tasks) are never mistaken for it, and stdout must hold exactly that one line;
- the harness confines the code with Landlock (see `_harness.py`) so it cannot read the task files
  of the installed package either.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import time
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from rlgym_envs.code.tasks import FunctionCase, StdioCase, TaskSpec, call_text
from rlgym_llm.sandbox import ExecResult, Sandbox

SOLUTION_FILE = "solution.py"
_SHORT = 300  # characters of a value or an error shown back to the model
MAX_DEPTH = 64  # nesting levels of a returned value the host parses; deeper is a failed test
_JSON_SPECIAL = re.compile(r'[\\"\[\]{}]')


@cache
def harness_source() -> str:
    """The in-box harness, sent as `python3 -c SOURCE MODE NONCE`."""
    return (resources.files("rlgym_envs.code") / "_harness.py").read_text(encoding="utf-8")


_MAIN_GUARD = 'if __name__ == "__main__":\n    main()\n'


@cache
def check_harness_source() -> str:
    """The judge and worker of assert-based tests (`_check_harness.py`, on top of the harness)."""
    base = harness_source()
    if _MAIN_GUARD not in base:
        raise RuntimeError("_harness.py no longer ends with its main guard: update check_harness_source")
    check = (resources.files("rlgym_envs.code") / "_check_harness.py").read_text(encoding="utf-8")
    body = base.replace(_MAIN_GUARD, "") + "\n" + check + "\nif __name__ == '__main__':\n    check_main()\n"
    # `_SOURCE` holds the body, so the judge can start its worker from the same program
    return f"_SOURCE = {body!r}\nexec(_SOURCE)\n"


async def run_check(
    box: Sandbox, prompt: str, test: str, entry_point: str, code: str, timeout_s: float = 10.0, python: str = "python3"
) -> CaseResult:
    """Grade `code` with HumanEval/MBPP-style test code (`def check(candidate): assert ...`), as their
    authors do: the test's `check` runs on the entry point. The test code reaches only the judge
    process; the submission runs in a worker that returns plain data (see `_check_harness.py`), and
    the verdict counts only with this call's nonce.

    Args:
        box: a started sandbox; `solution.py` in its work dir is overwritten.
        prompt: the task's prompt code (helpers the test may use, e.g. HumanEval's `poly`).
        test: the test code defining `check(candidate)`.
        entry_point: the function under test.
        code: the submitted source (a whole module).
    """
    try:
        await box.write_file(SOLUTION_FILE, code)
    except OSError as exc:
        return CaseResult(
            False, "error", error=f"could not write {SOLUTION_FILE} into the sandbox ({_short(str(exc), 120)})"
        )
    nonce = secrets.token_hex(16)
    request = json.dumps({"nonce": nonce, "prompt": prompt, "test": test, "entry_point": entry_point})
    result = await box.exec([python, "-c", check_harness_source(), "check", "-"], stdin=request, timeout=timeout_s)
    if result.timed_out:
        return CaseResult(False, "timeout", result.duration_s, error="the tests did not finish in time")
    lines = [line for line in result.stdout.splitlines() if line.startswith(nonce + " ")]
    if len(lines) != 1:
        return CaseResult(False, "error", result.duration_s, error="no verdict", stderr=_tail(result.stderr))
    verdict = lines[0][len(nonce) + 1 :]
    passed = verdict == "PASS"
    return CaseResult(
        passed,
        "pass" if passed else "wrong",
        result.duration_s,
        error=None if passed else verdict,
        stderr=_tail(result.stderr),
    )


@dataclass(frozen=True)
class CaseResult:
    """The verdict on one case.

    Attributes:
        passed: the code produced the expected value or output.
        status: `pass`, `wrong` (ran, wrong answer), `error` (raised, crashed, exited early, no
            result), `timeout`, or `skipped` (the grading time budget ran out first).
        duration_s: seconds the execution took.
        got: a short text of what the code produced (for feedback on visible examples only).
        error: a short error description, if any.
        stderr: the tail of the code's stderr.
    """

    passed: bool
    status: str
    duration_s: float = 0.0
    got: str | None = None
    error: str | None = None
    stderr: str = ""


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in JSON `text`, in one linear pass (no recursion).

    The host checks this before `json.loads`: box output is untrusted, and a value nested thousands
    deep would make the parser (and every recursive walk after it) raise `RecursionError`.
    """
    depth = peak = 0
    in_string, escaped_at = False, -1
    for match in _JSON_SPECIAL.finditer(text):
        at, char = match.start(), match.group()
        if at == escaped_at:
            continue
        if in_string:
            if char == "\\":
                escaped_at = at + 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            peak = max(peak, depth)
        elif char in "]}":
            depth -= 1
    return peak


def loads_bounded(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` for untrusted text: `ValueError` (never `RecursionError`) past `max_depth` levels."""
    if json_depth(text) > max_depth:
        raise ValueError(f"JSON nested more than {max_depth} levels deep")
    return json.loads(text)


def _short(text: str, limit: int = _SHORT) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _tail(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def same(got: Any, expected: Any, compare: str = "exact") -> bool:
    """Whether a returned JSON value matches the expected one.

    `exact`: equal values, but a bool never equals a number; `float`: numbers within a relative
    1e-6 (absolute 1e-9); `unordered`: two lists holding the same elements in any order.
    """
    if compare == "unordered":
        if not (isinstance(got, list) and isinstance(expected, list)) or len(got) != len(expected):
            return False
        key = lambda v: json.dumps(v, sort_keys=True)  # noqa: E731
        return all(same(a, b) for a, b in zip(sorted(got, key=key), sorted(expected, key=key)))
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if compare == "float":
            try:
                return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9)
            except OverflowError:  # an int too large for a float (thousands of digits) is not close
                return False
        return got == expected
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(same(a, b, compare) for a, b in zip(got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same(got[k], expected[k], compare) for k in got)
    return type(got) is type(expected) and got == expected


def normalize_output(text: str) -> str:
    """Printed output as judged: trailing spaces on each line and trailing blank lines do not count."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _failure(result: ExecResult) -> CaseResult | None:
    """The verdict when the execution itself failed (timeout, memory, could not start)."""
    stderr = _tail(result.stderr)
    if result.timed_out:
        return CaseResult(False, "timeout", result.duration_s, error="time limit exceeded", stderr=stderr)
    if result.oom_killed:
        return CaseResult(False, "error", result.duration_s, error="memory limit exceeded", stderr=stderr)
    if result.error:
        return CaseResult(False, "error", result.duration_s, error=_short(result.error), stderr=stderr)
    return None


def judge_function(result: ExecResult, case: FunctionCase, nonce: str, compare: str) -> CaseResult:
    """Judge a function case from the harness's report line (`NONCE {json}` as the whole stdout)."""
    if (failed := _failure(result)) is not None:
        return failed
    stderr, took = _tail(result.stderr), result.duration_s
    if result.truncated and result.stdout.startswith(nonce + " ") and "\n" not in result.stdout:
        return CaseResult(False, "error", took, error="the return value is larger than the output limit", stderr=stderr)
    reports = [line for line in result.stdout.splitlines() if line.startswith(nonce + " ")]
    if not reports:
        why = f"no result: the code exited (status {result.exit_code}) before the function returned"
        return CaseResult(False, "error", took, error=why, stderr=stderr)
    if len(reports) != 1 or result.stdout != reports[0] + "\n":
        return CaseResult(False, "error", took, error="unexpected output on the result channel", stderr=stderr)
    try:
        report = loads_bounded(reports[0][len(nonce) + 1 :], MAX_DEPTH + 1)  # +1: the report's own object
        ok, value = bool(report["ok"]), report.get("value")
    except ValueError as exc:  # bad JSON, too deep, or an integer longer than Python parses
        return CaseResult(False, "error", took, error=f"unreadable result: {_short(str(exc), 120)}", stderr=stderr)
    except (KeyError, TypeError):
        return CaseResult(False, "error", took, error="unreadable result", stderr=stderr)
    if not ok:
        return CaseResult(False, "error", took, error=_short(str(report.get("error"))), stderr=stderr)
    got = _short(repr(value))
    passed = same(value, case.expected, compare)
    return CaseResult(passed, "pass" if passed else "wrong", took, got=got, stderr=stderr)


def judge_stdio(result: ExecResult, case: StdioCase) -> CaseResult:
    """Judge a stdin/stdout case: exit status 0 and the expected output (see `normalize_output`)."""
    if (failed := _failure(result)) is not None:
        return failed
    stderr, got = _tail(result.stderr), _short(result.stdout)
    if result.exit_code != 0:
        why = f"exit status {result.exit_code}" if result.exit_code is not None else f"killed by signal {result.signal}"
        return CaseResult(False, "error", result.duration_s, got=got, error=why, stderr=stderr)
    passed = not result.truncated and normalize_output(result.stdout) == normalize_output(case.output)
    return CaseResult(passed, "pass" if passed else "wrong", result.duration_s, got=got, stderr=stderr)


async def run_cases(
    box: Sandbox,
    spec: TaskSpec,
    code: str,
    *,
    hidden: bool,
    timeout_s: float | None = None,
    budget_s: float = 30.0,
    python: str = "python3",
) -> list[CaseResult]:
    """Run `code` on the task's visible examples (`hidden=False`) or hidden tests, one execution each.

    Args:
        box: a started sandbox; `solution.py` in its work dir is overwritten.
        spec: the task.
        code: the submitted Python source.
        hidden: grade the hidden tests instead of the visible examples.
        timeout_s: wall-clock seconds per case (default: the task's `timeout_s`).
        budget_s: seconds for all cases together; cases left when it runs out are `skipped`.
        python: the interpreter's name inside the box.
    """
    try:
        await box.write_file(SOLUTION_FILE, code)
    except OSError as exc:  # the box's disk or memory is full of what earlier runs wrote: the code's doing
        why = f"could not write {SOLUTION_FILE} into the sandbox ({_short(str(exc), 120)}); files left by earlier runs?"
        return [CaseResult(False, "error", error=why) for _ in spec.cases(hidden)]
    per_case = spec.timeout_s if timeout_s is None else timeout_s
    if spec.kind == "check":  # one run of the test code's check(candidate); nothing visible to run
        assert spec.entry_point is not None and spec.test is not None  # checked by TaskSpec
        if not hidden:
            return []
        return [await run_check(box, spec.prompt, spec.test, spec.entry_point, code, min(budget_s, 10 * per_case))]
    deadline = time.monotonic() + budget_s
    results = []
    for case in spec.cases(hidden):
        left = deadline - time.monotonic()
        if left <= 0.05:
            results.append(CaseResult(False, "skipped", error="not run: the grading time budget was used up"))
            continue
        nonce = secrets.token_hex(16)
        argv = [python, "-c", harness_source(), spec.kind, nonce]
        if isinstance(case, FunctionCase):
            request = json.dumps({"entry": spec.entry_point, "args": case.args, "kwargs": case.kwargs})
            result = await box.exec(argv, stdin=request, timeout=min(per_case, left))
            results.append(judge_function(result, case, nonce, spec.compare))
        else:
            result = await box.exec(argv, stdin=case.input, timeout=min(per_case, left))
            results.append(judge_stdio(result, case))
    return results


async def probe_readable(box: Sandbox, paths: list[str], python: str = "python3") -> dict[str, Any]:
    """Which of `paths` submitted code could read in `box`: `{"landlock": abi, "readable": [...]}`."""
    result = await box.exec([python, "-c", harness_source(), "probe", "-"], stdin=json.dumps(paths), timeout=30)
    try:
        return dict(loads_bounded(result.stdout))
    except (ValueError, TypeError):
        return {"landlock": 0, "readable": list(paths), "error": _short(result.stderr or str(result.error))}


def _block(text: str) -> str:
    """Multi-line text indented under its label; `(nothing)` for empty text."""
    text = _short(text.rstrip("\n"))
    return "\n".join("    " + line for line in text.split("\n")) if text else "    (nothing)"


def feedback(spec: TaskSpec, results: list[CaseResult]) -> str:
    """The tool message for a run on the visible examples: what passed, and for each failure why."""
    passed = sum(r.passed for r in results)
    lines = [f"Ran your code on {len(results)} example(s): {passed} passed, {len(results) - passed} failed."]
    shown_stderr = None
    for i, (case, r) in enumerate(zip(spec.examples, results), start=1):
        if r.passed:
            lines.append(f"Example {i}: passed.")
            continue
        if isinstance(case, FunctionCase):
            lines.append(f"Example {i}: {r.status.upper()}. Call: {_short(call_text(spec.entry_point or '', case))}")
            lines.append(f"  expected: {_short(repr(case.expected))}")
            if r.got is not None:
                lines.append(f"  got: {r.got}")
        else:
            lines += [f"Example {i}: {r.status.upper()}.", "  input:", _block(case.input)]
            lines += ["  expected output:", _block(case.output)]
            if r.got is not None:
                lines += ["  got:", _block(r.got)]
        if r.error:
            lines.append(f"  error: {r.error}")
        if r.stderr.strip():
            same_as_before = r.stderr == shown_stderr
            lines += ["  stderr: same as above" if same_as_before else "  stderr:\n" + _block(r.stderr)]
            shown_stderr = r.stderr
    return "\n".join(lines)
