"""The learning curve of a run: training reward and success per step, with the held-out success
measured before and after training (PNG, matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlgym_llm.core.errors import MissingDependencyError


def _smooth(values: Sequence[float], window: int) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if window <= 1 or x.size < window:
        return x
    kernel = np.ones(window) / window
    head = [x[: i + 1].mean() for i in range(window - 1)]  # a trailing mean that starts at step 0
    return np.concatenate([head, np.convolve(x, kernel, mode="valid")])


def learning_curve(
    records: Sequence[Mapping[str, Any]],
    path: str | Path,
    title: str,
    before: float | None = None,
    after: float | None = None,
) -> Path:
    """Plot `success` and `reward` of each step's rollouts (raw and a 3-step trailing mean).

    Args:
        records: the run's metrics records (with `step`, `success`, `reward`).
        path: the PNG to write.
        title: the figure title.
        before, after: held-out success before and after training, drawn as markers at both ends.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingDependencyError("matplotlib", "train", "the learning-curve plot") from e

    steps = [r["step"] for r in records]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    # success solid, reward dashed: with a 0/1 reward the two coincide and both stay visible
    for key, color, style in (("success", "tab:blue", "-"), ("reward", "tab:orange", "--")):
        values = [r.get(key, 0.0) or 0.0 for r in records]
        ax.plot(steps, values, color=color, alpha=0.3, lw=1, ls=style)
        ax.plot(steps, _smooth(values, 3), color=color, lw=2, ls=style, label=f"train {key} (3-step mean)")
    if before is not None:
        ax.scatter([0], [before], color="black", marker="o", zorder=5, label=f"held-out success before: {before:.2f}")
    if after is not None:
        last = steps[-1] if steps else 0
        ax.scatter([last], [after], color="green", marker="*", s=120, zorder=5, label=f"after: {after:.2f}")
    ax.set_xlabel("RL step (after SFT warm-up)")
    ax.set_ylabel("rate")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
