"""docs/adding_an_env.md's example env and its test run as written (one file plus its test), and its
training commands (with an oracle, without one) run, on a smaller budget."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "adding_an_env.md"


def _files(into: Path) -> dict[str, str]:
    """The guide's `python file=NAME` blocks, written to `into`."""
    files = dict(re.findall(r"```python file=(\S+)\n(.*?)```", GUIDE.read_text(), re.DOTALL))
    for name, code in files.items():
        (into / name).write_text(code)
    return files


def _env(folder: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}


def test_guide_env_and_its_test_pass(tmp_path):
    files = _files(tmp_path)
    assert {"anagram.py", "test_anagram.py", "anagram_oracle.py"} <= set(files)
    assert len(files["anagram.py"].strip().splitlines()) < 60, "the guide's env should stay short"
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_anagram.py"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "3 passed" in out.stdout


def _train_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith("rlgym train")]


def test_the_guide_trains_with_an_oracle_and_without_one():
    commands = _train_commands()
    assert any("env.oracle=anagram_oracle:AnagramOracle" in c for c in commands)
    assert any("sft.enabled=false" in c and "policy.model=" not in c for c in commands)
    assert any("sft.enabled=false" in c and "policy.model=smollm2" in c for c in commands)


# The guide's budgets, cut to seconds: its commands' overrides, then these (by key).
SMALL = {
    "sft.episodes": "8",
    "sft.steps": "3",
    "sft.batch_size": "4",
    "trainer.steps": "1",
    "trainer.tasks_per_step": "2",
    "trainer.group_size": "2",
    "trainer.eval_tasks": "2",
    "policy.sampling.max_tokens": "8",
    "env.max_turns": "2",
    "progress": "false",
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("which", ["oracle", "tiny without oracle", "smollm2 without oracle"])
def test_the_guides_train_commands_run(tmp_path, which):
    _files(tmp_path)
    command = next(
        c
        for c in _train_commands()
        if {
            "oracle": "env.oracle=" in c,
            "tiny without oracle": "sft.enabled=false" in c and "policy.model=" not in c,
            "smollm2 without oracle": "policy.model=smollm2" in c,
        }[which]
    )
    overrides = dict(o.split("=", 1) for o in shlex.split(command)[2:])
    overrides.update(SMALL, out_dir=str(tmp_path / "run"))
    argv = [sys.executable, "-m", "rlgym_llm.cli.main", "train", *(f"{k}={v}" for k, v in overrides.items())]
    out = subprocess.run(argv, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=1100)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "rlgym train: me/Anagram-v0" in out.stdout
    assert ("SFT warm-up: 3 steps on 8 oracle episodes" in out.stdout) == (which == "oracle")
    if which == "tiny without oracle":  # as the guide says: random weights, tied groups, no update
        assert "no update happened" in out.stdout
