"""docs/adding_an_env.md's example env and its test run as written (one file plus its test)."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "adding_an_env.md"


def test_guide_env_and_its_test_pass(tmp_path):
    blocks = re.findall(r"```python[^\n]*\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    env_code, test_code = blocks
    (tmp_path / "anagram.py").write_text(env_code)
    (tmp_path / "test_anagram.py").write_text(test_code)
    assert len(env_code.strip().splitlines()) < 60, "the guide's env should stay short"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_anagram.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "3 passed" in out.stdout
