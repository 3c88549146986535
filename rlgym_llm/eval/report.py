"""Write an evaluation to disk: `eval.json` (every number), `report.md` (tables + plots) and the PNG plots.

Every file states the distinct tasks next to the episodes: the distinct task is the unit of the
statistics (`rlgym_llm.eval.runner`), so a report over 5 distinct tasks never reads like one over 64.
Every file also counts the episodes whose grade the env voided because it caught forgery (0 when none),
with their reasons, so caught forgery is never hidden among ordinary zeros.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from rlgym_llm.eval.plots import plot_pass_at_k, plot_scores
from rlgym_llm.eval.runner import EvalResult

JSON_NAME, MARKDOWN_NAME = "eval.json", "report.md"
PASS_AT_K_PNG, SCORES_PNG = "pass_at_k.png", "scores.png"


def write_report(
    result: EvalResult, out_dir: str | os.PathLike, command: str | None = None, plots: bool = True
) -> dict[str, Path]:
    """Write the JSON, the Markdown report and (if `plots`) the two PNGs into `out_dir`.

    Args:
        result: what `evaluate` returned.
        out_dir: the folder (created if missing).
        command: the shell command that regenerates this report; stated at the top of the report.
        plots: draw the PNGs (needs matplotlib, the `eval` extra).

    Returns:
        name -> path of every file written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    if command:
        data["command"] = command
    files = {"json": out / JSON_NAME, "markdown": out / MARKDOWN_NAME}
    files["json"].write_text(json.dumps(data, indent=1) + "\n")
    if plots:
        files["pass_at_k"] = plot_pass_at_k([result], out / PASS_AT_K_PNG)
        files["scores"] = plot_scores(result, out / SCORES_PNG)
    files["markdown"].write_text(render_markdown(result, command, plots))
    return files


def render_markdown(result: EvalResult, command: str | None = None, plots: bool = True) -> str:
    """The Markdown report of one evaluation."""
    pct = round(100 * result.success.confidence)
    cfg = result.config
    lines = [f"# Evaluation: {result.policy or 'policy'} on {result.env_id}", ""]
    if command:
        lines += ["Regenerate with:", "", "```bash", command, "```", ""]
    note = result.few_tasks_note()
    lines += [
        f"**{result.scope}** ({result.provenance()}); "
        f"temperature {cfg.get('temperature', '?')}, max {cfg.get('max_turns', '?')} turns, "
        f"{cfg.get('max_tokens', '?')} tokens per turn; success = reward >= {cfg.get('success_threshold', 1.0)}. "
        f"Failed episodes: {result.failed_episodes} (scored 0). "
        f"Voided by the env (caught forgery): {result.voided_episodes} ({100 * result.voided_share:.1f}%).",
        "",
        *([f"Note: {note}.", ""] if note else []),
        f"## Aggregates ({pct}% bootstrap CIs over the {result.num_tasks} distinct tasks, "
        f"{cfg.get('bootstrap', {}).get('reps', '?')} resamples)",
        "",
        "Each distinct task is scored first (its success rate, its mean reward), then the scores are aggregated;",
        "the intervals resample distinct tasks.",
        "",
        "| metric | estimate | CI low | CI high |",
        "|---|---|---|---|",
    ]
    for name, est in [
        ("success (mean)", result.success),
        ("success (IQM)", result.success_iqm),
        ("reward (mean)", result.reward_mean),
        ("reward (IQM)", result.reward_iqm),
    ]:
        lines.append(f"| {name} | {est.point:.3f} | {est.low:.3f} | {est.high:.3f} |")
    ks = sorted(result.pass_at_k)
    ci = result.pass_at_k_ci
    lines += [
        "",
        f"## pass@k (unbiased estimator, mean over the {result.num_tasks} distinct tasks)",
        "",
        "| | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
        "| pass@k | " + " | ".join(f"{result.pass_at_k[k]:.3f}" for k in ks) + " |",
        *(
            [f"| {pct}% CI | " + " | ".join(f"[{ci[k].low:.3f}, {ci[k].high:.3f}]" for k in ks) + " |"]
            if all(k in ci for k in ks)
            else []
        ),
        "",
    ]
    if plots:
        lines += ["![pass@k](pass_at_k.png)", "", "![scores](scores.png)", ""]
    kinds = ", ".join(f"{k}: {v}" for k, v in result.failures.items())
    st = result.stats
    lines += [
        "## Failures and throughput",
        "",
        f"Failed episodes by kind: {kinds}.",
        "Episodes cut off by the rollout's limits (not by the env): "
        + (", ".join(f"{k}: {v}" for k, v in sorted(result.truncations.items())) or "none")
        + ".",
        f"Grades voided by the env because it caught forgery (scored as it paid them, 0; not failures): "
        f"{result.voided_line()}.",
        f"{int(st.get('turns', 0))} turns in {st.get('wall_s', 0.0):.1f} s "
        f"({st.get('episodes_per_s', 0.0):.2f} episodes/s, {st.get('tokens_per_s', 0.0):.0f} generated tokens/s).",
        "",
        f"## Per distinct task ({result.num_tasks})",
        "",
        f"| seeds | task | successes | mean reward | mean turns | pass@{ks[-1]} | failures | voided |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in result.tasks:
        turns = sum(t.turns) / max(len(t.turns), 1)
        fails = "; ".join(sorted(set(t.failures))) or "-"
        task = (t.task_id or "-").replace("|", "\\|")  # a pipe would split the table cell
        seeds = ", ".join(str(s) for s in t.seeds or [t.seed])
        lines.append(
            f"| {seeds} | {task} | {sum(t.successes)}/{len(t.successes)} | "
            f"{sum(t.rewards) / len(t.rewards):.3f} | {turns:.1f} | {t.pass_at_k(ks[-1]):.3f} | {fails} | {t.voided} |"
        )
    return "\n".join(lines) + "\n"
