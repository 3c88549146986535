"""Shared fixtures: every attack runs against each backend (docker only under `-m docker`)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import pytest

from rlgym_llm.sandbox import Limits, Sandbox, make_sandbox


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request) -> str:
    return request.param


@pytest.fixture
def boxed(backend) -> Callable[..., object]:
    """`boxed(scenario, limits)` starts a fresh box, awaits `scenario(box)`, closes the box, returns the value."""

    def run(scenario: Callable[[Sandbox], Awaitable[object]], limits: Limits | None = None, **kwargs) -> object:
        async def main():
            async with make_sandbox(backend, limits, **kwargs) as box:
                return await scenario(box)

        return asyncio.run(main())

    return run


def host_processes() -> list[tuple[int, int, str]]:
    """(pid, uid, cmdline) of every process on the host, read from /proc (no psutil)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited while we looked
        found.append((int(entry), uid, cmdline))
    return found


async def still_works(box: Sandbox) -> None:
    """Asserts the box runs a trivial command correctly after an attack."""
    result = await box.exec(["python3", "-c", "print(6 * 7)"], timeout=20)
    assert result.ok, result
    assert result.stdout == "42\n"
