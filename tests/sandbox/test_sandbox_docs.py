"""docs/sandbox.md stays true: its example runs, and every test its attack table names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "sandbox.md").read_text()


def test_the_example_runs():
    (block,) = re.findall(r"```python\n(.*?)```", DOC, flags=re.S)
    exec(compile(block, "docs/sandbox.md", "exec"), {"__name__": "docs_sandbox"})


def test_every_test_the_doc_names_exists():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    table = DOC.split("## The attack suite", 1)[1]
    names = set(re.findall(r"`(?:[\w/]+\.py::)?((?:test_|Test)\w+)`", table))
    assert len(names) >= 15
    missing = sorted(n for n in names if not re.search(rf"\b(def|class) {n}\b", sources))
    assert missing == []
