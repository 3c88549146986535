"""Results files shared by the peer benchmarks."""

from __future__ import annotations

from pathlib import Path

ANALYSIS = "\n## Analysis"


def write_markdown(md: Path, lines: list[str]) -> None:
    """Write a regenerated results table, keeping the hand-written `## Analysis` section of the old file."""
    old = md.read_text() if md.exists() else ""
    analysis = old.split(ANALYSIS, 1)[1] if ANALYSIS in old else ""
    md.write_text("\n".join(lines) + (ANALYSIS + analysis if analysis else ""))
