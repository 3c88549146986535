"""Before/after RL on the test pool over finished `rlgym train` runs, one run per seed.

    python benchmarks/learning/paired_report.py runs/exp/smol_s0 runs/exp/smol_s1 \
        --title "SmolLM2-135M on Math-v0 level 0" --command "rlgym train +experiment=smollm2_math seed=<s>" \
        --out benchmarks/results/learning/smollm2_math

Each run folder's `summary.json` holds test-pool success before and after RL (the same tasks and
sampling seeds). The unit is the run (a seed): the paired difference after - before per run, with a
bootstrap and a paired t interval over runs (`rlgym_llm.eval.paired_seed_comparison`); a gain is
claimed only when both intervals lie above 0. The report states the distinct test tasks and the
episodes of each measure, the start (the warm-up each run made) and the wall time.

Where the runs' summaries hold per-task outcomes (`outcomes`, written since 2026-12-07), the report
also takes the **task** as the unit: each (run, task) cell is the task's success after minus before
in that run (several episodes of a task are one cell), and a two-way bootstrap resamples the runs and
the tasks together, so the interval covers the draw of the test tasks as well as the seeds.
Writes `<out>.md` and `<out>.json`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from rlgym_llm.eval import paired_seed_comparison, run_task_bootstrap, task_outcome_cells


def load(folder: Path) -> dict[str, Any]:
    """One run's row: seed, before/after success, task and episode counts, the warm-up, wall time."""
    summary_path = folder / "summary.json"
    if not summary_path.exists():
        raise SystemExit(f"{folder}: no summary.json (the run has not finished)")
    s = json.loads(summary_path.read_text())
    config = (folder / "config.yaml").read_text() if (folder / "config.yaml").exists() else ""
    seed = next((line.split(":", 1)[1].strip() for line in config.splitlines() if line.startswith("seed:")), "?")
    before, after = s["before"], s["after"]
    if (before["tasks"], before["episodes"]) != (after["tasks"], after["episodes"]):
        raise SystemExit(f"{folder}: before and after were measured on different task sets")
    return {
        "run": str(folder),
        "seed": seed,
        "before": before["success"],
        "after": after["success"],
        "gain": after["success"] - before["success"],
        "tasks": before["tasks"],
        "episodes": before["episodes"],
        "sft": s.get("sft"),
        "train_success_first": s.get("train_success_first"),
        "train_success_last": s.get("train_success_last"),
        "wall_s": s.get("total_wall_s", s.get("wall_s")),
        "outcomes": (before.get("outcomes"), after.get("outcomes")),
    }


def task_unit_interval(
    outcomes: list[tuple[dict[str, list[int]], dict[str, list[int]]]], n_boot: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """The gain with the task as the unit: `cells[r, t]` = task t's success after minus before in run
    r (the mean of its episodes); the mean over cells, and a 95 % percentile interval of a two-way
    bootstrap that resamples runs and tasks independently (`rlgym_llm.eval.run_task_bootstrap`).
    `outcomes`: per run, (before, after) maps of task key -> 1/0 per episode.

    Raises:
        ValueError: the runs measured different tasks, or a run's before and after differ in tasks.
    """
    cells = task_outcome_cells([(a, b) for b, a in outcomes])
    ci = run_task_bootstrap(cells, reps=n_boot, seed=seed)
    return {"diff": ci.point, "low": ci.low, "high": ci.high, "runs": cells.shape[0], "tasks": cells.shape[1]}


def report(rows: list[dict[str, Any]], title: str, command: str) -> tuple[str, dict[str, Any]]:
    cmp = paired_seed_comparison([r["after"] for r in rows], [r["before"] for r in rows])
    gain = cmp.low > 0 and cmp.t_low > 0
    sft = rows[0]["sft"] or {}
    lines = [
        f"# {title}: test-pool success before and after RL",
        "",
        f"Runs: `{command}`, one per seed; report: `python {shlex.join(sys.argv)}`. "
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"Start: each run's own warm-up on the env's oracle (train pool): {sft.get('episodes')} demonstrations, "
        f"{sft.get('steps')} steps (loss {sft.get('loss_first', float('nan')):.3f} -> "
        f"{sft.get('loss_last', float('nan')):.3f} for the first run). Success is measured on the **test pool** "
        "(content no warm-up or RL step sees), the same tasks and sampling seeds before and after RL. "
        "The paired interval is over seeds (the runs); every run measures the same test tasks, so it "
        "does not cover the draw of those tasks (the task-unit interval below does, where the runs kept "
        "per-task outcomes).",
        "",
        "| seed | before RL | after | gain | distinct test tasks | episodes | training success first -> last 3 | wall s |",
        "|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['gain']:+.3f} | {r['tasks']} | {r['episodes']} | "
            f"{r['train_success_first']:.3f} -> {r['train_success_last']:.3f} | {r['wall_s']:.0f} |"
        )
    lines += [
        "",
        f"Paired over {cmp.n} seeds (after - before): mean {cmp.diff:+.3f}, bootstrap 95% CI "
        f"[{cmp.low:+.3f}, {cmp.high:+.3f}], paired t 95% CI [{cmp.t_low:+.3f}, {cmp.t_high:+.3f}], "
        f"sd {cmp.sd:.3f}, MDD {cmp.mdd:.3f}. "
        + ("**Gain: both intervals above 0.**" if gain else "**No significant gain** (both intervals above 0: False)."),
        "",
    ]
    per_task = [r["outcomes"] for r in rows]
    by_task = None
    if all(b and a for b, a in per_task):
        by_task = task_unit_interval(per_task)
        lines += [
            f"Task as the unit ({by_task['tasks']} distinct test tasks x {by_task['runs']} runs; two-way "
            f"bootstrap over runs and tasks): mean {by_task['diff']:+.3f}, 95% CI [{by_task['low']:+.3f}, "
            f"{by_task['high']:+.3f}].",
            "",
        ]
    else:
        lines += ["Task as the unit: not computed (these runs' summaries hold no per-task outcomes).", ""]
    runs = [{k: v for k, v in r.items() if k != "outcomes"} for r in rows]
    data = {
        "title": title,
        "command": command,
        "runs": runs,
        "paired": dataclasses.asdict(cmp),
        "gain": gain,
        "task_unit": by_task,
    }
    return "\n".join(lines), data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, help="finished `rlgym train` run folders, one per seed")
    parser.add_argument("--title", required=True)
    parser.add_argument("--command", required=True, help="the command each run was (for the report)")
    parser.add_argument("--out", required=True, type=Path, help="writes <out>.md and <out>.json")
    args = parser.parse_args()
    text, data = report([load(f) for f in args.runs], args.title, args.command)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    print(text)


if __name__ == "__main__":
    main()
