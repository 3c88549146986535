"""Per-step metrics: one JSON object per line in `metrics.jsonl`, plus TensorBoard (the `tb` extra)
and Weights & Biases (the `wandb` extra) when asked for, every numeric field under the same name in each.

A resumed run first cuts the file back to the checkpoint's step, so the stream has each step once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlgym_llm.core.errors import MissingDependencyError

logger = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN/inf
    return value


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The fields of a record that TensorBoard and W&B get: numbers (not flags, not `step`)."""
    return {
        k: float(v)
        for k, v in record.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step" and math.isfinite(v)
    }


class MetricsLog:
    """Append step records to `<out_dir>/metrics.jsonl`; TensorBoard scalars under `<out_dir>/tb` and a
    W&B run under `<out_dir>/wandb` when enabled.

    Args:
        out_dir: the run folder.
        tensorboard: write TensorBoard event files (`pip install 'rlgym-llm[tb]'`); without the
            package a warning says so and the run goes on.
        wandb: keyword arguments of `wandb.init` (project, name, config, ...), or None for no W&B.
            `WANDB_MODE=offline` keeps the run on disk (`wandb sync` uploads it later). The run's id
            is kept in `<out_dir>/wandb_run_id`, so a resumed training continues the same W&B run.

    Raises:
        MissingDependencyError: `wandb` asked for but not installed.
    """

    def __init__(self, out_dir: str | Path, tensorboard: bool = True, wandb: Mapping[str, Any] | None = None):
        out = Path(out_dir)
        self.path = out / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb: Any = None
        self._wandb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(out / "tb"))
            except ImportError:
                logger.warning(
                    "tensorboard is not installed, so %s/tb is not written; pip install 'rlgym-llm[tb]' "
                    "(or log.tensorboard=false)",
                    out,
                )
        if wandb is not None:
            self._wandb = _start_wandb(out, dict(wandb))

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
        step, values = int(record["step"]), scalars(record)
        if self._tb is not None:
            for key, value in values.items():
                self._tb.add_scalar(key, value, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def read(self) -> list[dict[str, Any]]:
        """Every record so far."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def _start_wandb(out: Path, kwargs: dict[str, Any]) -> Any:
    try:
        import wandb
    except ImportError as e:
        raise MissingDependencyError.of(e, "log.wandb=true", default="wandb") from e
    id_file = out / "wandb_run_id"
    run_id = id_file.read_text().strip() if id_file.exists() else uuid.uuid4().hex[:8]
    id_file.write_text(run_id)
    (out / "wandb").mkdir(exist_ok=True)
    kwargs["name"] = kwargs.get("name") or out.name
    logger.info("W&B run %s (mode %s)", run_id, os.environ.get("WANDB_MODE", "online"))
    return wandb.init(dir=str(out), id=run_id, resume="allow", **kwargs)
