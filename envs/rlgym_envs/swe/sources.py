"""Real projects behind the built `rlgym/SWE-v0` set: sdists pinned by version and sha256, fetched once and cached.

    project = PROJECTS["toolz"]
    root = fetch_sdist(project.requirement, project.sha256)   # ~/.cache/rlgym/swe/sources/<sha256>/toolz-1.0.0

Each sdist includes its test suite. Licenses are recorded beside the built instances
(`data/LICENSES.md`) and in each row (`license`).
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rlgym_envs.swe.toolchain import ToolchainError, _locked, _pip, cache_dir


@dataclass(frozen=True)
class Project:
    """A pure-Python project with its own pytest suite, pinned to one sdist.

    Args:
        name: the PyPI name.
        version: the pinned release.
        sha256: the sdist's hash; a download that differs is refused.
        repo: the upstream repository (SWE-bench's `repo` field).
        license: SPDX id of the project's license.
        package: the source folder or module the bugs go into, relative to the sdist root.
        tests: what pytest runs (folders or files, relative to the sdist root).
        python_path: folders put on sys.path besides the root (`src` layouts).
        skip: test ids left out (they need optional dependencies or the network).
    """

    name: str
    version: str
    sha256: str
    repo: str
    license: str
    package: str
    tests: tuple[str, ...]
    python_path: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"

    @property
    def root(self) -> str:
        """The sdist's top folder."""
        return f"{self.name.replace('-', '_')}-{self.version}"


PROJECTS: dict[str, Project] = {
    p.name: p
    for p in (
        Project(
            "boltons",
            "26.2.0",
            "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
            "mahmoud/boltons",
            "BSD-3-Clause",
            "boltons",
            ("tests",),
        ),
        Project(
            "cachetools",
            "8.0.2",
            "30ac523adfc118b51d2b2e7bad8a0ddb31370dfe2700c7f10ca224f36ccf81e0",
            "tkem/cachetools",
            "MIT",
            "src/cachetools",
            ("tests",),
            python_path=("src",),
        ),
        Project(
            "parse",
            "1.22.4",
            "706d458feed5a81b02768d3156e8070baf6cee7d150a3a3c0cd43101a875c3b5",
            "r1chardj0n3s/parse",
            "MIT",
            "parse",
            ("tests",),
        ),
        Project(
            "semver",
            "3.1.2",
            "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
            "python-semver/python-semver",
            "BSD-3-Clause",
            "src/semver",
            ("tests",),
            python_path=("src", "tests"),
        ),
        Project(
            "more-itertools",
            "11.2.1",
            "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
            "more-itertools/more-itertools",
            "MIT",
            "more_itertools",
            ("tests",),
        ),
        Project(
            "toolz",
            "1.0.0",
            "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02",
            "pytoolz/toolz",
            "BSD-3-Clause",
            "toolz",
            ("toolz/tests",),
        ),
    )
}


def fetch_sdist(requirement: str, sha256: str) -> Path:
    """The unpacked sdist of `requirement` ("name==version"), cached under `cache_dir()/sources/<sha256>`.

    Downloaded on first use with `pip download --require-hashes` (the package index pip is set up with).

    Raises:
        ToolchainError: the download failed or its hash is not `sha256`.
    """
    target = cache_dir() / "sources" / sha256
    if (target / ".complete").exists():
        return target
    with _locked(cache_dir() / "sources" / f".{sha256}.lock"):
        if (target / ".complete").exists():
            return target
        with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
            req = Path(tmp, "requirements.txt")
            req.write_text(f"{requirement} --hash=sha256:{sha256}\n")
            # pip checks the hash; it also prepares the sdist's metadata (needing its build backend).
            _pip(
                "download",
                "--quiet",
                "--require-hashes",
                "--no-deps",
                "--no-binary",
                ":all:",
                "-r",
                str(req),
                "-d",
                tmp,
            )
            (archive,) = Path(tmp).glob("*.tar.gz")
            digest = hashlib.sha256(archive.read_bytes()).hexdigest()
            if digest != sha256:
                raise ToolchainError(f"{archive.name} has sha256 {digest}, expected {sha256}; refusing it")
            unpacked = Path(tmp, "src")
            with tarfile.open(archive) as tar:
                tar.extractall(unpacked, filter="data")  # no absolute paths, links out or devices
            (unpacked / ".complete").write_text(requirement + "\n")
            shutil.rmtree(target, ignore_errors=True)
            target.parent.mkdir(parents=True, exist_ok=True)
            unpacked.rename(target)
    return target
