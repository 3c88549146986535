"""The SWE-v0 task factory: real projects, injected bugs that their own tests catch, SWE-bench-style rows.

    python -m rlgym_envs.swe.factory build --projects boltons,toolz --per-project 19 --seed 0 --out tasks.jsonl
    make swe-build        # the shipped set: every project of `sources.PROJECTS`

For each project (an sdist pinned by version and sha256, `sources.py`):
1. run its suite twice with the pinned pytest; the tests that pass both times are the stable ones;
   a third run records which tests call which functions (a profile hook), and which functions
   run outside any test (at import: a bug there could break any test, so they are not mutated);
2. walk its functions in a seeded order and mutate one site of one function (`mutations.py`);
3. run the stable tests that call the function (the others never execute the changed code, so
   they keep passing); keep the mutant if 1-20 of them fail; those are
   FAIL_TO_PASS, and PASS_TO_PASS is the other stable tests of the same test files (as SWE-bench
   runs the test files a fix touches);
4. keep it only if each FAIL_TO_PASS test has a canary that fails under the gold fix;
5. write the problem statement from the failing tests' assertion output and the function's
   docstring (the traceback frames of the library, which would show the changed line, are dropped).
The gold patch is the inverse of the mutation. Test runs use the same in-box harness as grading
(`box_pytest.py`), on the host: the build runs the projects' own code and mutants of it.
The output is deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlgym_envs.swe.grading import canary_test_files, parse_log_pytest
from rlgym_envs.swe.harness import BOX_SOURCE
from rlgym_envs.swe.instances import is_test_path, read_repo
from rlgym_envs.swe.mutations import Mutation, mutations
from rlgym_envs.swe.patches import make_patch
from rlgym_envs.swe.sources import PROJECTS, Project, fetch_sdist
from rlgym_envs.swe.toolchain import ensure_pytest

logger = logging.getLogger(__name__)

MIN_FAILING, MAX_FAILING = 1, 20
TRIES_PER_FUNCTION = 3
SUITE_TIMEOUT_S = 300.0
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_FRAME = re.compile(r"^(\S+\.py):(\d+): in \S+")


class _HostRunner:
    """Runs `box_pytest.py` on the host against one working copy of a project."""

    def __init__(self, project: Project, files: Mapping[str, str], root: Path) -> None:
        self.project, self.root = project, root
        self.pytest_dir = str(ensure_pytest())
        self._run({"fresh": True, "files": dict(files)}, [])

    def _run(self, request: dict[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        payload = {
            "root": str(self.root),
            "pytest_dir": self.pytest_dir,
            "python_path": list(self.project.python_path),
            "timeout": SUITE_TIMEOUT_S,
            "test_timeout": 10,  # a mutant that loops fails its test after 10 s
            "log_chars": 10_000_000,
            "runs": runs,
            **request,
        }
        proc = subprocess.run(
            [sys.executable, "-I", "-B", "-c", BOX_SOURCE], input=json.dumps(payload), capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"the test harness failed: {proc.stderr[-2000:]}")
        result: list[dict[str, Any]] = json.loads(proc.stdout)["runs"]
        return result

    def run(self, files: Mapping[str, str], args: Sequence[str]) -> dict[str, Any]:
        """Writes `files` over the working copy, runs pytest once; the run's log, exit code and statuses."""
        (run,) = self._run({"files": dict(files)}, [{"args": list(args)}])
        run["statuses"] = parse_log_pytest(run["log"])
        return run


def _suite_args(project: Project) -> list[str]:
    return ["-q", "--tb=no", *project.tests, *(f"--deselect={t}" for t in project.skip)]


# A pytest run (on the host, trusted code) that records, per test, the functions of the project it
# calls: "relative path:first line" of each code object, from a profile hook around each test.
_COVERAGE = r"""
import json, os, sys
cfg = json.loads(sys.argv.pop(1))
sys.path[:0] = cfg["path"]
import pytest
root = cfg["root"] + os.sep
calls, current = {}, []

def profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_filename.startswith(root):
            calls.setdefault(current[0] if current else "", set()).add(
                "%s:%d" % (code.co_filename[len(root):], code.co_firstlineno))

class Recorder:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        current.append(item.nodeid)
        yield
        current.pop()

sys.setprofile(profile)
import threading
threading.setprofile(profile)
code = pytest.main(sys.argv[1:], plugins=[Recorder()])
sys.setprofile(None)
with open(cfg["out"], "w") as f:
    json.dump({k: sorted(v) for k, v in calls.items()}, f)
sys.exit(code)
"""


def _coverage(runner: _HostRunner, project: Project) -> dict[str, list[str]]:
    """Test id (or "" for code run outside tests) -> "path:first line" of the functions it called."""
    out = runner.root.parent / "coverage.json"
    path = [runner.pytest_dir, str(runner.root), *(str(runner.root / p) for p in project.python_path)]
    cfg = json.dumps({"path": path, "root": str(runner.root), "out": str(out)})
    ini = runner.root.parent / "pytest.ini"
    ini.write_text("[pytest]\n")
    args = ["-c", str(ini), "--rootdir", str(runner.root), "-p", "no:cacheprovider", *_suite_args(project)]
    env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "LANG": "C.UTF-8"}
    subprocess.run(
        [sys.executable, "-s", "-P", "-B", "-c", _COVERAGE, cfg, *args],
        cwd=runner.root,
        capture_output=True,
        timeout=1800,
        env=env,
    )
    result: dict[str, list[str]] = json.loads(out.read_text())
    return result


def _stable_tests(runner: _HostRunner, project: Project) -> list[str]:
    first, second = (runner.run({}, _suite_args(project)) for _ in range(2))
    passing = [
        t
        for t, s in first["statuses"].items()
        if s == "PASSED" and second["statuses"].get(t) == "PASSED" and not re.search(r"\s", t)
    ]
    return sorted(passing)


def _failure_excerpts(log: str) -> dict[str, str]:
    """Per failing test of a `--tb=short` log: the test's own code lines and the `E` lines.

    Frames outside test files are left out: they would show the changed line of the library.
    """
    excerpts: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_test = False
    for line in log.splitlines():
        if line.startswith("=") and "short test summary" in line:
            break
        header = re.match(r"^_{3,} (.+?) _{3,}$", line)
        if header:
            current = excerpts.setdefault(header.group(1), [])
            in_test = True
            continue
        if current is None:
            continue
        frame = _FRAME.match(line)
        if frame:
            in_test = is_test_path(frame.group(1))
            continue
        if line.startswith("E ") or (in_test and line.startswith("    ") and line.strip()):
            current.append(line)
    return {k: _ADDRESS.sub("0x…", "\n".join(v[:14])) for k, v in excerpts.items() if v}


def problem_statement(project: Project, module: str, mutation: Mutation, failing: Sequence[str], log: str) -> str:
    """An issue a user could have filed: what fails, observed against expected, and what the docs promise."""
    excerpts = _failure_excerpts(log)
    name = f"{module}.{mutation.function}"
    lines = [f"`{name}` does not behave as documented in {project.name} {project.version}."]
    if mutation.docstring:
        summary = mutation.docstring.strip().split("\n\n")[0].strip()
        lines += ["", "Its documentation says:", "", *[f"> {row}" for row in summary.splitlines()]]
    lines += ["", f"With the repository as it is, {len(failing)} test(s) of the project's own suite fail:"]
    for test_id in failing[:4]:
        short = test_id.split("::", 1)[1].replace("::", ".")
        excerpt = excerpts.get(short) or excerpts.get(short.rsplit(".", 1)[-1]) or ""
        lines += ["", f"`{test_id}`"]
        if excerpt:
            lines += ["```", excerpt, "```"]
    if len(failing) > 4:
        lines += ["", f"... and {len(failing) - 4} more."]
    lines += ["", "Expected: these tests pass, and the rest of the suite keeps passing."]
    return "\n".join(lines)


def _module_name(path: str, project: Project) -> str:
    parts = path[:-3].split("/")
    for prefix in project.python_path:
        if parts[: len(prefix.split("/"))] == prefix.split("/"):
            parts = parts[len(prefix.split("/")) :]
    return ".".join(p for p in parts if p != "__init__") or parts[-1]


def build_project(project: Project, per_project: int, seed: int, max_tries: int = 400) -> list[dict[str, Any]]:
    """Up to `per_project` instance rows for one project (see the module docstring)."""
    root_dir = fetch_sdist(project.requirement, project.sha256) / project.root
    clean = read_repo(root_dir)
    tests = {p: t for p, t in clean.items() if is_test_path(p)}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix=f"rlgym-swe-build-{project.name}-") as tmp:
        runner = _HostRunner(project, clean, Path(tmp, "repo"))
        stable = _stable_tests(runner, project)
        logger.info("%s: %d stable passing tests", project.name, len(stable))
        stable_set = set(stable)
        package = project.package
        sources = [
            p
            for p in sorted(clean)
            if p.endswith(".py") and not is_test_path(p) and (p == package or p.startswith(package + "/"))
        ]
        coverage = _coverage(runner, project)
        at_import = set(coverage.pop("", []))
        callers: dict[str, set[str]] = {}
        for test_id, called in coverage.items():
            if test_id in stable_set:
                for key in called:
                    callers.setdefault(key, set()).add(test_id)
        groups: dict[tuple[str, str], list[Mutation]] = {}
        covering: dict[tuple[str, str], list[str]] = {}
        for path in sources:
            for m in mutations(clean[path]):
                # Code objects of the function and its nested functions: "path:first line" in its span.
                keys = [f"{path}:{n}" for n in range(m.lines[0], m.lines[1] + 1)]
                called_by = set().union(*(callers.get(k, set()) for k in keys))
                if not called_by or any(k in at_import for k in keys):
                    continue  # never called by a test, or run at import (where a bug may break anything)
                groups.setdefault((path, m.function), []).append(m)
                covering[(path, m.function)] = sorted(called_by)
        order = sorted(groups)
        rng = random.Random(f"{seed}:{project.name}")
        rng.shuffle(order)
        tries = 0
        pending: dict[str, str] = {}  # files to put back (clean source, real tests) before the next run

        def run(files: Mapping[str, str], args: Sequence[str]) -> dict[str, Any]:
            result = runner.run({**pending, **files}, args)
            pending.clear()
            return result

        for path, function in order:
            if len(rows) >= per_project or tries >= max_tries:
                break
            candidates = list(groups[(path, function)])
            rng.shuffle(candidates)
            for m in candidates[:TRIES_PER_FUNCTION]:
                tries += 1
                buggy = m.apply(clean[path])
                # Only the tests that call the function can fail. --maxfail: more than MAX_FAILING is out.
                ids = covering[(path, function)]
                args = ["-q", "--tb=no", f"--maxfail={MAX_FAILING + 1}", *ids]
                statuses = run({path: buggy}, args)["statuses"]
                pending[path] = clean[path]
                failing = [t for t in ids if statuses.get(t) != "PASSED"]
                logger.debug("%s: %s (%s) fails %d", project.name, m.function, m.kind, len(failing))
                if not MIN_FAILING <= len(failing) <= MAX_FAILING:
                    continue
                files_of_failing = {t.split("::")[0] for t in failing}
                p2p = [t for t in stable if t not in failing and t.split("::")[0] in files_of_failing]
                canaries, canary_ids = canary_test_files(tests, failing)
                if sorted(canary_ids) != sorted(failing):
                    continue
                graded = ["-q", "--tb=no", *failing, *p2p]
                gold = run(canaries, graded)["statuses"]  # the clean source is pending
                pending.update({p: tests[p] for p in canaries})
                if any(gold.get(t) == "PASSED" for t in failing) or any(gold.get(t) != "PASSED" for t in p2p):
                    continue
                detail = run({path: buggy}, ["-q", "--tb=short", *failing])
                pending[path] = clean[path]
                assert stable_set.issuperset(failing)
                rows.append(
                    {
                        "instance_id": f"{project.name}-{len(rows):03d}",
                        "repo": project.repo,
                        "version": project.version,
                        "problem_statement": problem_statement(
                            project, _module_name(path, project), m, failing, detail["log"]
                        ),
                        "patch": make_patch({path: buggy}, {path: clean[path]}),
                        "bug_patch": make_patch({path: clean[path]}, {path: buggy}),
                        "test_patch": "",
                        "FAIL_TO_PASS": failing,
                        "PASS_TO_PASS": p2p,
                        "source": {"requirement": project.requirement, "sha256": project.sha256, "root": project.root},
                        "python_path": list(project.python_path),
                        "license": project.license,
                        "mutation": {"file": path, "function": m.function, "kind": m.kind, "line": m.line},
                    }
                )
                logger.info("%s: kept %s (%s, %d failing)", project.name, m.function, m.kind, len(failing))
                break
    return rows


def parse_per_project(text: str) -> tuple[int, dict[str, int]]:
    """`"19"` or `"19,boltons=26,toolz=26"`: the default count and the per-project overrides."""
    default, overrides = 0, {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, count = item.rpartition("=")
        if not count.isdigit():
            raise SystemExit(f"--per-project: {item!r} is not N or project=N")
        if name:
            overrides[name] = int(count)
        else:
            default = int(count)
    return default, overrides


def build(
    projects: Sequence[str], per_project: int, seed: int = 0, overrides: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    """Rows for every named project, in the given order (`overrides`: a count per project)."""
    unknown = [p for p in [*projects, *(overrides or {})] if p not in PROJECTS]
    if unknown:
        raise SystemExit(f"unknown project(s) {unknown}; known: {sorted(PROJECTS)}")
    rows: list[dict[str, Any]] = []
    for name in projects:
        rows += build_project(PROJECTS[name], (overrides or {}).get(name, per_project), seed)
    return rows


def licenses_text(projects: Sequence[str]) -> str:
    """The license notice written beside the instances."""
    lines = [
        "# Licenses of the projects behind these instances",
        "",
        "Each instance is a pinned sdist from PyPI with one injected bug; the code is its authors'.",
        "",
        "| project | version | license | upstream |",
        "|---|---|---|---|",
    ]
    for name in projects:
        p = PROJECTS[name]
        lines.append(f"| {p.name} | {p.version} | {p.license} | https://github.com/{p.repo} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlgym_envs.swe.factory", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build SWE-bench-style instances from real projects")
    b.add_argument("--projects", default=",".join(PROJECTS), help=f"comma-separated, from {sorted(PROJECTS)}")
    b.add_argument("--per-project", default="19", help="instances per project: N, or N,project=M,... for exceptions")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--out", required=True, help="the JSONL file to write; LICENSES.md goes beside it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")  # a script entry point
    projects = [p.strip() for p in args.projects.split(",") if p.strip()]
    start = time.monotonic()
    per_project, overrides = parse_per_project(args.per_project)
    rows = build(projects, per_project, args.seed, overrides)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    out.with_name("LICENSES.md").write_text(licenses_text(projects), encoding="utf-8")
    per = {p: sum(r["instance_id"].startswith(p + "-") for r in rows) for p in projects}
    logger.info("wrote %d instances to %s in %.0fs: %s", len(rows), out, time.monotonic() - start, per)
    return 0


if __name__ == "__main__":
    sys.exit(main())
