"""Where the local backend puts a box's cgroup (v2), checked on fake hierarchies; real cgroups: test_local.py."""

from __future__ import annotations

import errno
from pathlib import Path

from rlgym_llm.sandbox import _cgroup
from rlgym_llm.sandbox._cgroup import BoxCgroup


def hierarchy(tmp_path: Path, own_available: str, own_enabled: str, parent_enabled: str) -> Path:
    """parent/own, each with cgroup.controllers and cgroup.subtree_control."""
    own = tmp_path / "parent" / "own"
    own.mkdir(parents=True)
    (own.parent / "cgroup.controllers").write_text("memory pids cpu\n")
    (own.parent / "cgroup.subtree_control").write_text(parent_enabled + "\n")
    (own / "cgroup.controllers").write_text(own_available + "\n")
    (own / "cgroup.subtree_control").write_text(own_enabled + "\n")
    return own


def test_boxes_go_under_our_own_cgroup_when_it_delegates_memory(tmp_path):
    own = hierarchy(tmp_path, "memory pids", "memory pids", "memory pids")
    assert BoxCgroup._v2_parent(str(own)) == str(own)


def test_our_own_cgroup_is_asked_to_delegate_when_it_can(tmp_path):
    own = hierarchy(tmp_path, "memory pids", "", "memory pids")
    assert BoxCgroup._v2_parent(str(own)) == str(own)
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"


def refuse_writes(monkeypatch):
    """The kernel's answer where our cgroup holds processes (the "no internal processes" rule)."""

    def busy(path, value):
        raise OSError(errno.EBUSY, "Device or resource busy", path)

    monkeypatch.setattr(_cgroup, "_write", busy)


def test_boxes_go_beside_a_cgroup_that_holds_processes(tmp_path, monkeypatch):
    own = hierarchy(tmp_path, "memory", "", "memory")  # e.g. a job's cgroup on a pure v2 host (seen on one)
    refuse_writes(monkeypatch)
    assert BoxCgroup._v2_parent(str(own)) == str(own.parent)


def test_no_memory_controller_anywhere_means_no_cgroup(tmp_path, monkeypatch):
    own = hierarchy(tmp_path, "cpu", "", "cpu")
    refuse_writes(monkeypatch)
    assert BoxCgroup._v2_parent(str(own)) is None
