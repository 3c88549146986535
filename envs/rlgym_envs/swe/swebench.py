"""Load SWE-bench-style instances from JSONL, for `SWEEnv(dataset="tasks.jsonl", backend="docker")`.

One JSON object per line:

    {"instance_id": "mylib-42",
     "repo_dir": "repos/mylib",              # the repository at the buggy commit (relative to the file)
     "problem_statement": "Parsing fails when ...",
     "FAIL_TO_PASS": ["tests/test_parse.py::TestParse::test_unicode"],
     "PASS_TO_PASS": ["tests/test_parse.py::TestParse::test_ascii"],
     "image": "rlgym-sandbox:py3",           # optional: docker image to run this instance in
     "test_patch": "diff --git ...",         # optional: hidden tests, applied only for grading
     "patch": "diff --git ...",              # optional: the gold fix (for oracles and checks)
     "split": "train"}                       # optional: train, val or test (on every row, or on none)

Rows the task factory builds (`rlgym_envs.swe.factory`) carry `source` instead of a directory: a
pinned sdist (`{"requirement": "toolz==1.0.0", "sha256": ..., "root": "toolz-1.0.0"}`, fetched and
cached on first use) and `bug_patch` (the injected bug), plus `python_path` and `license`.
`repo` is accepted in place of `repo_dir` when it names a directory. `FAIL_TO_PASS`/`PASS_TO_PASS`
may also be JSON-encoded strings, as in the SWE-bench datasets. Test ids are pytest node ids;
grading runs real pytest.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rlgym_envs.swe.instances import Instance, is_test_path, read_repo
from rlgym_envs.swe.patches import PatchError, apply_patch, make_patch
from rlgym_envs.swe.sources import fetch_sdist
from rlgym_envs.swe.toolchain import ToolchainError
from rlgym_llm.core.errors import ConfigError, DataFileError
from rlgym_llm.core.jsonl import read_jsonl
from rlgym_llm.core.splits import SPLITS


def _test_list(row: Mapping[str, Any], key: str, where: str, problems: list[str]) -> tuple[str, ...]:
    value = row.get(key, [])
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            problems.append(f"{where}: {key} is a string but not a JSON list")
            return ()
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        problems.append(f"{where}: {key} must be a list of test ids")
        return ()
    return tuple(value)


def instance_from_row(row: Mapping[str, Any], base: Path, where: str = "row") -> Instance:
    """Build one `Instance` from a SWE-bench-style row; paths are relative to `base`.

    Raises:
        ConfigError: listing every problem of the row.
    """
    problems: list[str] = []
    instance_id = row.get("instance_id")
    if not isinstance(instance_id, str) or not instance_id:
        problems.append(f"{where}: instance_id must be a non-empty string")
    statement = row.get("problem_statement")
    if not isinstance(statement, str) or not statement.strip():
        problems.append(f"{where}: problem_statement must be a non-empty string")
    source = row.get("source")
    repo_field = row.get("repo_dir", row.get("repo"))
    repo_dir = (base / repo_field) if isinstance(repo_field, str) and repo_field else None
    if source is not None:
        if not (
            isinstance(source, dict) and all(isinstance(source.get(k), str) for k in ("requirement", "sha256", "root"))
        ):
            problems.append(f"{where}: source must be {{'requirement': 'name==version', 'sha256': ..., 'root': ...}}")
    elif repo_dir is None or not repo_dir.is_dir():
        problems.append(f"{where}: repo_dir (or repo) must name a directory, got {repo_field!r}")
    elif _is_system_dir(repo_dir):
        problems.append(f"{where}: repo_dir {str(repo_dir)!r} is a system directory, not a repository")
        repo_dir = None
    python_path = row.get("python_path") or []
    if not isinstance(python_path, list) or not all(
        isinstance(p, str) and p and not p.startswith(("/", "..")) for p in python_path
    ):
        problems.append(f"{where}: python_path must be a list of relative folders")
    f2p = _test_list(row, "FAIL_TO_PASS", where, problems)
    p2p = _test_list(row, "PASS_TO_PASS", where, problems)
    if not f2p and not problems:
        problems.append(f"{where}: FAIL_TO_PASS is empty; an instance needs at least one failing test")
    image = row.get("image")
    if image is not None and (not isinstance(image, str) or not image):
        problems.append(f"{where}: image must be a docker image name")
    for key in ("test_patch", "patch", "bug_patch"):
        if row.get(key) is not None and not isinstance(row.get(key), str):
            problems.append(f"{where}: {key} must be a unified diff string")
    split = row.get("split")
    if split is not None and split not in SPLITS:
        problems.append(f"{where}: split must be one of {list(SPLITS)}, got {split!r}")
    if problems:
        raise ConfigError(problems)
    assert isinstance(instance_id, str) and isinstance(statement, str)
    if source is not None:
        files = dict(_sdist_files(source["requirement"], source["sha256"], source["root"]))
    else:
        assert repo_dir is not None
        files = read_repo(repo_dir)
        if not any(p.endswith(".py") and not is_test_path(p) for p in files):
            raise ConfigError(
                [f"{where}: repo_dir {str(repo_dir)!r} holds no Python source file; is it the repository?"]
            )
    test_files = {p: t for p, t in files.items() if is_test_path(p)}
    gold: dict[str, str] = {}
    try:
        if row.get("bug_patch"):  # built rows: the clean release plus the injected bug
            files = apply_patch(files, row["bug_patch"])
        if row.get("test_patch"):
            patched = apply_patch(files, row["test_patch"])
            test_files.update({p: t for p, t in patched.items() if files.get(p) != t})
        if row.get("patch"):
            fixed = apply_patch(files, row["patch"])
            gold = {p: t for p, t in fixed.items() if files.get(p) != t}
    except PatchError as e:
        raise ConfigError([f"{where}: {e}"]) from None
    missing = sorted({t.split("::")[0] for t in f2p + p2p} - set(files) - set(test_files))
    if missing and source is None:
        raise ConfigError(
            [f"{where}: the test files {missing[:5]} named by FAIL_TO_PASS/PASS_TO_PASS are not in {str(repo_dir)!r}"]
        )
    return Instance(
        id=instance_id,
        repo=str(row["repo"]).rsplit("/", 1)[-1] if source is not None else Path(str(repo_dir)).name,
        problem_statement=statement,
        files=files,
        test_files=test_files,
        fail_to_pass=f2p,
        pass_to_pass=p2p,
        gold_files=gold,
        image=image,
        python_path=tuple(python_path),
        license=row.get("license") if isinstance(row.get("license"), str) else None,
        split=split,
    )


# Virtual and system trees: never a user's repository, and reading them can block (FIFOs, /proc, /dev).
_SYSTEM_ROOTS = ("/proc", "/sys", "/dev", "/run", "/boot", "/etc", "/usr", "/bin", "/sbin", "/lib", "/var")


def _is_system_dir(path: Path) -> bool:
    resolved = path.resolve()
    return resolved == Path("/") or any(resolved == Path(r) or Path(r) in resolved.parents for r in _SYSTEM_ROOTS)


@functools.lru_cache(maxsize=16)
def _sdist_files(requirement: str, sha256: str, root: str) -> Mapping[str, str]:
    """The files of a pinned sdist (fetched and unpacked on first use, then read from the cache)."""
    try:
        folder = fetch_sdist(requirement, sha256)
    except ToolchainError as e:
        raise ConfigError([f"cannot fetch the sources of {requirement}: {e}"]) from None
    if not (folder / root).is_dir() or Path(root).is_absolute() or ".." in Path(root).parts:
        raise ConfigError([f"the sdist of {requirement} has no folder {root!r}"])
    return MappingProxyType(read_repo(folder / root))


def load_instances(path: str | Path) -> list[Instance]:
    """Every instance of a SWE-bench-style JSONL file (blank lines skipped).

    Raises:
        DataFileError: lines are not UTF-8 text, not JSON, or malformed rows (every problem listed at once).
        ConfigError: the file is missing or holds no instance.
    """
    source = Path(path)
    if not source.is_file():
        raise ConfigError([f"SWE dataset {str(source)!r} does not exist"])
    instances, problems, seen = [], [], set()
    for n, row in read_jsonl(source, problems=problems):  # lines that are not UTF-8 or JSON: in `problems`
        where = f"{source.name}:{n}"
        if not isinstance(row, dict):
            problems.append(f"{where}: each line must be a JSON object")
            continue
        try:
            inst = instance_from_row(row, source.parent, where)
        except ConfigError as e:
            problems += e.problems
            continue
        if inst.id in seen:
            problems.append(f"{where}: duplicate instance_id {inst.id!r}")
        seen.add(inst.id)
        instances.append(inst)
    if problems:
        raise DataFileError(problems)
    if not instances:
        raise ConfigError([f"SWE dataset {str(source)!r} has no instances"])
    return instances


def export_jsonl(instances: Sequence[Instance], out_dir: str | Path, image: str | None = None) -> Path:
    """Write instances in the SWE-bench-style format: one repo dir each (the buggy tree) and `tasks.jsonl`.

    Hidden tests (test files the agent's tree lacks or holds differently) go into `test_patch`, the
    gold fix into `patch`. `load_instances` reads the result back to equal instances (image aside).

    Returns:
        The path of the JSONL file.
    """
    out = Path(out_dir)
    rows = []
    for inst in instances:
        repo_dir = out / "repos" / inst.id
        for path, text in inst.files.items():
            (repo_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (repo_dir / path).write_text(text, encoding="utf-8")
        hidden = {p: t for p, t in inst.test_files.items() if inst.files.get(p) != t}
        row: dict[str, Any] = {
            "instance_id": inst.id,
            "repo_dir": f"repos/{inst.id}",
            "problem_statement": inst.problem_statement,
            "FAIL_TO_PASS": list(inst.fail_to_pass),
            "PASS_TO_PASS": list(inst.pass_to_pass),
        }
        if hidden:
            row["test_patch"] = make_patch({p: inst.files[p] for p in hidden if p in inst.files}, hidden)
        if inst.gold_files:
            row["patch"] = inst.gold_patch
        if image or inst.image:
            row["image"] = image or inst.image
        if inst.split is not None:
            row["split"] = inst.split
        rows.append(row)
    jsonl = out / "tasks.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return jsonl
