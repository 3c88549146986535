"""Per-step metrics: one JSON object per line in `metrics.jsonl`, and TensorBoard when it is installed.

A resumed run first cuts the file back to the checkpoint's step, so the stream has each step once.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    return value


class MetricsLog:
    """Append step records to `<out_dir>/metrics.jsonl` (and TensorBoard scalars under `<out_dir>/tb`).

    Args:
        out_dir: the run folder.
        tensorboard: write TensorBoard event files too when `torch.utils.tensorboard` imports.
    """

    def __init__(self, out_dir: str | Path, tensorboard: bool = True):
        self.path = Path(out_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(Path(out_dir) / "tb"))
            except ImportError:  # tensorboard is optional
                logger.debug("tensorboard is not installed; metrics go to %s only", self.path)

    def truncate(self, last_step: int) -> None:
        """Keep only records with `step <= last_step` (a resume from that step's checkpoint)."""
        if not self.path.exists():
            return
        kept = [line for line in self.path.read_text().splitlines() if json.loads(line)["step"] <= last_step]
        self.path.write_text("".join(line + "\n" for line in kept))

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record; it must hold an integer `step`."""
        row = {k: _clean(v) for k, v in record.items()}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for key, value in row.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool) and key != "step":
                    self._tb.add_scalar(key, value, int(record["step"]))
            self._tb.flush()

    def read(self) -> list[dict[str, Any]]:
        """Every record so far."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
