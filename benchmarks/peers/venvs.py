"""One virtual environment per peer, created and filled by the benchmark itself (idempotent).

    python benchmarks/peers/venvs.py gem skyrl trl     # create / update them now (optional)

Each peer `NAME` has `benchmarks/peers/requirements-NAME.txt`; its venv lives in
`benchmarks/peers/.venvs/NAME` (gitignored). A stamp file records a hash of the requirements and of
the base interpreter: when both match, nothing is installed. torch, where listed, is installed first
and alone, with its exact pin, so no later resolution can widen it to a CUDA build. Packages come from
PyPI through pip (the machine's pip configuration applies).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENVS = HERE / ".venvs"


def _requirements(name: str) -> tuple[Path, list[str]]:
    path = HERE / f"requirements-{name}.txt"
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return path, [ln for ln in lines if ln]


def python_of(name: str) -> Path:
    """The venv's interpreter (called directly: a shim on PATH would add ~100 ms per launch)."""
    return VENVS / name / "bin" / "python"


def ensure(name: str, quiet: bool = True) -> Path:
    """Create or update the venv of peer `name` and return its interpreter."""
    path, reqs = _requirements(name)
    stamp_text = hashlib.sha256((path.read_text() + sys.version + sys.base_prefix).encode()).hexdigest()
    root, py = VENVS / name, python_of(name)
    stamp = root / ".rlgym-bench-stamp"
    if py.exists() and stamp.exists() and stamp.read_text() == stamp_text:
        return py
    t0 = time.perf_counter()
    print(f"[venvs] installing {name} into {root} ...", file=sys.stderr, flush=True)
    if not py.exists():
        # sys.executable may itself be a venv: create from the base interpreter.
        base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
        subprocess.run([str(base if base.exists() else sys.executable), "-m", "venv", str(root)], check=True)
    pip = [str(py), "-m", "pip", "install", "--disable-pip-version-check"] + (["--quiet"] if quiet else [])
    torch_pins = [r for r in reqs if r.split("=")[0].split("[")[0].strip() == "torch"]
    if torch_pins:
        subprocess.run([*pip, *torch_pins], check=True)
    rest = [r for r in reqs if r not in torch_pins]
    # Keep the torch pin in the second call too, so nothing can upgrade it.
    subprocess.run([*pip, *torch_pins, *rest], check=True)
    stamp.write_text(stamp_text)
    print(f"[venvs] {name} ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return py


def versions(name: str, packages: list[str]) -> dict[str, str]:
    """Installed versions of `packages` in peer `name`'s venv."""
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try: out[p] = m.version(p)\n"
        "    except m.PackageNotFoundError: out[p] = 'absent'\n"
        "print(json.dumps(out))\n"
    )
    import json

    res = subprocess.run([str(python_of(name)), "-c", code, *packages], check=True, capture_output=True, text=True)
    return json.loads(res.stdout)


if __name__ == "__main__":
    for peer in sys.argv[1:] or ["gem", "skyrl", "trl"]:
        print(ensure(peer, quiet=False))
