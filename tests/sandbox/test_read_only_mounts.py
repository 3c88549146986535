"""`read_only_mounts`: a host folder the box reads but cannot write, on each backend."""

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


def test_the_local_backend_keeps_host_paths_outside_its_private_tmp():
    with pytest.raises(ConfigError, match="own path"):
        make_sandbox("local", read_only_mounts={"/usr/share": "/opt/share"})
    with pytest.raises(ConfigError, match="private /tmp"):
        make_sandbox("local", read_only_mounts={"/tmp/x": "/tmp/x"})
