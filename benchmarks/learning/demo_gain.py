"""Does the main job (`make demo`: `rlgym train +experiment=demo`) learn on tasks it never trained on?

    python benchmarks/learning/demo_gain.py              # 5 seeds of the main job, then the report (resumable)
    python benchmarks/learning/demo_gain.py --seeds 0 1 2 3 4 5 6 7 --jobs 2
    python benchmarks/learning/demo_gain.py --report     # only the report, from the run folders
    python benchmarks/learning/demo_gain.py --quick      # smoke of this script: a tiny budget, its own folder
    python benchmarks/learning/demo_gain.py --alone      # time the main job alone: every core, nothing else running

Each seed runs the whole main job with nothing changed but `seed=` (and its own run folder): its own
warm-up on the env's oracle (the honest start, train pool), its own RL steps on train-pool tasks, and
success before and after RL on the same test-pool tasks (never trained on; `split=test`) with the same
sampling seeds. The unit is the seed: the paired difference after - before per seed, with a bootstrap
and a paired t interval over seeds (`rlgym_llm.eval.paired_seed_comparison`); the claim holds when
both intervals lie above 0. The report states the distinct test tasks, the episodes, the start, the
wall time and the peak memory of each run.

`--alone` times the main job as `make demo` runs it (every core: no `trainer.threads` override, default
seed), under `/usr/bin/time`, into `<run folders>/alone/`: the wall time and peak RSS that the 10 min
and 2 GB targets of issue 31 are about. Run it with nothing else on the machine; the seeds above share
the cores two at a time and say nothing about the time of one run. Its figures are kept in the JSON,
so `--report` restates them without the folder.

Run folders: `runs/learning/demo_gain/`; results: `benchmarks/results/learning/demo_gain.{md,json}`
(`--quick`: `runs/learning/demo_gain_quick/`, results beside its runs).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import RESULTS, ROOT, _run, is_complete, stop_on_signal

from rlgym_llm.config import load_config
from rlgym_llm.eval import paired_seed_comparison, run_task_bootstrap, task_outcome_cells

QUICK_OVERRIDES = ("sft.steps=5", "sft.episodes=16", "trainer.tasks_per_step=2", "trainer.group_size=4")


@functools.lru_cache(maxsize=4)
def _config(overrides: tuple[str, ...]):
    return load_config("train", list(overrides))


def folder(quick: bool) -> Path:
    return ROOT / "runs" / "learning" / ("demo_gain_quick" if quick else "demo_gain")


PRESET = "+experiment=demo"  # the main job's config (configs/experiment/demo.yaml)


def overrides(quick: bool) -> list[str]:
    return [PRESET, *QUICK_OVERRIDES, "trainer.steps=2", "trainer.eval_tasks=8"] if quick else [PRESET]


def train_cmd(quick: bool, seed: int) -> list[str]:
    path = folder(quick) / f"s{seed}"
    return [
        "/usr/bin/time",
        "-f",
        "peak_rss_kb=%M",
        sys.executable,
        "-m",
        "rlgym_llm.cli.main",
        "train",
        f"seed={seed}",
        *overrides(quick),
        "progress=false",
        "trainer.threads=1",
        f"out_dir={path}",
        *([f"resume={path}"] if (path / "config.yaml").exists() else []),
    ]


def alone_cmd(quick: bool) -> list[str]:
    """The main job as `make demo` runs it (every core), timed by `/usr/bin/time`."""
    return [
        "/usr/bin/time",
        "-f",
        "peak_rss_kb=%M\nelapsed_s=%e",
        sys.executable,
        "-m",
        "rlgym_llm.cli.main",
        "train",
        *overrides(quick),
        "progress=false",
        f"out_dir={folder(quick) / 'alone'}",
    ]


def time_alone(quick: bool) -> int:
    """Run the main job alone (a finished one is kept: delete `<folder>/alone` to time it again)."""
    path = folder(quick) / "alone"
    if is_complete(path, steps(quick)):
        print(f"{path} is finished: delete it to time the main job again", flush=True)
        return 0
    if path.exists():  # a timing is of one whole run: a resumed one would not be
        raise SystemExit(f"{path} holds an unfinished run: delete it, then time the main job again")
    path.parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    with open(path.with_suffix(".log"), "w") as log:
        log.write("$ " + " ".join(alone_cmd(quick)) + "\n")
        log.flush()
        return subprocess.run(alone_cmd(quick), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env).returncode


def collect_alone(quick: bool, stored: dict | None) -> dict | None:
    """The alone run's figures from its folder, else those kept in the JSON (`stored`)."""
    path = folder(quick) / "alone"
    log = path.with_suffix(".log")
    if not (is_complete(path, steps(quick)) and log.exists()):
        return stored
    elapsed = [line for line in log.read_text().splitlines() if line.startswith("elapsed_s=")]
    summary = json.loads((path / "summary.json").read_text())
    return {
        "measured": time.strftime("%Y-%m-%d", time.gmtime(log.stat().st_mtime)),
        "wall_s": float(elapsed[-1].split("=", 1)[1]),
        "peak_mib": _peak_mb(log),
        "before": summary["before"]["success"],
        "after": summary["after"]["success"],
        "tasks": summary["before"].get("tasks"),
    }


def alone_lines(alone: dict | None) -> list[str]:
    if alone is None:
        return ["Alone on the machine: not timed yet (`python benchmarks/learning/demo_gain.py --alone`).", ""]
    wall, peak = alone["wall_s"], alone["peak_mib"]
    return [
        f"Alone on the machine ({alone['measured']}, `python benchmarks/learning/demo_gain.py --alone`: `{PRESET}` as"
        f" `make demo` runs it, every core, nothing else running, `/usr/bin/time`): **{wall:.0f} s wall**"
        f" ({wall / 60:.1f} min; target 600 s: {'met' if wall <= 600 else 'missed'}), **peak RSS {peak:,.0f} MiB**"
        f" ({peak * 2**20 / 1e9:.2f} GB; target 2 GB: {'met' if peak * 2**20 <= 2e9 else 'missed'}); test success"
        f" {alone['before']:.3f} -> {alone['after']:.3f} on {alone['tasks']} distinct test tasks (the default seed).",
        "",
    ]


def steps(quick: bool) -> int:
    return int(_config(tuple(overrides(quick))).trainer.steps)


def grid(quick: bool, seeds: list[int], jobs: int) -> None:
    todo = [s for s in seeds if not is_complete(folder(quick) / f"s{s}", steps(quick))]
    print(f"{len(todo)} runs to do", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: _run(train_cmd(quick, s), folder(quick) / f"s{s}.log"), todo))


def _peak_mb(log: Path) -> float | None:
    if not log.exists():
        return None
    found = [line for line in log.read_text().splitlines() if line.startswith("peak_rss_kb=")]
    return int(found[-1].split("=")[1]) / 1024 if found else None


def results_file(quick: bool) -> Path:
    return (folder(quick) if quick else RESULTS) / "demo_gain.json"


def stored_results(quick: bool) -> dict:
    """The kept JSON if it was made with today's config (runs of another config never mix), else {}."""
    path = results_file(quick)
    data = json.loads(path.read_text()) if path.exists() else {}
    return data if data.get("config") == config_summary(quick) else {}


def config_summary(quick: bool) -> dict:
    cfg = _config(tuple(overrides(quick)))
    summary = {
        "env": cfg.env.id,
        "env_kwargs": dict(cfg.env.kwargs),
        "oracle": cfg.env.oracle,
        "sft": {"episodes": cfg.sft.episodes, "steps": cfg.sft.steps, "lr": cfg.sft.lr},
        "credit": cfg.credit.method,
        "steps": cfg.trainer.steps,
        "tasks_per_step": cfg.trainer.tasks_per_step,
        "group_size": cfg.trainer.group_size,
        "lr": cfg.trainer.optim.lr,
        "eval_tasks": cfg.trainer.eval_tasks,
        "eval_temperature": cfg.trainer.eval_temperature,
    }
    return json.loads(json.dumps(summary))  # as the JSON keeps it (lists, floats), to compare with it


def collect(quick: bool, seeds: list[int]) -> list[dict]:
    """Finished seeds from their run folders; a seed whose folder is gone from the kept JSON."""
    kept = {r["seed"]: r for r in stored_results(quick).get("runs", [])}
    runs = []
    for seed in seeds:
        path = folder(quick) / f"s{seed}"
        if not is_complete(path, steps(quick)):
            if seed in kept:
                runs.append(kept[seed])
            continue
        summary = json.loads((path / "summary.json").read_text())
        before, after = summary["before"], summary["after"]
        sft = json.loads((path / "sft_summary.json").read_text()) if (path / "sft_summary.json").exists() else {}
        runs.append(
            {
                "seed": seed,
                "before": before["success"],
                "after": after["success"],
                "gain": after["success"] - before["success"],
                "tasks": before.get("tasks"),
                "episodes": before.get("episodes"),
                "wall_s": summary.get("total_wall_s"),
                "peak_mb": _peak_mb(path.with_suffix(".log")),
                "sft": {k: sft.get(k) for k in ("episodes", "steps", "demo_success")},
                # per test task, 1/0 per episode, before and after: the task-unit interval's input
                "outcomes": (before.get("outcomes"), after.get("outcomes")),
            }
        )
    return runs


def write(quick: bool, runs: list[dict], command: str) -> Path:
    out = folder(quick) if quick else RESULTS
    out.mkdir(parents=True, exist_ok=True)
    alone = collect_alone(quick, stored_results(quick).get("alone"))
    cfg = _config(tuple(overrides(quick)))
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    comparison = (
        paired_seed_comparison([r["after"] for r in runs], [r["before"] for r in runs]) if len(runs) >= 2 else None
    )
    task_unit = None
    paired = [r["outcomes"] for r in runs if all(r["outcomes"])]
    if len(runs) >= 2 and len(paired) == len(runs):  # runs from before the outcomes were kept have none
        cells = task_outcome_cells([(after, before) for before, after in paired])
        ci = run_task_bootstrap(cells)
        task_unit = {"diff": ci.point, "low": ci.low, "high": ci.high, "runs": cells.shape[0], "tasks": cells.shape[1]}
    data = {"command": command, "generated": generated, "runs": runs}
    data["task_unit"] = task_unit
    data["alone"] = alone
    data["config"] = config_summary(quick)
    if comparison is not None:
        data["paired"] = {
            k: getattr(comparison, k) for k in ("n", "diff", "low", "high", "t_low", "t_high", "sd", "mdd")
        }
    (out / "demo_gain.json").write_text(json.dumps(data, indent=1))
    tasks = sorted({r["tasks"] for r in runs if r["tasks"] is not None})
    lines = [
        "# The main job: success on unseen test tasks before and after RL",
        "",
        f"Command: `{command}` (resumable; `--report` rewrites this file from the run folders). Generated {generated};"
        " 1 torch thread per run, 2 CPU cores shared with other jobs.",
        "",
        *(["A smoke of the script (`--quick`): its numbers mean nothing.", ""] if quick else []),
        f"Each seed: `rlgym train {PRESET} seed=<s>` ({cfg.env.id} with {dict(cfg.env.kwargs)};"
        f" start: {cfg.policy.model} warmed up{' (LoRA)' if cfg.sft.lora else ''} on {cfg.sft.episodes}"
        " demonstrations of the env's oracle"
        f" `{cfg.env.oracle}` from the train pool, {cfg.sft.steps} steps; then {cfg.trainer.steps} steps of"
        f" {cfg.trainer.tasks_per_step} tasks x {cfg.trainer.group_size} samples of {cfg.credit.method}{' with LoRA' if cfg.trainer.lora.enabled else ''} on train-pool tasks). Success is measured on the **test pool** (content no"
        f" training step or warm-up ever sees): one episode per task at temperature {cfg.trainer.eval_temperature},"
        f" the same tasks and sampling seeds before and after RL; distinct test tasks per measure: {tasks}.",
        "",
        "| seed | test success before RL | after | gain | distinct test tasks | episodes | wall s | peak MB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        peak = f"{r['peak_mb']:.0f}" if r["peak_mb"] is not None else "-"
        wall = f"{r['wall_s']:.0f}" if r["wall_s"] is not None else "-"
        lines.append(
            f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['gain']:+.3f} | {r['tasks']} |"
            f" {r['episodes']} | {wall} | {peak} |"
        )
    lines.append("")
    if comparison is not None:
        c = comparison
        holds = c.low > 0 and c.t_low > 0 and (task_unit is None or task_unit["low"] > 0)
        unit = (
            f" With the test task as the unit (two-way bootstrap over {task_unit['runs']} seeds and"
            f" {task_unit['tasks']} tasks, which also covers the draw of the test questions): mean"
            f" {task_unit['diff']:+.3f}, 95% CI [{task_unit['low']:+.3f}, {task_unit['high']:+.3f}]."
            if task_unit
            else " No task-unit interval: some runs predate the per-task outcomes."
        )
        lines += [
            f"Paired over {c.n} seeds (after - before): mean {c.diff:+.3f}, bootstrap 95% CI [{c.low:+.3f}, {c.high:+.3f}],"
            f" paired t 95% CI [{c.t_low:+.3f}, {c.t_high:+.3f}], sd {c.sd:.3f}, MDD {c.mdd:.3f}.{unit}"
            f" **{'Learns on unseen tasks' if holds else 'No significant gain'}** (every interval above 0: {holds}).",
            "",
        ]
    lines += alone_lines(alone)
    (out / "demo_gain.md").write_text("\n".join(lines))
    return out / "demo_gain.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--report", action="store_true", help="only write the report from the run folders")
    parser.add_argument("--quick", action="store_true", help="a smoke of this script: tiny budget, own folder")
    parser.add_argument(
        "--alone", action="store_true", help="time the main job alone (nothing else running), then report"
    )
    args = parser.parse_args()
    command = "python benchmarks/learning/demo_gain.py " + " ".join(sys.argv[1:])
    stop_on_signal()
    if args.alone:
        rc = time_alone(args.quick)
        if rc != 0:
            print(f"the main job failed (rc {rc}): {folder(args.quick) / 'alone.log'}", file=sys.stderr)
            return rc
        # the report keeps the seeds' table and command: --alone adds the timing, not seeds
        stored = stored_results(args.quick)
        seeds = [r["seed"] for r in stored.get("runs", [])] or args.seeds
        print(f"wrote {write(args.quick, collect(args.quick, seeds), stored.get('command') or command.strip())}")
        return 0
    if not args.report:
        grid(args.quick, args.seeds, args.jobs)
    runs = collect(args.quick, args.seeds)
    path = write(args.quick, runs, command.strip())
    print(f"wrote {path} ({len(runs)} runs)")
    missing = len(args.seeds) - len(runs)
    return 1 if missing and not args.report else 0


if __name__ == "__main__":
    raise SystemExit(main())
