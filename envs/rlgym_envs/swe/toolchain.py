"""The pinned pytest that grades `rlgym/SWE-v0`, installed once into a cache folder the sandbox mounts read-only.

    site = ensure_pytest()     # ~/.cache/rlgym/swe/pytest-<hash>/ (RLGYM_SWE_CACHE moves the cache)

The wheels are fetched by `pip download --require-hashes` (every file checked against the sha256
below) and unpacked with `pip install --target`; grading itself never uses the network. The box
sees the folder at the same path on both backends (`read_only_mounts`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rlgym_llm.core.errors import RlgymError

# pytest 9.0.3 and its dependencies for Python 3.11 (the host's and the sandbox image's), all pure Python.
PYTEST_REQUIREMENTS = """\
pytest==9.0.3 --hash=sha256:2c5efc453d45394fdd706ade797c0a81091eccd1d6e4bccfcd476e2b8e0ab5d9
iniconfig==2.3.1 --hash=sha256:9121e2c1fdb355232495be3194c8dfe87ccc2d5dee45947b78e68f499790d7a7
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
pluggy==1.7.0 --hash=sha256:7dd7b0d8832ba3cb632c306926ded123429211b83641b35dc5c41ad2d34f9bec
pygments==2.21.0 --hash=sha256:2363c69b61c4a97c838da3b130dcd6468f4848992b21a82f2a63ec34377137d9
"""
PYTEST_VERSION = "9.0.3"


class ToolchainError(RlgymError):
    """The pinned test toolchain could not be fetched or installed (network, pip, disk)."""


def cache_dir() -> Path:
    """Where SWE-v0 keeps its toolchain and fetched sources (`RLGYM_SWE_CACHE`, else ~/.cache/rlgym/swe)."""
    return Path(os.environ.get("RLGYM_SWE_CACHE") or Path.home() / ".cache" / "rlgym" / "swe")


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on `path` (concurrent processes install the same folder once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"`pip {' '.join(args[:2])}` failed: {proc.stderr.strip()[-1500:]}")


def install_requirements(requirements: str, name: str) -> Path:
    """A folder holding exactly the hash-pinned wheels of `requirements`, installed with `pip --target`.

    The folder is named after the requirements' hash, so a changed pin installs anew; an installed
    folder is reused without touching the network.

    Raises:
        ToolchainError: pip could not download (no network, hash mismatch) or install the wheels.
    """
    digest = hashlib.sha256(requirements.encode()).hexdigest()[:12]
    target = cache_dir() / f"{name}-{digest}"
    if (target / ".complete").exists():
        return target
    with _locked(cache_dir() / f".{name}-{digest}.lock"):
        if (target / ".complete").exists():
            return target
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            req = Path(tmp, "requirements.txt")
            req.write_text(requirements)
            wheels, site = Path(tmp, "wheels"), Path(tmp, "site")
            _pip(
                "download",
                "--quiet",
                "--require-hashes",
                "--no-deps",
                "--only-binary",
                ":all:",
                "-r",
                str(req),
                "-d",
                str(wheels),
            )
            _pip(
                "install",
                "--quiet",
                "--no-index",
                "--no-deps",
                "--target",
                str(site),
                *map(str, sorted(wheels.iterdir())),
            )
            (site / ".complete").write_text(requirements)
            site.chmod(0o755)  # the box's user (another uid) reads it
            shutil.rmtree(target, ignore_errors=True)
            site.rename(target)
    return target


def ensure_pytest() -> Path:
    """The folder holding the pinned pytest (installed on first use; see the module docstring)."""
    return install_requirements(PYTEST_REQUIREMENTS, f"pytest-{PYTEST_VERSION}")
