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
    "trl_grpo.py": ('{"clip_ratio', "trl_grpo: 2 steps, 8 rollouts of 2 tasks on toy/Counter-v0"),
}


def test_there_are_examples():
    assert {p.name for p in EXAMPLES} >= set(EXPECTED)


# Examples that load a real 135M-parameter model: the slow tier, with room for the one-time GGUF conversion.
HEAVY = {"smollm2_train.py"}
# Examples that train (a few seconds to a minute): the slow tier.
SLOW = {"trl_grpo.py"}


def _param(path):
    marks = [pytest.mark.slow, pytest.mark.timeout(1200)] if path.name in HEAVY else []
    marks += [pytest.mark.slow] if path.name in SLOW else []
    return pytest.param(path, id=path.name, marks=marks)


@pytest.mark.parametrize("path", [_param(p) for p in EXAMPLES])
def test_example_runs(path):
    limit = 1100 if path.name in HEAVY else 240
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=limit, cwd=path.parent)
    assert out.returncode == 0, f"{path.name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    lines = out.stdout.strip().splitlines()
    assert lines, f"{path.name} printed nothing"
    if path.name in EXPECTED:
        first, last = EXPECTED[path.name]
        assert lines[0].startswith(first) and lines[-1] == last, out.stdout
