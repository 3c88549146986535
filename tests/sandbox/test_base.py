"""The protocol pieces: Limits validation, ExecResult JSON, path checks, backend lookup, the pool."""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.sandbox import (
    ExecResult,
    Limits,
    SandboxError,
    SandboxPathError,
    SandboxPool,
    check_box_path,
    make_sandbox,
)
from rlgym_llm.sandbox.local import LocalSandbox


def test_limits_defaults():
    limits = Limits()
    assert (limits.wall_s, limits.cpu_s, limits.memory_mb, limits.max_procs) == (10, 10, 512, 64)
    assert limits.output_bytes == 64 * 1024 and limits.network is False


def test_limits_lists_every_problem():
    with pytest.raises(ConfigError) as info:
        Limits(wall_s=0, cpu_s=float("inf"), memory_mb=8, max_procs=0, output_bytes=-1, network="yes")
    assert len(info.value.problems) == 6
    for name in ("wall_s", "cpu_s", "memory_mb", "max_procs", "output_bytes", "network"):
        assert any(name in p for p in info.value.problems)


@given(
    wall=st.floats(0.01, 1e4),
    cpu=st.floats(0.01, 1e4),
    mem=st.integers(16, 1 << 20),
    procs=st.integers(1, 1 << 16),
    out=st.integers(1, 1 << 30),
    net=st.booleans(),
)
def test_limits_round_trip(wall, cpu, mem, procs, out, net):
    limits = Limits(wall, cpu, mem, procs, out, net)
    assert Limits.from_dict(json.loads(json.dumps(limits.to_dict()))) == limits


def test_limits_from_dict_rejects_unknown_keys():
    with pytest.raises(ConfigError, match="timeout"):
        Limits.from_dict({"timeout": 3})


@given(
    out=st.text(),
    err=st.text(),
    code=st.one_of(st.none(), st.integers(0, 255)),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    sig=st.one_of(st.none(), st.integers(1, 64)),
    error=st.one_of(st.none(), st.text()),
)
def test_exec_result_json_round_trip(out, err, code, flags, sig, error):
    result = ExecResult(out, err, code, flags[0], 0.5, flags[1], flags[2], sig, error)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["ok"] == result.ok
    assert ExecResult.from_dict(data) == result


def test_exec_result_ok_needs_a_clean_zero_exit():
    assert ExecResult("", "", 0).ok
    assert not ExecResult("", "", 1).ok
    assert not ExecResult("", "", 0, timed_out=True).ok
    assert not ExecResult("", "", 0, oom_killed=True).ok
    assert not ExecResult("", "", None, error="could not execute").ok


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../b", "a/..", "", ".", "nul\x00l"])
def test_escaping_paths_are_rejected(path):
    with pytest.raises(SandboxPathError):
        check_box_path(path)


@pytest.mark.parametrize("path", ["a.py", "src/pkg/mod.py", "./x", "a..b/c"])
def test_relative_paths_are_accepted(path):
    assert not check_box_path(path).is_absolute()


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"docker.*local"):
        make_sandbox("podman")
    assert isinstance(make_sandbox("local"), LocalSandbox)


def test_pool_size_is_validated():
    with pytest.raises(ConfigError):
        SandboxPool(LocalSandbox, size=0)


def test_pool_reuses_boxes_and_resets_them():
    async def main():
        async with SandboxPool(lambda: make_sandbox("local", Limits(wall_s=5)), size=2) as pool:
            async with pool.acquire() as box:
                first = box
                await box.write_file("state.txt", "dirty")
                result = await box.exec(["sh", "-c", "echo scratch > /tmp/scratch; cat state.txt"])
                assert result.stdout == "dirty"
            seen = set()
            for _ in range(4):
                async with pool.acquire() as box:
                    seen.add(id(box))
                    with pytest.raises(FileNotFoundError):
                        await box.read_file("state.txt")
                    result = await box.exec(["sh", "-c", "ls /tmp; ls -A ."])
                    assert "scratch" not in result.stdout and "state.txt" not in result.stdout
            assert id(first) in seen and len(seen) <= 2
            assert pool.replaced == 0

    asyncio.run(main())


def test_pool_serves_concurrent_users_and_replaces_broken_boxes():
    async def main():
        async with SandboxPool(lambda: make_sandbox("local", Limits(wall_s=5)), size=2) as pool:

            async def job(i):
                async with pool.acquire() as box:
                    return (await box.exec(["python3", "-c", f"print({i} * 2)"])).stdout

            assert await asyncio.gather(*(job(i) for i in range(6))) == [f"{2 * i}\n" for i in range(6)]
            async with pool.acquire() as box:
                broken = box
                os.kill(box.worker_pid, signal.SIGKILL)  # the box itself breaks (not the code in it)
                await asyncio.sleep(0.1)
                with pytest.raises(SandboxError, match="worker"):
                    await box.exec(["true"])
            assert pool.replaced == 1
            for _ in range(2):
                async with pool.acquire() as box:
                    assert box is not broken
                    assert (await box.exec(["python3", "-c", "print('ok')"])).ok

    asyncio.run(main())


def test_exec_on_a_box_that_was_never_started_is_a_sandbox_error():
    with pytest.raises(SandboxError, match="not started"):
        asyncio.run(make_sandbox("local").exec(["true"]))
