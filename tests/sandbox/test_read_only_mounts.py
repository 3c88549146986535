"""`read_only_mounts`: a host folder the box reads but cannot write, on each backend."""

import asyncio
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rlgym_llm import ConfigError
from rlgym_llm.sandbox import make_sandbox


@pytest.fixture
def shared():
    """A host folder outside /tmp (the local box has its own private /tmp)."""
    base = Path.home() / ".cache"
    base.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="rlgym-mount-test-", dir=base))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def test_a_mounted_folder_is_readable_and_not_writable(boxed, backend, shared):
    (shared / "data.txt").write_text("hello\n")
    at = str(shared) if backend == "local" else "/opt/shared"
    code = (
        f"print(open({at + '/data.txt'!r}).read().strip())\n"
        f"try:\n    open({at + '/new.txt'!r}, 'w')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    )

    async def scenario(box):
        return await box.exec(["python3", "-c", code])

    result = boxed(scenario, read_only_mounts={str(shared): at})
    assert result.ok, result
    assert result.stdout.splitlines()[0] == "hello" and result.stdout.splitlines()[1].startswith("refused")
    assert not (shared / "new.txt").exists()


def test_the_local_backend_keeps_host_paths_at_their_place_and_its_scratch_dirs_private():
    with pytest.raises(ConfigError, match="own path"):
        make_sandbox("local", read_only_mounts={"/usr/share": "/opt/share"})
    for scratch in ("/tmp", "/var", "/dev/shm", "/"):
        with pytest.raises(ConfigError, match="private /tmp"):
            make_sandbox("local", read_only_mounts={scratch: scratch})
        with pytest.raises(ConfigError, match="private /tmp"):
            make_sandbox("local", expose=(scratch,))
    make_sandbox("local", read_only_mounts={"/tmp/x": "/tmp/x"})  # a folder inside one is fine


@pytest.mark.skipif(os.geteuid() != 0, reason="the box's private /tmp needs root")
def test_a_folder_under_tmp_is_mounted_inside_the_box_private_tmp():
    """E.g. the SWE toolchain with RLGYM_SWE_CACHE under /tmp: only that folder of the host's /tmp shows."""
    base = Path(tempfile.mkdtemp(prefix="rlgym-mount-test-", dir="/tmp"))
    base.chmod(0o755)
    shared = base / "shared"
    shared.mkdir(mode=0o755)
    (shared / "data.txt").write_text("hello\n")
    (base / "sibling.txt").write_text("host secret\n")
    code = (
        "import os, sys\n"
        "print(open(os.path.join(sys.argv[1], 'data.txt')).read().strip())\n"
        "print(os.listdir(os.path.dirname(sys.argv[1])), os.path.exists(sys.argv[2]))\n"
        "try:\n    open(os.path.join(sys.argv[1], 'new.txt'), 'w')\nexcept OSError as e:\n    print('refused', e.errno)\n"
    )

    async def scenario():
        async with make_sandbox("local", read_only_mounts={str(shared): str(shared)}) as box:
            return await box.exec(["python3", "-c", code, str(shared), str(base / "sibling.txt")])

    try:
        result = asyncio.run(scenario())
    finally:
        shutil.rmtree(base)
    assert result.ok, result
    assert result.stdout.splitlines() == ["hello", "['shared'] False", "refused 30"]
