"""Per-box cgroups for the local backend: one memory and process budget for everything a box runs.

`BoxCgroup.create` makes a cgroup for the box: with cgroup v2, under the caller's own cgroup where
that delegates the memory controller (or beside it, under a parent that does: a cgroup holding
processes cannot hand controllers down); else in the v1 memory (and pids) hierarchies. It sets

- memory: `Limits.memory_mb` for all of the box's processes together, tmpfs files they wrote and
  SysV shared memory included (pages are charged to the cgroup of the process that touched them);
  no swap (`memory.swap.max = 0`; v1: `memsw`, where the kernel has swap accounting);
- pids (v2, where delegated): `Limits.max_procs` tasks at once. With v1 and without the controller,
  RLIMIT_NPROC on the box's own uid bounds them the same way, per box (a second v1 hierarchy would
  cost a second cgroup migration, milliseconds, on every execution).

The worker moves each execution's supervisor (and each file helper) into it before the box code
runs; the kernel's OOM killer then acts inside the box only, and the worker reads its `oom_kill`
counter (`oom_file`) after each execution.

v1's weaker guarantee: without swap accounting (`memory.memsw.*` absent) a box may also use swap
up to the host's; kernel memory (socket buffers, page tables) is charged but reclaim and OOM are
less precise than v2's. Without either (no root, no writable hierarchy) the box falls back to the
per-process rlimits (RLIMIT_AS, RLIMIT_NPROC per uid); `LocalSandbox.isolation["cgroup"]` says which.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

PREFIX = "rlgym-box-"


def _mounts() -> list[tuple[str, str, set[str], str]]:
    """(mount point, fstype, super options, root within the hierarchy) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if tail and tail[0] in ("cgroup", "cgroup2"):
                options = set(tail[2].split(",")) if len(tail) > 2 else set()
                found.append((fields[4], tail[0], options, fields[3]))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _under(mount: str, root: str, path: str) -> str:
    """The directory of cgroup `path` in a hierarchy mounted at `mount` (whose root is `root`)."""
    rel = os.path.relpath(path, root) if path.startswith(root) else "."
    return os.path.normpath(os.path.join(mount, rel))


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@dataclass
class BoxCgroup:
    """The cgroup(s) of one box. `procs` are the `cgroup.procs` files a process writes "0" to, to join."""

    version: int
    dirs: list[str]
    procs: list[str] = field(default_factory=list)
    oom_file: str = ""
    swap_limited: bool = True
    pids_limited: bool = True

    @classmethod
    def create(cls, name: str, memory_bytes: int, max_tasks: int) -> BoxCgroup | None:
        """Makes the box's cgroup(s), v2 first, then v1; None (logged) when the host allows neither."""
        remove_stale()
        for make in (cls._create_v2, cls._create_v1):
            try:
                made = make(name, memory_bytes, max_tasks)
            except OSError as exc:
                logger.debug("cgroup setup (%s) failed: %r", make.__name__, exc)
                continue
            if made is not None:
                return made
        return None

    @classmethod
    def _create_v2(cls, name: str, memory_bytes: int, max_tasks: int) -> BoxCgroup | None:
        mount = next((m for m in _mounts() if m[1] == "cgroup2"), None)
        if mount is None:
            return None
        own = _under(mount[0], mount[3], _own_paths().get("", "/"))
        parent = cls._v2_parent(own)
        if parent is None:
            return None
        path = os.path.join(parent, name)
        os.mkdir(path)
        box = cls(2, [path], [os.path.join(path, "cgroup.procs")], os.path.join(path, "memory.events"))
        try:
            _write(os.path.join(path, "memory.max"), str(memory_bytes))
            if os.path.exists(os.path.join(path, "memory.swap.max")):
                _write(os.path.join(path, "memory.swap.max"), "0")
            box.pids_limited = os.path.exists(os.path.join(path, "pids.max"))
            if box.pids_limited:
                _write(os.path.join(path, "pids.max"), str(max_tasks))
        except OSError:
            box.remove()
            raise
        return box

    @staticmethod
    def _v2_parent(own: str) -> str | None:
        """Where box cgroups can get the memory controller: under our own cgroup when it delegates it
        (or can: it holds no process), else beside it, under a parent that already does."""

        def enabled(path: str) -> set[str]:
            with open(os.path.join(path, "cgroup.subtree_control")) as f:
                return set(f.read().split())

        def available(path: str) -> set[str]:
            with open(os.path.join(path, "cgroup.controllers")) as f:
                return set(f.read().split())

        wanted = {"memory", "pids"} & available(own) if os.path.isdir(own) else set()
        if "memory" in wanted:
            if "memory" in enabled(own):
                return own
            try:  # EBUSY where our cgroup holds processes (the "no internal processes" rule)
                _write(os.path.join(own, "cgroup.subtree_control"), " ".join(f"+{c}" for c in sorted(wanted)))
                return own
            except OSError:
                pass
        parent = os.path.dirname(own)
        if own != parent and os.path.isdir(parent) and "memory" in enabled(parent):
            return parent  # a sibling: the box's memory then counts against our parent, not our own cgroup
        return None

    @classmethod
    def _create_v1(cls, name: str, memory_bytes: int, max_tasks: int) -> BoxCgroup | None:
        # Memory only: each v1 hierarchy costs a migration per execution (milliseconds: the kernel
        # waits for an RCU grace period), and RLIMIT_NPROC on the box's own uid already bounds its
        # processes per box, as pids.max would.
        own = _own_paths()
        mount = next((m for m in _mounts() if m[1] == "cgroup" and "memory" in m[2]), None)
        if mount is None:
            return None
        parent = _under(mount[0], mount[3], own.get("memory", "/"))
        memory = os.path.join(parent if os.path.isdir(parent) else mount[0], name)
        os.mkdir(memory)
        box = cls(1, [memory], [os.path.join(memory, "cgroup.procs")], pids_limited=False)
        try:
            _write(os.path.join(memory, "memory.limit_in_bytes"), str(memory_bytes))
            memsw = os.path.join(memory, "memory.memsw.limit_in_bytes")
            box.swap_limited = os.path.exists(memsw)
            if box.swap_limited:
                _write(memsw, str(memory_bytes))
            box.oom_file = os.path.join(memory, "memory.oom_control")
        except OSError:
            box.remove()
            raise
        return box

    def remove(self) -> None:
        """Removes the cgroup dirs (they must be empty of processes: the box's worker has exited)."""
        for path in self.dirs:
            try:
                os.rmdir(path)
            except FileNotFoundError:  # already gone (a host that reaps empty cgroups): nothing to do
                pass
            except OSError as exc:  # still busy: logged, and `remove_stale` retries at the next start
                logger.warning("could not remove the sandbox cgroup %s: %r", path, exc)

    def describe(self) -> dict:
        """What `LocalSandbox.isolation["cgroup"]` reports."""
        return {
            "version": self.version,
            "dirs": list(self.dirs),
            "swap_limited": self.swap_limited,
            "pids_limited": self.pids_limited,
        }


def remove_stale() -> None:
    """Removes empty box cgroups whose worker died without cleaning up (their names hold its pid)."""
    own = _own_paths()
    for mount, fstype, options, root in _mounts():
        if fstype == "cgroup" and not options & {"memory", "pids"}:
            continue
        key = "" if fstype == "cgroup2" else ("memory" if "memory" in options else "pids")
        ours = _under(mount, root, own.get(key, "/"))
        for parent in {ours, os.path.dirname(ours), mount}:  # v2 boxes may live beside our cgroup
            with contextlib.suppress(OSError):
                for entry in os.listdir(parent):
                    if entry.startswith(PREFIX) and not _alive(entry[len(PREFIX) :]):
                        with contextlib.suppress(OSError):
                            os.rmdir(os.path.join(parent, entry))


def _alive(pid: str) -> bool:
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
