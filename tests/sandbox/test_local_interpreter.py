"""The local box runs the caller's interpreter wherever it lives (a venv under /tmp, /var/tmp, /dev/shm...),
or refuses to start in one line; the isolation around it holds (its private, capped /tmp included)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from rlgym_llm.sandbox import Limits, SandboxError
from rlgym_llm.sandbox import _isolation as iso
from rlgym_llm.sandbox.local import LocalSandbox

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parents[2]
needs_root = pytest.mark.skipif(not ROOT, reason="the box's own root and uid need root")


# ---------------------------------------------------------------- the mount plan (pure)


def test_every_folder_is_mounted_before_the_ones_inside_it():
    paths = ["/tmp/v/venv/bin", "/opt/py", "/tmp/v/venv", "/var/tmp", "/home/u/tmp/box", "/tmp", "/home/u", "/dev/shm"]
    order = iso.mount_order(paths)
    assert sorted(order) == sorted(paths)
    for outer in paths:
        for inner in paths:
            if inner != outer and iso.under(inner, outer):
                assert order.index(outer) < order.index(inner), (outer, inner, order)


@pytest.mark.parametrize(
    ("path", "conflict"),
    [
        ("/tmp/v/venv", None),
        ("/var/tmp/venv", None),
        ("/dev/shm/venv", None),
        ("/root/.pyenv/versions/3.11.7", None),
        ("/tmpfoo", None),
        ("/tmp", "/tmp"),
        ("/var/tmp", "/var/tmp"),
        ("/var", "/var/tmp"),
        ("/dev", "/dev/shm"),
        ("/", "/tmp"),
    ],
)
def test_a_folder_that_is_or_holds_a_private_scratch_dir_conflicts(path, conflict):
    assert iso.private_conflict(path) == conflict


def test_the_links_on_the_way_to_a_path_are_listed_where_they_resolve(tmp_path):
    top = Path(os.path.realpath(tmp_path))  # tmp_path itself may lie behind a link
    (top / "real" / "venv" / "bin").mkdir(parents=True)
    (top / "base").mkdir()
    (top / "base" / "python3").write_text("")
    (top / "real" / "venv" / "bin" / "python").symlink_to(top / "base" / "python3")  # absolute: starts again at /
    (top / "link").symlink_to(top / "real")
    (top / "project").mkdir()
    (top / "project" / ".venv").symlink_to("../link/venv")  # relative, through a second link
    links, folders = iso.symlinks_on_the_way(f"{top}/project/.venv/bin/python")
    assert links == [
        (f"{top}/project/.venv", "../link/venv"),
        (f"{top}/link", f"{top}/real"),
        (f"{top}/real/venv/bin/python", f"{top}/base/python3"),
    ]
    real = [f"{top}/real", f"{top}/real/venv", f"{top}/real/venv/bin"]
    above = [str(p) for p in reversed(top.parents)]  # "/", ..., the folder holding tmp_path
    assert folders == [*above, str(top), f"{top}/project", *real, f"{top}/base"]  # each looked up in, once
    assert iso.symlinks_on_the_way(f"{top}/real/venv/bin/../bin") == ([], [*above, str(top), *real])  # ".." too


# ---------------------------------------------------------------- a real box run from a venv


def make_venv(parent: str) -> tuple[Path, Path]:
    """(a world-readable folder under `parent`, its venv), as `python3 -m venv` makes one."""
    base = Path(tempfile.mkdtemp(prefix="rlgym-interp-", dir=parent))
    base.chmod(0o755)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    return base, venv


PROBE = """
import json, os, site, subprocess, sys
venv, place, secrets = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.run([sys.executable, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
try:
    open(os.path.join(venv, "planted"), "w")
    venv_write = "written"
except OSError as exc:
    venv_write = exc.errno
with open(os.path.join(place, "scratch.txt"), "w") as f:
    f.write("box")
with open("in-work-dir.txt", "w") as f:
    f.write("box")
fs = os.statvfs(place)
print(json.dumps({
    "executable": sys.executable,
    "child": [child.returncode, child.stdout.strip(), child.stderr[-500:]],
    "venv_write": venv_write,
    "secrets": [p for p in secrets if os.path.lexists(p)],
    "listing": sorted(os.listdir(place)),
    "base_listing": sorted(os.listdir(os.path.dirname(venv))),
    "site_packages": [p for p in site.getsitepackages() if os.path.isdir(p) and os.listdir(p)],
    "size_mb": fs.f_blocks * fs.f_frsize / 2**20,
}))
"""


@needs_root
@pytest.mark.parametrize("place", ["/tmp", "/var/tmp", "/dev/shm"])
def test_a_venv_under_a_scratch_dir_runs_in_the_box_and_nothing_else_there_shows(place, monkeypatch):
    if not os.access(place, os.W_OK):
        pytest.skip(f"{place} is not writable here")
    base, venv = make_venv(place)
    beside_venv = base / "sibling.txt"  # in the host folder that holds the venv
    beside_venv.write_text("host secret")
    fd, in_place = tempfile.mkstemp(prefix="rlgym-host-secret-", dir=place)  # loose in the host's scratch dir
    os.close(fd)
    python = str(venv / "bin" / "python")
    monkeypatch.setattr(sys, "executable", python)  # what `venv/bin/python -m ...` would run the box with

    async def scenario():
        async with LocalSandbox(Limits(wall_s=20), disk_mb=64, require_isolation=True) as box:
            probe = await box.exec(["python3", "-c", PROBE, str(venv), place, str(beside_venv), in_place])
            execd = await box.exec([python, "-S", "-c", "print('exec ok')"])  # a real exec, not in-process
            work = os.path.basename(box.work_dir or "")
            return probe, execd, work, box.isolation

    try:
        probe, execd, work, isolation = asyncio.run(scenario())
    finally:
        shutil.rmtree(base)
        os.unlink(in_place)
    assert probe.ok, probe
    assert execd.ok and execd.stdout == "exec ok\n", execd
    seen = json.loads(probe.stdout)
    assert seen["executable"] == python
    assert seen["child"][:2] == [0, str(venv)], seen["child"]  # sys.executable runs inside the box
    assert seen["venv_write"] == 30, seen  # EROFS: the bound interpreter is read-only
    assert seen["secrets"] == []  # nothing of the host's scratch dir beside the venv
    assert set(seen["listing"]) <= {base.name, work, "scratch.txt"}, seen["listing"]
    assert seen["base_listing"] == ["venv"]
    assert seen["site_packages"] == []  # the venv's and its base's site-packages: hidden
    assert seen["size_mb"] == 64  # the box's own tmpfs, capped at disk_mb
    assert str(venv) in isolation["visible"]
    assert not (venv / "planted").exists() and not Path(place, "scratch.txt").exists()


@needs_root
def test_an_interpreter_directly_in_tmp_is_refused_in_one_line(monkeypatch):
    link = Path("/tmp", f"rlgym-python-{uuid.uuid4().hex[:8]}")
    link.symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(link))  # its folder is /tmp itself: the box's private /tmp
    try:
        with pytest.raises(SandboxError, match=r"its folder /tmp is or holds /tmp") as caught:
            asyncio.run(LocalSandbox().start())
    finally:
        link.unlink()
    assert "\n" not in str(caught.value) and "folder of its own" in str(caught.value)


@needs_root
def test_an_interpreter_the_box_user_cannot_reach_is_refused_in_one_line(monkeypatch):
    closed = Path(tempfile.mkdtemp(prefix="rlgym-closed-", dir="/tmp"))  # mode 0700, as mkdtemp makes it
    (closed / "python3").symlink_to(os.path.realpath(sys.executable))
    monkeypatch.setattr(sys, "executable", str(closed / "python3"))
    try:
        with pytest.raises(SandboxError, match=rf"cannot reach {closed}, .*chmod o\+rx {closed}\)") as caught:
            asyncio.run(LocalSandbox().start())
    finally:
        shutil.rmtree(closed)
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- a venv reached through a symlink


LINKED_PROBE = """
import json, os, subprocess, sys
venv, link_dir, secrets = sys.argv[1], sys.argv[2], sys.argv[3:]
child = subprocess.run([sys.executable, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
try:
    open(os.path.join(venv, "planted"), "w")
    venv_write = "written"
except OSError as exc:
    venv_write = exc.errno
print(json.dumps({
    "executable": sys.executable,
    "child": [child.returncode, child.stdout.strip(), child.stderr[-500:]],
    "venv_write": venv_write,
    "secrets": [p for p in secrets if os.path.lexists(p)],
    "link_dir": sorted(os.listdir(link_dir)),
}))
"""
LINK_SHAPES = ["a linked folder under /tmp", "a linked parent in $HOME", "a linked .venv in /var/tmp"]


def linked_venv(shape: str, made: list[Path]) -> tuple[Path, Path, Path, set[str]]:
    """(the venv's path as run, its resolved path, the folder holding the link, what the box shows there).

    Each shape has a host file `sibling.txt` beside the link and beside the venv; `made` gets what to delete.
    """
    home = Path.home()
    if shape == LINK_SHAPES[0]:  # /tmp/rlgym-link-*/venv, the link -> /tmp/rlgym-interp-*
        base, venv = make_venv("/tmp")
        link = Path("/tmp", f"rlgym-link-{uuid.uuid4().hex[:8]}")
        made += [base, link]
        link.symlink_to(base, target_is_directory=True)
        fd, loose = tempfile.mkstemp(prefix="sibling-", dir="/tmp")
        os.close(fd)
        made.append(Path(loose))
        as_run, link_dir, shown = link / "venv", Path("/tmp"), {link.name, base.name}
    elif shape == LINK_SHAPES[1]:  # ~/rlgym-link-*/project/venv, project -> ~/rlgym-interp-* (as /opt/link/venv)
        base, venv = make_venv(str(home))
        link_dir = Path(tempfile.mkdtemp(prefix="rlgym-link-", dir=home))
        made += [base, link_dir]
        (link_dir / "project").symlink_to(base, target_is_directory=True)
        as_run, shown = link_dir / "project" / "venv", {"project"}
    else:  # a cache-linked venv: /var/tmp/x/.venv -> cache/venv (relative), cache -> ~/rlgym-interp-*
        base, venv = make_venv(str(home))
        link_dir = Path(tempfile.mkdtemp(prefix="rlgym-link-", dir="/var/tmp"))
        made += [base, link_dir]
        (link_dir / "cache").symlink_to(base, target_is_directory=True)
        (link_dir / ".venv").symlink_to("cache/venv", target_is_directory=True)
        as_run, shown = link_dir / ".venv", {"cache", ".venv"}
    (base / "sibling.txt").write_text("host secret")
    if link_dir != Path("/tmp"):
        link_dir.chmod(0o755)  # as make_venv: a folder the box's user may reach on the host too
        (link_dir / "sibling.txt").write_text("host secret")
    return as_run, venv, link_dir, shown


@needs_root
@pytest.mark.parametrize("shape", LINK_SHAPES)
def test_a_venv_reached_through_a_symlink_runs_in_the_box_by_the_path_it_was_started_with(shape, monkeypatch):
    made: list[Path] = []
    try:
        as_run, venv, link_dir, shown = linked_venv(shape, made)
        python = str(as_run / "bin" / "python")
        monkeypatch.setattr(sys, "executable", python)  # what `<link>/venv/bin/python -m ...` runs the box with
        beside = [venv.parent / "sibling.txt", as_run.parent / "sibling.txt", link_dir / "sibling.txt"]
        beside += [p for p in made if p.name.startswith("sibling-")]  # loose in the host's /tmp

        async def scenario():
            async with LocalSandbox(Limits(wall_s=20), require_isolation=True) as box:
                argv = ["python3", "-c", LINKED_PROBE, str(as_run), str(link_dir), *map(str, beside)]
                probe = await box.exec(argv)
                execd = await box.exec([python, "-I", "-c", "import sys; print(sys.prefix)"])  # a real exec
                on_path = await box.exec(["python3", "-I", "-c", "import sys; print(sys.executable)"])  # $PATH
                return probe, execd, on_path, os.path.basename(box.work_dir or ""), box.isolation

        probe, execd, on_path, work, isolation = asyncio.run(scenario())
    finally:
        for path in reversed(made):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists():
                shutil.rmtree(path)
    assert probe.ok, probe
    assert execd.ok and execd.stdout == f"{as_run}\n", execd  # sys.executable execs, in its venv
    assert on_path.ok and on_path.stdout == f"{as_run}/bin/python3\n", on_path
    seen = json.loads(probe.stdout)
    assert seen["executable"] == python
    assert seen["child"][:2] == [0, str(as_run)], seen["child"]
    assert seen["venv_write"] == 30, seen  # EROFS: read-only by its linked path too
    assert seen["secrets"] == []  # nothing beside the link or the venv, by either path
    assert set(seen["link_dir"]) - {work} == shown, seen["link_dir"]  # the link, not its folder's other files
    assert str(venv) in isolation["visible"]
    assert not (venv / "planted").exists()


@needs_root
def test_a_folder_exposed_through_a_symlink_shows_at_that_path_and_nothing_beside_it(monkeypatch):
    real = Path(tempfile.mkdtemp(prefix="rlgym-data-", dir="/tmp"))
    real.chmod(0o755)
    (real / "data").mkdir()
    (real / "data" / "file.txt").write_text("shown")
    (real / "sibling.txt").write_text("host secret")
    link = Path("/tmp", f"rlgym-link-{uuid.uuid4().hex[:8]}")  # e.g. RLGYM_SWE_CACHE behind a link
    link.symlink_to(real, target_is_directory=True)

    async def scenario():
        async with LocalSandbox(read_only_mounts={f"{link}/data": f"{link}/data"}, require_isolation=True) as box:
            return await box.exec(["cat", f"{link}/data/file.txt"]), await box.exec(["ls", str(link)])

    try:
        read, listing = asyncio.run(scenario())
    finally:
        link.unlink()
        shutil.rmtree(real)
    assert read.ok and read.stdout == "shown", read
    assert listing.ok and listing.stdout == "data\n", listing


@needs_root
def test_a_root_dir_reached_through_the_interpreters_link_is_refused_in_one_line(monkeypatch):
    base, venv = make_venv("/tmp")
    link = Path("/tmp", f"rlgym-link-{uuid.uuid4().hex[:8]}")
    link.symlink_to(base, target_is_directory=True)
    monkeypatch.setattr(sys, "executable", str(link / "venv" / "bin" / "python"))
    try:  # the box's work dir is made at <link>/rlgym-box-*, so the link itself cannot be made in the box
        with pytest.raises(SandboxError, match=rf"goes through the link {link} -> {base}, .* work dir") as caught:
            asyncio.run(LocalSandbox(root_dir=str(link)).start())
    finally:
        link.unlink()
        shutil.rmtree(base)
    assert "\n" not in str(caught.value) and f"run {venv}/bin/python instead" in str(caught.value)


# ---------------------------------------------------------------- the Code and SWE boxes, run from a venv


# Code-v0 grading (check and function modes), SWE-v0 grading with the pinned pytest, and the local backend.
NODE_IDS = [
    "tests/envs/test_code_check.py",
    "tests/envs/test_code_env.py::test_a_wrong_submission_ends_the_episode_with_the_pass_vector",
    "tests/envs/test_code_env.py::test_outcome_level_orders_no_submission_none_some_all_passing",
    "tests/envs/test_code_tampering.py::test_the_local_box_holds_no_folder_of_the_caller",
    "tests/envs/test_swe_env.py::test_edit_then_tests_then_submit_resolves",
    "tests/sandbox/test_local.py",
]


@pytest.mark.slow
@pytest.mark.parametrize("linked", [False, True], ids=["under /tmp", "through a linked folder in $HOME"])
def test_code_and_swe_boxes_grade_when_the_venv_and_the_swe_cache_live_under_tmp(linked):
    from rlgym_envs.swe.toolchain import ensure_pytest

    base, _ = make_venv("/tmp")
    as_run, holder = base, None
    if linked:  # ~/rlgym-link-*/project -> /tmp/rlgym-interp-*: the venv and the SWE cache used by that path
        holder = Path(tempfile.mkdtemp(prefix="rlgym-link-", dir=Path.home()))
        holder.chmod(0o755)
        as_run = holder / "project"
        as_run.symlink_to(base, target_is_directory=True)
    env = dict(os.environ)
    if sys.prefix != sys.base_prefix:  # run from a venv: the new one's system site-packages are its base's
        env["PYTHONPATH"] = os.pathsep.join([*site.getsitepackages(), env.get("PYTHONPATH", "")])
    toolchain = ensure_pytest()
    shutil.copytree(toolchain, base / "swe-cache" / toolchain.name, symlinks=True)
    env["RLGYM_SWE_CACHE"] = str(as_run / "swe-cache")  # the pinned pytest, mounted from under /tmp
    try:
        proc = subprocess.run(
            [str(as_run / "venv" / "bin" / "python"), "-m", "pytest", *NODE_IDS, "-q", "-p", "no:cacheprovider"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        shutil.rmtree(base)
        if holder is not None:
            shutil.rmtree(holder)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout, proc.stdout[-2000:]
