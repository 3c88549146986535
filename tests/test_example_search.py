"""Smoke test of examples/custom_search_corpus.py: it runs as a script and its episode succeeds."""

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_search_corpus.py"


def test_custom_search_corpus_example_runs_and_solves_its_question():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "answered 'Kessport': reward=1.0" in out.stdout
    assert "'subgoals': [1, 1]" in out.stdout
    assert len(EXAMPLE.read_text().splitlines()) < 60
