"""Report plots (matplotlib, Agg backend: no display needed): the pass@k curve and the score distribution."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlgym_llm.core.errors import MissingDependencyError
from rlgym_llm.eval.runner import EvalResult


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as e:
        raise MissingDependencyError.of(e, "the plots of `rlgym eval`", "eval", default="matplotlib") from e
    matplotlib.use("Agg")  # headless; set before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def _label(result: EvalResult) -> str:
    """Names the result and its counts: distinct tasks are the unit, episodes are not."""
    name = f"{result.policy} ({result.env_id})" if result.policy else result.env_id
    return f"{name}: {result.scope}"


def plot_pass_at_k(results: Sequence[EvalResult], path: str | os.PathLike) -> Path:
    """pass@k against k (log2 axis) for one or more results; thin lines are single tasks of a lone result."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for result in results:
        ks = sorted(result.pass_at_k)
        if len(results) == 1:  # per-task curves show how spread the mean is
            for task in result.tasks:
                ax.plot(ks, [task.pass_at_k(k) for k in ks], color="0.8", linewidth=0.8, zorder=1)
        ax.plot(ks, [result.pass_at_k[k] for k in ks], marker="o", linewidth=2, label=_label(result), zorder=2)
    ax.set_xscale("log", base=2)
    all_ks = sorted({k for r in results for k in r.pass_at_k})
    ax.set_xticks(all_ks, [str(k) for k in all_ks])
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("k (attempts)")
    ax.set_ylabel("pass@k (unbiased estimator)")
    n = ", ".join(sorted({str(r.samples) for r in results}))
    # the legend names each result with its distinct tasks and episodes
    ax.set_title(f"pass@k, n = {n} samples per seed" + (" (grey: single tasks)" if len(results) == 1 else ""))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out


def plot_scores(result: EvalResult, path: str | os.PathLike) -> Path:
    """Three panels: per-task success rates, episode rewards, and the aggregates with their CIs."""
    plt = _pyplot()
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(12, 3.8), dpi=120)
    n = max(len(t.successes) for t in result.tasks)  # a task drawn by several seeds has more samples
    rates, freq = np.unique(np.round([t.success_rate for t in result.tasks], 6), return_counts=True)
    a.bar(rates, freq, width=0.8 / max(n, 1), color="tab:blue")  # distinct tasks per success rate
    a.set_xlim(-0.6 / max(n, 1), 1 + 0.6 / max(n, 1))
    a.set_xlabel("success rate of a distinct task (c / n)")
    a.set_ylabel("distinct tasks")
    a.set_title(f"per-task success ({result.num_tasks} distinct tasks)")

    rewards = np.concatenate([t.rewards for t in result.tasks])
    values, freq = np.unique(np.round(rewards, 6), return_counts=True)
    if len(values) <= 12:  # binary or few-valued rewards: one bar per value
        width = 0.8 * float(np.min(np.diff(values))) if len(values) > 1 else 0.1
        b.bar(values, freq, width=width, color="tab:orange")
        if values.min() >= 0 and values.max() <= 1:
            b.set_xlim(-0.1, 1.1)
    else:
        b.hist(rewards, bins=20, color="tab:orange", edgecolor="white")
    b.set_xlabel("final reward of an episode")
    b.set_ylabel("episodes")
    b.set_title(f"reward distribution ({len(rewards)} episodes)")
    from matplotlib.ticker import MaxNLocator

    for ax in (a, b):
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts

    names = ["success\nmean", "success\nIQM", "reward\nmean", "reward\nIQM"]
    ests = [result.success, result.success_iqm, result.reward_mean, result.reward_iqm]
    points = np.array([e.point for e in ests])
    err = np.array([[e.point - e.low for e in ests], [e.high - e.point for e in ests]])
    c.bar(names, points, yerr=err, capsize=6, color=["tab:blue", "tab:blue", "tab:orange", "tab:orange"], alpha=0.8)
    for x, e in enumerate(ests):
        c.annotate(f"{e.point:.2f}", (x, e.high), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    c.set_ylim(0, max(1.05, float(max(e.high for e in ests)) * 1.15))
    c.set_title(f"aggregates, {round(100 * ests[0].confidence)}% CIs over {result.num_tasks} distinct tasks")
    fig.suptitle(_label(result), fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out)
    plt.close(fig)
    return out
