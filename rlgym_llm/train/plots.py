"""The learning curve of a run: training reward and success per step, with the held-out success
measured before, during (every `eval_every` steps) and after training (PNG, matplotlib)."""

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
    after_sft: bool = False,
) -> Path:
    """Plot `success` and `reward` of each step's rollouts (raw and a 3-step trailing mean).

    Args:
        records: the run's metrics records (with `step`, `success`, `reward`).
        path: the PNG to write.
        title: the figure title.
        before, after: held-out success before and after training; with the records'
            `eval_success` values they make the held-out line.
        after_sft: RL started from an SFT warm-up (said on the x axis).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise MissingDependencyError.of(e, "the learning-curve plot", default="matplotlib") from e

    fig = curve_figure(records, title, before, after, after_sft)
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def curve_figure(
    records: Sequence[Mapping[str, Any]],
    title: str,
    before: float | None = None,
    after: float | None = None,
    after_sft: bool = False,
) -> Any:
    """The matplotlib figure of `learning_curve` (the caller closes it)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = [r["step"] for r in records]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    # success solid, reward dashed: with a 0/1 reward the two coincide and both stay visible
    for key, color, style in (("success", "tab:blue", "-"), ("reward", "tab:orange", "--")):
        values = [r.get(key, 0.0) or 0.0 for r in records]
        ax.plot(steps, values, color=color, alpha=0.3, lw=1, ls=style, zorder=3)
        ax.plot(steps, _smooth(values, 3), color=color, lw=2, ls=style, zorder=4, label=f"train {key} (3-step mean)")
    # held-out success: before training (step 0), every periodic evaluation, after training
    held = [(r["step"], r["eval_success"]) for r in records if r.get("eval_success") is not None]
    if before is not None:
        held.insert(0, (0, before))
    if after is not None and not (held and held[-1][0] == (steps[-1] if steps else 0)):
        held.append((steps[-1] if steps else 0, after))
    if held:
        xs, ys = zip(*held)
        label = "held-out success" + (f": {ys[0]:.2f} -> {ys[-1]:.2f}" if len(ys) > 1 else f": {ys[0]:.2f}")
        # under the training lines, dotted, with its points marked: where they meet, both stay visible
        ax.plot(xs, ys, color="green", marker="o", ms=5, lw=1.5, ls=":", alpha=0.8, zorder=2, label=label)
    ax.set_xlabel("RL step (after SFT warm-up)" if after_sft else "RL step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel("rate")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    return fig
