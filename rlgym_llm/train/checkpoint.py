"""Checkpoints that resume exactly: weights, optimizer, schedule, RNG states, step and data cursor.

A checkpoint is a folder `step_000012/` holding `trainer.pt` (torch state) and `state.json` (step,
data cursor, config, metrics so far). It is written to a temporary folder and renamed, so a run killed
mid-save never leaves a half-written checkpoint behind; `latest()` finds the newest complete one.

The model and optimizer state is the strategy's (`train.strategy`): in `trainer.pt` (single, DDP:
rank 0 writes the whole state), or sharded under `dcp/` by `torch.distributed.checkpoint` (FSDP:
every rank writes its shards), which loads on any number of ranks. With several processes every
rank calls `save` and `load`; rank 0 alone writes `trainer.pt` and `state.json`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

    from rlgym_llm.train.strategy import Strategy

_DONE = "state.json"  # written last: a folder without it is incomplete


def rng_state() -> dict[str, Any]:
    """Every RNG a training step draws from (Python, NumPy's global, torch CPU and CUDA)."""
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import torch

    random.setstate(_tuplify(state["python"]))
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _tuplify(x: Any) -> Any:
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x


def save(
    directory: str | os.PathLike,
    step: int,
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    extra: dict[str, Any] | None = None,
    keep: int | None = None,
    torch_extra: dict[str, Any] | None = None,
    strategy: Strategy | None = None,
) -> Path:
    """Save a checkpoint for `step` under `directory`; keep only the newest `keep` ones if given.

    Args:
        directory: the run's checkpoint folder.
        step: the number of completed optimizer steps.
        model: the policy; its trainable state (`state_dict`) is saved.
        optimizer, scheduler: their `state_dict`s are saved.
        extra: JSON-serialisable state (data cursor, config, metrics history, ...).
        keep: how many checkpoints to keep (None: all).
        torch_extra: more torch state (e.g. a credit model's `state_dict`), returned by `load`
            under "torch_extra".
        strategy: writes the model and optimizer state (default: `Single`, whole in `trainer.pt`);
            with several ranks every rank calls `save`.
    """
    import torch

    from rlgym_llm.train.strategy import Single

    strategy = strategy or Single()
    dist = strategy.dist
    root = Path(directory)
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}_{dist.broadcast(os.getpid())}"  # rank 0's name on every rank
    if dist.main:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    strategy.barrier()
    states = strategy.save_state(tmp, model, optimizer)  # every rank: FSDP writes its shards now
    strategy.barrier()
    if dist.main:
        torch.save(
            {**states, "scheduler": scheduler.state_dict(), "rng": rng_state(), "extra": torch_extra or {}},
            tmp / "trainer.pt",
        )
        (tmp / _DONE).write_text(json.dumps({"step": step, **(extra or {})}, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if keep is not None:
            for old in sorted(p for p in root.glob("step_*") if (p / _DONE).exists())[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    strategy.barrier()  # the other ranks return once the checkpoint is complete
    return final


def latest(directory: str | os.PathLike) -> Path | None:
    """The newest complete checkpoint under `directory`, or None."""
    root = Path(directory)
    done = sorted(p for p in root.glob("step_*") if (p / _DONE).exists()) if root.exists() else []
    return done[-1] if done else None


def load(
    path: str | os.PathLike,
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    strategy: Strategy | None = None,
) -> dict[str, Any]:
    """Restore a checkpoint in place (weights, optimizer, schedule, RNGs), written by any strategy
    on any number of ranks (`strategy` reads it: default `Single`; every rank calls `load`).

    Returns:
        Its `state.json`, plus the saved `torch_extra` under "torch_extra".
    """
    import torch

    from rlgym_llm.train.strategy import Single

    path = Path(path)
    state = torch.load(path / "trainer.pt", weights_only=False, map_location="cpu")  # copied to the model's device
    (strategy or Single()).load_state(path, state, model, optimizer)
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return {**json.loads((path / _DONE).read_text()), "torch_extra": state.get("extra", {})}
