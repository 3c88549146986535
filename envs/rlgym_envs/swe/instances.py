"""SWE instances: a repository with a bug, the tests that judge a fix, and the gold fix.

    instances = builtin_instances()          # the shipped ones (see `catalog.py`), built from `repos/`
    inst = instances[0]
    inst.files          # the buggy repository as the agent starts with it: {path: text}
    inst.test_files     # fresh test files written over the agent's tree for grading
    inst.fail_to_pass   # test ids that fail on the buggy tree and must pass after the fix
    inst.pass_to_pass   # test ids that pass before and must keep passing

Repositories are held in memory as `{relative posix path: text}`; the env copies them into a sandbox.
"""

from __future__ import annotations

import ast
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from rlgym_envs import safe_ast
from rlgym_envs.swe.catalog import BUGS, Bug
from rlgym_envs.swe.patches import make_patch
from rlgym_llm.core.errors import ConfigError

REPOS_DIR = Path(__file__).with_name("repos")
TEST_DIRS = ("tests", "test", "testing")
_SKIP_DIRS = {".git", "__pycache__", ".tox", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache"}
_MAX_FILE_BYTES = 1024 * 1024
_MAX_REPO_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Instance:
    """One task of `rlgym/SWE-v0`. Everything but `id`, `repo`, `problem_statement` and `files` is ground truth.

    Args:
        id: a stable id, e.g. "lrucache-2".
        repo: the repository's name.
        problem_statement: the issue text the agent is given.
        files: the repository the agent starts from.
        test_files: test files written, fresh, over the agent's tree before grading (the original
            tests plus any hidden ones); the agent's own versions of them never count.
        fail_to_pass: tests the fix must make pass.
        pass_to_pass: tests that must keep passing.
        gold_files: the files the reference fix changes, in their fixed form (empty if unknown).
        image: the docker image to run the instance in (None: the backend's default).
        python_path: repository folders put on `sys.path` besides its root (e.g. `src` layouts).
        license: the repository's license (SPDX id), for instances built from real projects.
        split: the content split the data assigns (`train`, `val` or `test`); None: the env splits by
            content (`rlgym_envs.swe.splits`).
    """

    id: str
    repo: str
    problem_statement: str
    files: Mapping[str, str]
    test_files: Mapping[str, str]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    gold_files: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    python_path: tuple[str, ...] = ()
    license: str | None = None
    split: str | None = None

    @property
    def tests(self) -> tuple[str, ...]:
        """All graded tests: FAIL_TO_PASS first, then PASS_TO_PASS (the order of `signals.tests.vector`)."""
        return self.fail_to_pass + self.pass_to_pass

    @property
    def gold_patch(self) -> str:
        """The reference fix as a unified diff."""
        return make_patch({p: self.files[p] for p in self.gold_files if p in self.files}, self.gold_files)


def is_test_path(path: str) -> bool:
    """Whether a repository path belongs to the test suite (graded from fresh copies)."""
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    in_test_dir = any(p in TEST_DIRS for p in parts[:-1])
    return in_test_dir or name == "conftest.py" or (name.endswith(".py") and name.startswith("test_"))


def read_repo(root: str | os.PathLike[str]) -> dict[str, str]:
    """The text files of a repository directory as `{posix path: text}` (VCS dirs, caches, binaries skipped).

    Raises:
        ConfigError: the directory is missing or holds more than 16 MiB of text.
    """
    base = Path(root)
    if not base.is_dir():
        raise ConfigError([f"repository directory {str(base)!r} does not exist"])
    files, total = {}, 0
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = Path(dirpath, name)
            # Regular files only: a FIFO or device would block the read; a symlink could point outside.
            if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_FILE_BYTES:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue  # binary or unreadable: not something an edit tool can work on
            if "\x00" in text:
                continue
            total += len(text)
            if total > _MAX_REPO_BYTES:
                raise ConfigError([f"repository {str(base)!r} holds more than 16 MiB of text; use a smaller one"])
            files[path.relative_to(base).as_posix()] = text
    return files


def discover_test_ids(files: Mapping[str, str]) -> list[str]:
    """Test ids found statically, as pytest names them: unittest and plain test classes, test functions."""
    ids = []
    for path in sorted(files):
        name = PurePosixPath(path).name
        if not (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))):
            continue
        try:
            tree = safe_ast.parse(files[path])
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                ids.append(f"{path}::{node.name}")
            elif isinstance(node, ast.ClassDef) and (node.name.startswith("Test") or _is_testcase(node)):
                methods = sorted(
                    n.name for n in node.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                )
                ids += [f"{path}::{node.name}::{m}" for m in methods]
    return ids


def _is_testcase(node: ast.ClassDef) -> bool:
    return any(ast.unparse(base).endswith("TestCase") for base in node.bases)


def build_instance(bug: Bug, repos_dir: Path = REPOS_DIR) -> Instance:
    """Inject `bug` into its clean repository and derive the test lists and the gold fix."""
    clean = read_repo(repos_dir / bug.repo)
    buggy = dict(clean)
    for path, correct, wrong in bug.edits:
        count = buggy.get(path, "").count(correct)
        if count != 1:
            raise ConfigError([f"instance {bug.id}: {correct!r} occurs {count} times in {path}, expected once"])
        buggy[path] = buggy[path].replace(correct, wrong, 1)
    all_tests = discover_test_ids(clean)
    missing = [t for t in bug.fail_to_pass if t not in all_tests]
    if missing:
        raise ConfigError([f"instance {bug.id}: FAIL_TO_PASS test {t!r} does not exist" for t in missing])
    changed = {path for path, _, _ in bug.edits}
    return Instance(
        id=bug.id,
        repo=bug.repo,
        problem_statement=bug.issue,
        files=buggy,
        test_files={p: t for p, t in clean.items() if is_test_path(p)},
        fail_to_pass=tuple(bug.fail_to_pass),
        pass_to_pass=tuple(t for t in all_tests if t not in bug.fail_to_pass),
        gold_files={p: clean[p] for p in sorted(changed)},
    )


@functools.cache
def builtin_instances() -> tuple[Instance, ...]:
    """The shipped instances, in catalog order."""
    return tuple(build_instance(bug) for bug in BUGS)


def hide_fail_to_pass(inst: Instance) -> Instance:
    """The same instance with its FAIL_TO_PASS tests cut out of the agent's files (SWE-bench style).

    Grading still runs them from `test_files`; the agent only has the issue text to go on. A class
    left without a body gets `pass`.
    """
    files = dict(inst.files)
    by_file: dict[str, list[list[str]]] = {}
    for test_id in inst.fail_to_pass:
        path, *names = test_id.split("::")
        by_file.setdefault(path, []).append(names)
    for path, targets in by_file.items():
        if path not in files:
            continue
        lines = files[path].splitlines(keepends=True)
        cut: list[tuple[int, int]] = []  # line spans of the tests to remove
        tree = safe_ast.parse(files[path])
        for names in targets:
            scope: list[ast.stmt] = tree.body
            node: ast.stmt | None = None
            for name in names:
                node = next((n for n in scope if getattr(n, "name", None) == name), None)
                if node is None:
                    break
                scope = getattr(node, "body", [])
            if node is None or node.end_lineno is None:
                continue
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            cut.append((first, node.end_lineno))
        for first, last in sorted(cut, reverse=True):
            lines[first - 1 : last] = []
            while (
                first - 1 < len(lines) and not lines[first - 1].strip() and (first < 2 or not lines[first - 2].strip())
            ):
                del lines[first - 1]  # no double blank line where the test was
        text = "".join(lines)
        try:
            safe_ast.parse(text)
        except SyntaxError:  # a class lost its only test: give it a body
            text = _fill_empty_classes(text)
        files[path] = text
    return replace(inst, files=files)


def _fill_empty_classes(text: str) -> str:
    lines = text.splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        if line.lstrip().startswith("class ") and line.rstrip().endswith(":"):
            rest = [text for text in lines[i + 1 :] if text.strip()]
            indent = len(line) - len(line.lstrip())
            if not rest or len(rest[0]) - len(rest[0].lstrip()) <= indent:
                out.append(" " * (indent + 4) + "pass\n")
    return "".join(out)
