"""Content splits of SWE instances: which of `train`, `val`, `test` each instance belongs to.

`split_by="instance"` (the default): two instances are the same task when they start from the same
buggy repository (the same non-test files: the same release with the same bug), share their gold fix
(the same diff), or share their issue text. Instances linked that way form one group, and a group lies
in one split: the split of its content key (`rlgym_llm.core.splits.split_of`), the smallest tree digest
of the group. An exported and reloaded instance (`swebench.export_jsonl`) keeps its split.

`split_by="repo"`: every instance of a repository (`Instance.repo`) lies in one split, so held-out
numbers are measured on code bases never trained on; worth it for data sets with many repositories
(the shipped tiers have five and six: see docs/swe_env.md).

A data set whose instances all carry `split` keeps its own assignment; one where only some do, or
where two instances of one group name different splits, is refused. The assignment is made over the
whole data set, before `instance_ids` filters it.

    pool = split_pool(builtin_instances(), "test")   # pool.instances; pool.split_of["lrucache-2"] == "train"
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from rlgym_envs.swe.instances import Instance, is_test_path
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import SPLITS, split_of

SPLIT_BY: tuple[str, ...] = ("instance", "repo")


def tree_key(inst: Instance) -> str:
    """A digest of the buggy repository the agent starts from: its non-test files."""
    h = hashlib.sha256()
    for path in sorted(p for p in inst.files if not is_test_path(p)):
        h.update(path.encode() + b"\0" + inst.files[path].encode() + b"\0")
    return "tree:" + h.hexdigest()


def instance_keys(inst: Instance, split_by: str = "instance") -> list[str]:
    """The keys that make two instances the same task; the first is the instance's content key."""
    primary = f"repo:{inst.repo}" if split_by == "repo" else tree_key(inst)
    keys = [primary, "issue:" + " ".join(inst.problem_statement.split())]
    if inst.gold_files:
        keys.append("fix:" + inst.gold_patch)
    return keys


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


def instance_splits(instances: Sequence[Instance], split_by: str = "instance") -> list[tuple[str, str]]:
    """The `(split, content key)` of each instance (see the module docstring).

    Raises:
        ConfigError: `split_by` is unknown, some instances carry `split` and others do not, or one
            group names two splits.
    """
    if split_by not in SPLIT_BY:
        raise ConfigError([f"split_by must be one of {list(SPLIT_BY)}, got {split_by!r}"])
    keys = [instance_keys(i, split_by) for i in instances]
    group = groups(keys)
    members: dict[int, list[int]] = {}
    for i, g in enumerate(group):
        members.setdefault(g, []).append(i)
    key = {g: min(keys[i][0] for i in items) for g, items in members.items()}
    given = [i.split for i in instances]
    if all(s is None for s in given):
        return [(split_of(key[g]), key[g]) for g in group]
    if any(s is None for s in given):
        missing = [i.id for i in instances if i.split is None]
        raise ConfigError(
            [
                f"some instances carry `split` and {len(missing)} do not (e.g. {missing[:3]}); give every "
                "instance its split (train, val or test), or none to split by content"
            ]
        )
    problems = []
    for items in members.values():
        named = {instances[i].split for i in items}
        if len(named) > 1:
            problems.append(
                f"the instances {[instances[i].id for i in items]} are the same task (same repository tree, fix "
                f"or issue{', or repository' if split_by == 'repo' else ''}) but name the splits "
                f"{sorted(str(s) for s in named)}: put them in one split"
            )
    if problems:
        raise ConfigError(problems)
    return [(str(i.split), key[g]) for i, g in zip(instances, group, strict=True)]


@dataclass(frozen=True)
class Pool:
    """The instances of one split, and where every instance of the data set belongs.

    Args:
        instances: the split's instances (those named by `instance_ids`, when given), in data-set order.
        split_of: every instance id of the data set -> its split.
        keys: every instance id of the data set -> its content key (`Task.key`).
    """

    instances: tuple[Instance, ...]
    split_of: dict[str, str]
    keys: dict[str, str]


def split_pool(
    instances: Sequence[Instance], split: str, split_by: str = "instance", instance_ids: Sequence[str] | None = None
) -> Pool:
    """The pool of `split`, assigned over the whole data set before `instance_ids` filters it.

    Raises:
        ConfigError: an id of `instance_ids` is unknown or in another split; the pool is empty; or
            `instance_splits` refuses the data set.
    """
    assigned = instance_splits(instances, split_by)
    split_of = {i.id: s for i, (s, _) in zip(instances, assigned, strict=True)}
    keys = {i.id: key for i, (_, key) in zip(instances, assigned, strict=True)}
    if instance_ids is not None:
        unknown = [i for i in instance_ids if i not in split_of]
        if unknown:
            raise ConfigError([f"unknown instance id {i!r}; known: {sorted(split_of)}" for i in unknown])
        elsewhere = [i for i in instance_ids if split_of[i] != split]
        if elsewhere:
            raise ConfigError(
                [
                    f"instance {i!r} is in the {split_of[i]!r} split, not in {split!r}: make the env with "
                    f"split={split_of[i]!r}"
                    for i in elsewhere
                ]
            )
    wanted = set(instance_ids) if instance_ids is not None else set(split_of)
    pool = tuple(i for i in instances if split_of[i.id] == split and i.id in wanted)
    if not pool:
        counts = {s: sum(p == s for p, _ in assigned) for s in SPLITS}
        raise ConfigError(
            [
                f"no instance of the data set is in the {split!r} split (split by {split_by}: {counts}); "
                "choose another split, or give every instance its `split`"
            ]
        )
    return Pool(pool, split_of, keys)
