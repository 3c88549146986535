"""Content splits of a Code-v0 task file: which of `train`, `val`, `test` each task belongs to.

Two tasks are the same task when they share their problem statement (whitespace aside) or their hidden
tests (the same cases and comparison, or the same `check` code). Tasks linked that way form one group,
and a group lies in one split: the split of its content key (`rlgym_llm.core.splits.split_of`), the
smallest statement of the group. The assignment is made over the whole file, before `difficulty` and
`kinds` filter it, so a filter never moves a task to another split.

A file whose lines all carry `split` keeps its own assignment (no hashing); a file where only some do,
or where two lines of one group name different splits, is refused.

    splits = task_splits(load_specs("builtin"))   # [(split, key), ...], one per spec, in file order
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from rlgym_envs.code.tasks import TaskFileError, TaskSpec
from rlgym_llm.core.splits import split_of


def statement_key(spec: TaskSpec) -> str:
    """The task's problem statement with its whitespace collapsed: its content key when alone."""
    return " ".join(spec.prompt.split())


def hidden_key(spec: TaskSpec) -> str:
    """A digest of the hidden tests: tasks graded by the same tests are the same hidden task."""
    test = " ".join(spec.test.split()) if spec.test else None
    hidden = {"tests": [c.model_dump() for c in spec.tests], "compare": spec.compare, "test": test}
    return "hidden-tests:" + hashlib.sha256(json.dumps(hidden, sort_keys=True).encode()).hexdigest()


def groups(keys: Sequence[Sequence[str]]) -> list[int]:
    """The group of each item (the smallest index in it): items sharing any key are in one group."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, item_keys in enumerate(keys):
        for key in item_keys:
            a, b = root(owner.setdefault(key, i)), root(i)
            parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(keys))]


def task_splits(specs: Sequence[TaskSpec], where: str = "the task file") -> list[tuple[str, str]]:
    """The `(split, content key)` of each spec (see the module docstring).

    Raises:
        TaskFileError: some lines carry `split` and others do not, or one group names two splits.
    """
    group = groups([(statement_key(s), hidden_key(s)) for s in specs])
    members: dict[int, list[int]] = {}
    for i, g in enumerate(group):
        members.setdefault(g, []).append(i)
    key = {g: min(statement_key(specs[i]) for i in items) for g, items in members.items()}
    given = [s.split for s in specs]
    if all(s is None for s in given):
        return [(split_of(key[g]), key[g]) for g in group]
    if any(s is None for s in given):
        missing = [s.id for s in specs if s.split is None]
        raise TaskFileError(
            f"{where}: some lines carry `split` and {len(missing)} do not (e.g. {missing[:3]}); give every line "
            "its split (train, val or test), or none to split by content"
        )
    problems = []
    for items in members.values():
        named = {specs[i].split for i in items}
        if len(named) > 1:
            problems.append(
                f"{where}: the tasks {[specs[i].id for i in items]} share a statement or hidden tests "
                f"but name the splits {sorted(str(s) for s in named)}: put them in one split"
            )
    if problems:
        raise TaskFileError(problems)
    return [(str(s.split), key[g]) for s, g in zip(specs, group, strict=True)]
