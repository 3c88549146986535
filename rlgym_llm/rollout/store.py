"""Trajectories stream to JSONL: one trajectory per line, flushed as each episode ends."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from rlgym_llm.core.types import Trajectory


class TrajectoryWriter:
    """Append trajectories to a JSONL file (created with its parent folders)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        self.count = 0

    def write(self, trajectory: Trajectory) -> None:
        if self._file is None:
            raise ValueError(f"writer for {self.path} is closed")
        self._file.write(json.dumps(trajectory.to_dict(), ensure_ascii=False) + "\n")
        self._file.flush()  # a crash loses at most the line being written
        self.count += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trajectories(path: str | os.PathLike) -> Iterator[Trajectory]:
    """Read back a JSONL file written by `TrajectoryWriter` (a bad line raises, naming it)."""
    with Path(path).open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Trajectory.from_dict(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{lineno}: not a trajectory ({type(e).__name__}: {e})") from e
