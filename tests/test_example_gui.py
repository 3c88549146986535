"""Smoke test of examples/custom_gui_app.py: a user-defined app registers, and the oracle solves it."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_gui_app.py"


def test_custom_gui_app_example_runs_and_the_oracle_solves_it():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, last = out.stdout.strip().splitlines()
    assert first.startswith("In Thermostat, set the mode to ")
    assert last.startswith("solved in ") and "reward=1.0" in last and "'done_called': 1.0" in last
    assert len(EXAMPLE.read_text().splitlines()) < 60
