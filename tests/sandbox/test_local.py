"""The local backend: in-process `python` runs behave like a fresh interpreter; files; isolation report."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from rlgym_llm.sandbox import Limits, SandboxPathError
from rlgym_llm.sandbox.local import LocalSandbox
from tests.sandbox.conftest import host_processes

ROOT = os.geteuid() == 0


def run(scenario, limits=None, **kwargs):
    async def main():
        async with LocalSandbox(limits or Limits(wall_s=10), **kwargs) as box:
            return await scenario(box)

    return asyncio.run(main())


CASES = [
    "print('hi')",
    "import sys; sys.exit(3)",
    "import sys; sys.exit('bye')",
    "raise SystemExit",
    "raise ValueError('boom')",
    "x = (",
    "import sys; print(sys.argv)",
    "import sys; print(sys.stdin.read().upper())",
    "import atexit; atexit.register(print, 'at exit'); print('body')",
    "import threading, time; threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()",
    "import sys; sys.stdout.write('no newline'); sys.stderr.write('err')",
    "import __main__; print(__name__, __main__.__dict__.get('leak'))",
]


@pytest.mark.parametrize("code", CASES)
def test_in_process_python_matches_a_fresh_interpreter(code):
    """Same stdout, stderr and exit code as `subprocess.run([sys.executable, "-c", code])`."""
    argv = [sys.executable, "-c", code, "arg1", "arg 2"]
    expected = subprocess.run(argv, input="stdin text", capture_output=True, text=True, env={"PATH": "/usr/bin"})

    async def scenario(box):
        await box.exec(["python3", "-c", "leak = 1"])  # globals of one run must not reach the next
        return await box.exec(argv, stdin="stdin text")

    result = run(scenario)
    assert (result.stdout, result.stderr, result.exit_code) == (expected.stdout, expected.stderr, expected.returncode)


def test_script_files_run_in_process_with_their_own_argv_and_path():
    async def scenario(box):
        await box.write_file("pkg/helper.py", "VALUE = 41\n")
        await box.write_file("pkg/main.py", "import sys, helper\nprint(helper.VALUE + 1, sys.argv, __file__)\n")
        ok = await box.exec(["python", "pkg/main.py", "x"])
        missing = await box.exec(["python", "nope.py"])
        return ok, missing

    ok, missing = run(scenario)
    assert ok.stdout == "42 ['pkg/main.py', 'x'] pkg/main.py\n", ok
    assert missing.exit_code == 2 and "can't open file 'nope.py'" in missing.stderr


def test_other_programs_stdin_cwd_and_env():
    async def scenario(box):
        await box.write_file("sub/data.txt", "abc")
        cat = await box.exec(
            ["sh", "-c", 'pwd; cat data.txt; echo " $GREETING"; cat'], stdin=b"in", cwd="sub", env={"GREETING": "hello"}
        )
        missing = await box.exec(["definitely-not-a-program"])
        bad_cwd = await box.exec(["true"], cwd="no/such/dir")
        return cat, missing, bad_cwd

    cat, missing, bad_cwd = run(scenario)
    assert cat.ok and cat.stdout.endswith("/sub\nabc hello\nin"), cat
    assert missing.exit_code is None and "definitely-not-a-program" in missing.error
    assert not bad_cwd.ok and bad_cwd.error


def test_files_round_trip_and_paths_stay_inside():
    blob = bytes(range(256)) * 100

    async def scenario(box):
        await box.write_file("a/b/blob.bin", blob)
        await box.write_file("text.txt", "héllo")
        back = await box.read_file("a/b/blob.bin"), await box.read_file("text.txt")
        made = await box.exec(["sh", "-c", "echo made > out.txt; ln -s /etc/passwd link"])
        out = await box.read_file("out.txt")
        with pytest.raises(OSError):  # a box-made symlink must not let the host read its files
            await box.read_file("link")
        with pytest.raises(OSError):
            await box.write_file("link", "overwrite /etc/passwd?")
        for bad in ("/etc/passwd", "../escape"):
            with pytest.raises(SandboxPathError):
                await box.read_file(bad)
            with pytest.raises(SandboxPathError):
                await box.write_file(bad, "x")
        with pytest.raises(FileNotFoundError):
            await box.read_file("missing.txt")
        return back, made, out

    passwd = Path("/etc/passwd").read_bytes()
    back, made, out = run(scenario)
    assert back == (blob, "héllo".encode())
    assert made.ok and out == b"made\n"
    assert Path("/etc/passwd").read_bytes() == passwd


@pytest.mark.skipif(not ROOT, reason="namespaces and the uid drop need root")
def test_every_isolation_layer_is_in_effect_as_root():
    async def scenario(box):
        ids = await box.exec(["sh", "-c", "id -u; echo $$; ls /proc | grep -c '^[0-9]'"])
        return box.missing_isolation(), box.uid, ids

    missing, uid, ids = run(scenario, require_isolation=True)
    assert missing == []
    uid_seen, pid, nprocs = ids.stdout.split()
    assert int(uid_seen) == uid >= 1_000_000
    assert int(pid) <= 3 and int(nprocs) <= 5  # a PID namespace of its own, with its own /proc


@pytest.mark.skipif(not ROOT, reason="the per-box uid needs root")
def test_no_process_of_the_box_uid_survives_an_exec():
    code = (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid(); time.sleep(100)\nprint('ok')"
    )

    async def scenario(box):
        result = await box.exec(["python3", "-c", code])
        return result, [p for p in host_processes() if p[1] == box.uid]

    result, leftovers = run(scenario, Limits(wall_s=10, max_procs=16))
    assert result.stdout == "ok\n" and leftovers == []


def test_closed_box_leaves_no_worker_and_no_work_dir():
    async def main():
        box = LocalSandbox()
        await box.start()
        pid, work_dir = box.worker_pid, box.work_dir
        assert (await box.exec(["true"])).ok
        await box.close()
        await box.close()  # idempotent
        return pid, work_dir

    pid, work_dir = asyncio.run(main())
    assert not os.path.exists(work_dir)
    assert pid not in [p[0] for p in host_processes()]


# --- limits per box, not per process (cgroups); the controls run the same code under the old limits ---

TEN_CHILDREN = """
import os, time
pids = []
for i in range(10):
    pid = os.fork()
    if pid == 0:
        block = bytearray(40 * 1024 * 1024)
        for j in range(0, len(block), 4096):
            block[j] = 1  # touch every page: resident, not just reserved
        time.sleep(1)
        os._exit(0)
    pids.append(pid)
print(sum(os.waitpid(p, 0)[1] == 0 for p in pids))
"""


def test_ten_children_fit_under_a_per_process_limit():
    """Control: with only RLIMIT_AS (the old per-process limit) of 128 MiB, ten 40 MiB children all succeed."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (128 << 20, 128 << 20))

    out = subprocess.run([sys.executable, "-c", TEN_CHILDREN], capture_output=True, text=True, preexec_fn=limit)
    assert out.stdout == "10\n", out


@pytest.mark.skipif(not ROOT, reason="cgroups need root")
def test_memory_is_one_budget_for_the_whole_box():
    async def scenario(box):
        result = await box.exec(["python3", "-c", TEN_CHILDREN], timeout=30)
        return box.isolation["cgroup"], result

    cgroup, result = run(scenario, Limits(memory_mb=128, wall_s=30, max_procs=32))
    assert cgroup["version"] in (1, 2)
    assert result.oom_killed, result
    assert int(result.stdout or 0) <= 3, result  # 128 MiB hold three 40 MiB children, not ten


@pytest.mark.skipif(not ROOT, reason="cgroups need root")
def test_files_in_the_box_tmpfs_count_against_its_memory():
    write = ["sh", "-c", "head -c 200000000 /dev/zero > /tmp/big && echo written"]

    async def scenario(box):
        filled = await box.exec(write, timeout=30)
        await box.reset()  # frees the files, and with them the memory
        after = await box.exec(["python3", "-c", "print(42)"])
        return filled, after

    big, after = run(scenario, Limits(memory_mb=512, wall_s=30))  # control: 200 MB fit in 512 MiB
    assert big.stdout == "written\n", big
    filled, after = run(scenario, Limits(memory_mb=128, wall_s=30))
    assert filled.oom_killed and "written" not in filled.stdout, filled
    assert after.ok and after.stdout == "42\n", after


@pytest.mark.skipif(not ROOT, reason="cgroups need root")
def test_cgroups_are_removed_with_the_box():
    async def main():
        box = LocalSandbox()
        await box.start()
        dirs = box.isolation["cgroup"]["dirs"]
        assert all(os.path.isdir(d) for d in dirs)
        await box.close()
        return dirs

    assert not any(os.path.exists(d) for d in asyncio.run(main()))


def test_removing_a_cgroup_that_is_already_gone_is_silent(tmp_path, caplog):
    from rlgym_llm.sandbox._cgroup import BoxCgroup

    busy = tmp_path / "busy"
    (busy / "child").mkdir(parents=True)  # a directory rmdir refuses: the control, which is logged
    box = BoxCgroup(1, [str(tmp_path / "gone"), str(busy)], [], pids_limited=False)
    with caplog.at_level("WARNING", logger="rlgym_llm.sandbox._cgroup"):
        box.remove()
    assert [r.getMessage() for r in caplog.records if "gone" in r.getMessage()] == []
    assert any("busy" in r.getMessage() for r in caplog.records)


# --- in-process runs are forks of the worker: its heap must hold nothing of an earlier episode ---

HEAP_SCAN = """
import ctypes
needle = b"HIDDEN-TEST-" + b"SECRET-"  # built at run time: this object is the one copy we expect
found = 0
for line in open("/proc/self/maps").read().splitlines():
    parts = line.split()
    if not parts[1].startswith("r") or (len(parts) > 5 and parts[5].startswith("[v")):
        continue
    start, end = (int(x, 16) for x in parts[0].split("-"))
    found += ctypes.string_at(start, end - start).count(needle)
print(found - 1)
"""


def test_a_reset_box_holds_nothing_of_the_last_episode_in_memory():
    hidden = "\n".join(f"def test_{i}():\n    assert f({i}) == {7 * i}  # HIDDEN-TEST-SECRET-{i}" for i in range(20))

    async def scenario(box):
        await box.exec(["python3", "-c", "import sys; sys.stdin.read()"], stdin=hidden)  # e.g. grading
        same_episode = await box.exec(["python3", "-c", HEAP_SCAN])
        pids = {box.worker_pid}
        await box.reset()
        next_episode = await box.exec(["python3", "-c", HEAP_SCAN])
        await box.reset()  # the background spare takes over
        pids |= {box.worker_pid}
        return same_episode, next_episode, pids

    same_episode, next_episode, pids = run(scenario)
    assert int(same_episode.stdout) > 0, same_episode  # control: the worker's heap held the other run's stdin
    assert int(next_episode.stdout) == 0, next_episode
    alive = {p[0] for p in host_processes()}
    assert not pids & alive  # every worker, spares included, is gone after close
