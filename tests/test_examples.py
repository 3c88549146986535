"""Every single-file example runs to completion (STYLE: examples are single files that CI runs)."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))

# What an example must print, beyond running cleanly: (first line starts with, last line).
EXPECTED = {
    "custom_env.py": (
        "example/Sum-v0: 5 checks passed",
        "outcome: {'reward': 1.0, 'components': {'correct': 1.0}}",
    ),
}


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= set(EXPECTED)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path):
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=240, cwd=path.parent)
    assert out.returncode == 0, f"{path.name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    lines = out.stdout.strip().splitlines()
    assert lines, f"{path.name} printed nothing"
    if path.name in EXPECTED:
        first, last = EXPECTED[path.name]
        assert lines[0].startswith(first) and lines[-1] == last, out.stdout
