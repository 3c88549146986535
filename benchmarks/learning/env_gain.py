"""Does GRPO raise held-out success on a mission env's learnable tier? One result file per env.

    python benchmarks/learning/env_gain.py math              # warm-up, 5 GRPO seeds, report (resumable)
    python benchmarks/learning/env_gain.py search
    python benchmarks/learning/env_gain.py gui --seeds 0 1 2 3 4 5 6 7
    python benchmarks/learning/env_gain.py search --report   # only the report, from the run folders
    python benchmarks/learning/env_gain.py smollm2_math --seeds 0 1 2 --jobs 1   # SmolLM2-135M (2 threads)

Each env's tier is its shipped configs: `configs/env/<env>.yaml` (the difficulty) and
`configs/env_train/<env>.yaml` (the noisy-teacher warm-up and the RL budget), so every run is
`rlgym train env=<env> credit=grpo seed=<s>` plus bookkeeping overrides (run folder, torch threads,
checkpoints for resuming). `smollm2_math` is the preset `configs/experiment/smollm2_math.yaml`
(`rlgym train +experiment=smollm2_math`) instead of an env's tier. The warm-up is `rlgym sft
env=<env>` once (seed 0, as `rlgym train env=<env>` does it), and every seed starts from it
(`sft.init`), so the seeds differ only in their RL task stream and sampling. Held-out success is measured before RL (on the warm-up weights) and after
it, on the same held-out tasks with the same sampling seeds, so the per-seed gain after - before
differs only by the weights. The seed is the unit: GRPO's gain is the paired difference over seeds
(`rlgym_llm.eval.paired_seed_comparison`: mean, 95 % bootstrap CI resampling seeds and the paired t
interval); "GRPO raises held-out success" needs both intervals above 0.

Resumable: a finished run (all its steps in `metrics.jsonl` and a `summary.json`) is skipped, an
interrupted one resumes from its last checkpoint, and the report covers whichever seeds have finished.
Every finished seed's numbers are also kept in `gain_<env>.json`, so `--report` regenerates the table
without the run folders. A verdict needs `SEEDS_FOR_VERDICT` seeds (`VERDICT_SEEDS` for a setup that
asks fewer); fewer give the interval so far.
`--steps N` trains fewer steps than the env's config (a smaller budget; it is part of the results' key,
so runs of different budgets never mix).
`--check-updates` is the calibration check of the shipped warm-up (formerly the slow test
`tests/train/test_env_tiers.py::test_a_short_grpo_run_on_the_tier_updates`): from the same warm-up,
2 GRPO steps of the config's batch must get groups with both outcomes, so GRPO updates at least once.
It adds the env's row to `benchmarks/results/learning/tier_updates.{md,json}` and exits 1 if it fails.
Run folders: `runs/learning/gain/<env>/`; results: `benchmarks/results/learning/gain_<env>.{md,json}`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import RESULTS, ROOT, _run, heldout_scope, heldout_size, is_complete, stop_on_signal

RUNS = ROOT / "runs" / "learning" / "gain"
# each setup's config overrides (an env's shipped tier, or an experiment preset) and its torch threads
SETUPS: dict[str, list[str]] = {
    "math": ["env=math"],
    "search": ["env=search"],
    "gui": ["env=gui"],
    "smollm2_math": ["+experiment=smollm2_math"],
}
THREADS = {"smollm2_math": 2}  # a 135M model: one run at a time on both cores
ENVS = tuple(SETUPS)
# where each setup's tier is calibrated
DOCS = {"smollm2_math": "math"}
STEP_PARTS = ("rollout", "credit", "update", "sync")  # the timed parts of one RL step in metrics.jsonl
SEEDS = (0, 1, 2, 3, 4)
SEEDS_FOR_VERDICT = 5  # the issue asks for at least 5 seeds before GRPO's gain gets a verdict
VERDICT_SEEDS = {"smollm2_math": 3}  # and at least 3 for the real model (~15 minutes per run)
# bookkeeping only: the tier and the budget come from the env's configs
COMMON = [
    "trainer.save_every=2",
    "progress=false",
    # a run starved beside other jobs on the shared machine is not stopped by the default limits
    "trainer.call_timeout_s=1800",
    "trainer.episode_timeout_s=3600",
]


def sft_dir(env: str) -> Path:
    return RUNS / env / "sft"


def run_dir(env: str, seed: int, steps: int | None = None) -> Path:
    """A seed's run folder; a run with fewer steps than the config's (`--steps`) has its own."""
    return RUNS / env / (f"grpo_s{seed}" if steps is None else f"grpo_steps{steps}_s{seed}")


def steps_of(env: str) -> int:
    """The RL steps of the env's training config (what `rlgym train env=<env>` runs)."""
    from rlgym_llm.config import load_config

    return load_config("train", SETUPS[env]).trainer.steps


def common(env: str) -> list[str]:
    return [f"trainer.threads={THREADS.get(env, 1)}", *COMMON]


def sft_cmd(env: str) -> list[str]:
    # the calibration is each run's held-out success before RL (failures counted) and docs/<env>_env.md
    return ["rlgym", "sft", *SETUPS[env], "trainer.eval_tasks=0", *common(env), f"out_dir={sft_dir(env)}"]


def budget(steps: int | None) -> list[str]:
    """The overrides of a smaller budget: `steps` RL steps, held-out success before and after them."""
    return [] if steps is None else [f"trainer.steps={steps}", f"trainer.eval_every={steps}"]


def train_cmd(env: str, seed: int, steps: int | None = None) -> list[str]:
    path = run_dir(env, seed, steps)
    return [
        "rlgym",
        "train",
        *SETUPS[env],
        "credit=grpo",
        f"seed={seed}",
        # each seed trains on its own task seeds, none of them seen in the warm-up
        f"env.train_seed_start={100_000 * (seed + 1)}",
        f"sft.init={sft_dir(env) / 'sft_model'}",
        *budget(steps),
        *common(env),
        f"out_dir={path}",
        *([f"resume={path}"] if (path / "config.yaml").exists() else []),
    ]


def grid(env: str, seeds: list[int], jobs: int, steps: int | None = None) -> None:
    if not (sft_dir(env) / "sft_model" / "config.json").exists():
        _run(sft_cmd(env), sft_dir(env).with_suffix(".log"))
    n = steps or steps_of(env)
    todo = [s for s in seeds if not is_complete(run_dir(env, s, steps), n)]
    print(f"{env}: {len(todo)} runs to do", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: _run(train_cmd(env, s, steps), run_dir(env, s, steps).with_suffix(".log")), todo))


def collect(env: str, seeds: list[int], steps: int | None = None) -> list[dict]:
    """Per finished seed: held-out success before and after RL, the curve, updates, wall and CPU time;
    seeds whose run folders are gone come from the stored `gain_<env>.json` (same budget only)."""
    n = steps or steps_of(env)
    stored_file = RESULTS / f"gain_{env}.json"
    stored = json.loads(stored_file.read_text()) if stored_file.exists() else {}
    kept = {r["seed"]: r for r in stored.get("runs", []) if stored.get("steps") == n}
    for seed in seeds:
        path = run_dir(env, seed, steps)
        if not is_complete(path, n):
            continue
        records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()][:n]
        summary = json.loads((path / "summary.json").read_text())
        cpu = path.with_suffix(".cpu")
        kept[seed] = {
            "seed": seed,
            "before": summary["before"]["success"],
            "after": summary["after"]["success"],
            "curve": [[r["step"], r["eval_success"]] for r in records if r.get("eval_success") is not None],
            "train_success": [r["success"] for r in records],
            "updates": sum(not r["skipped_update"] for r in records),
            "steps": len(records),
            "wall_s": summary["total_wall_s"],
            # one RL step (rollouts, credit, update, sync), without the held-out measures
            "step_wall_s": float(np.mean([sum(r[f"time_{k}_s"] for k in STEP_PARTS) for r in records])),
            "step_cpu_s": float(np.mean([r["cpu_rollout_s"] + r["cpu_update_s"] for r in records])),
            "cpu_s": float(cpu.read_text()) if cpu.exists() else None,
            # held-out episodes that failed (e.g. past their timeout on a loaded machine): success leaves them out
            "heldout_failed": [summary["before"].get("failed", 0), summary["after"].get("failed", 0)],
            # per test task, 1/0 per episode, before and after: the task-unit interval's input
            "outcomes": [summary["before"].get("outcomes"), summary["after"].get("outcomes")],
            **heldout_size(summary),
        }
    return [kept[s] for s in sorted(kept)]


def per_step(run: dict) -> str:
    """'wall, CPU' seconds of one RL step (mean over the run's steps); '-' for runs stored before it was kept."""
    if run.get("step_wall_s") is None:
        return "-"
    return f"{run['step_wall_s']:.0f}, {run['step_cpu_s']:.0f}"


def write(env: str, runs: list[dict], command: str, steps: int | None = None) -> Path:
    from rlgym_llm.config import load_config
    from rlgym_llm.eval import run_task_bootstrap, task_outcome_cells
    from rlgym_llm.eval.metrics import paired_seed_comparison, seed_mean_interval

    RESULTS.mkdir(parents=True, exist_ok=True)
    stored_file = RESULTS / f"gain_{env}.json"
    stored = json.loads(stored_file.read_text()) if stored_file.exists() else {}
    sft_file = sft_dir(env) / "sft_summary.json"
    sft = json.loads(sft_file.read_text()) if sft_file.exists() else stored.get("sft", {})
    sft_cpu_file = sft_dir(env).with_suffix(".cpu")
    sft_cpu = float(sft_cpu_file.read_text()) if sft_cpu_file.exists() else stored.get("sft_cpu_s")
    n_steps = steps or steps_of(env)
    stored_file.write_text(
        json.dumps(
            {"env": env, "steps": n_steps, "overrides": budget(steps), "sft": sft, "sft_cpu_s": sft_cpu, "runs": runs},
            indent=1,
        )
    )
    model = load_config("train", SETUPS[env]).policy.model
    setup = " ".join(SETUPS[env])
    files = (
        f"`configs/env/{env}.yaml` and `configs/env_train/{env}.yaml`"
        if SETUPS[env] == [f"env={env}"]
        else f"`configs/experiment/{setup.split('=')[-1]}.yaml`"
    )
    lines = [
        f"# GRPO on the learnable tier of `{env}`: held-out success before and after RL",
        "",
        f"Command: `{command}` (resumable; `--report` rewrites this file from the run folders).",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; model `{model}`,"
        f" {THREADS.get(env, 1)} torch thread(s) per run, 2 CPU cores shared with other jobs.",
        "",
        f"Each run: `rlgym train {setup} credit=grpo seed=<s>` from the shared warm-up (`rlgym sft {setup}`"
        + (f": loss {sft['loss_first']:.2f} -> {sft['loss_last']:.2f}" if "loss_first" in sft else "")
        + f"); the tier and budget are {files}"
        + (f", with a smaller budget: `{' '.join(budget(steps))}`" if steps else "")
        + ". Held-out success is on the same tasks and sampling seeds"
        " before and after RL; the seed is the unit (`rlgym_llm.eval.paired_seed_comparison`).",
        "",
        "Split: held-out = the env's **test** pool (content no warm-up or RL step ever sees); RL trains on the"
        " train pool. Start: "
        + (
            f"the warm-up on {sft['episodes']} demonstrations of the env's oracle from the train pool"
            f" (successful only; demo success {sft.get('demo_success', 1.0):.2f}), {sft['steps']} steps"
            if "episodes" in sft
            else "the warm-up on the env's oracle from the train pool"
        )
        + ": nothing in it is built to fail.",
        "",
        f"Held-out measure: {heldout_scope(runs)} (one sampled episode per held-out seed; seeds that drew the"
        " same task are one task)."
        if runs
        else "Held-out measure: no finished run yet.",
        "",
    ]
    doc = DOCS.get(env, env)
    lines += [
        f"Calibration of the tier (held-out success after the warm-up): [docs/{doc}_env.md](../../../docs/{doc}_env.md).",
        "",
    ]
    if len(runs) >= 2:
        before, after = [r["before"] for r in runs], [r["after"] for r in runs]
        c = paired_seed_comparison(after, before)
        b, a = seed_mean_interval(before), seed_mean_interval(after)
        # a verdict needs the seeds the issue asks for; fewer give the interval so far, and say so
        verdict = (
            c.verdict("after RL", "before RL")
            if c.n >= VERDICT_SEEDS.get(env, SEEDS_FOR_VERDICT)
            else f"{c.n} of {VERDICT_SEEDS.get(env, SEEDS_FOR_VERDICT)} seeds, not enough for a verdict (interim interval)"
        )
        lines += [
            f"**GRPO's held-out gain over {c.n} seeds: {c.diff:+.3f}, bootstrap 95% CI [{c.low:+.3f}, {c.high:+.3f}],"
            f" paired t 95% [{c.t_low:+.3f}, {c.t_high:+.3f}]: {verdict}.**",
            "",
            f"Held-out success: before RL {b}, after RL {a} (mean over seeds, bootstrap 95% CI).",
            "",
        ]
        paired = [r.get("outcomes") or [None, None] for r in runs]
        if all(all(o) for o in paired):
            cells = task_outcome_cells([(after_o, before_o) for before_o, after_o in paired])
            ci = run_task_bootstrap(cells)
            lines += [
                f"With the test task as the unit (two-way bootstrap over {cells.shape[0]} seeds and {cells.shape[1]}"
                f" tasks, which also covers the draw of the test tasks): {ci.point:+.3f}, 95% CI"
                f" [{ci.low:+.3f}, {ci.high:+.3f}].",
                "",
            ]
        else:
            lines += ["No task-unit interval: some runs were stored before their per-task outcomes were kept.", ""]
    else:
        lines += [
            f"Only {len(runs)} finished seed(s) of {VERDICT_SEEDS.get(env, SEEDS_FOR_VERDICT)}: no interval yet, no verdict.",
            "",
        ]
    lines += [
        "| seed | held-out before | held-out after | gain | held-out curve (step: success) | training success per step"
        " | steps with an update | wall s | CPU s | per RL step: wall s, CPU s | held-out episodes failed (before, after) |",
        "|---|---:|---:|---:|---|---|---:|---:|---:|---|---|",
    ]
    for r in runs:
        curve = ", ".join(f"{s}: {v:.2f}" for s, v in r["curve"])
        train = " ".join(f"{v:.2f}" for v in r["train_success"])
        cpu_s = "-" if r.get("cpu_s") is None else f"{r['cpu_s']:.0f}"
        lines.append(
            f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['after'] - r['before']:+.3f} | {curve} | {train} |"
            f" {r['updates']}/{r['steps']} | {r['wall_s']:.0f} | {cpu_s} | {per_step(r)} |"
            f" {', '.join(f'{x:.0f}' for x in r.get('heldout_failed') or []) or '-'} |"
        )
    if runs:
        cpu = [r["cpu_s"] for r in runs if r.get("cpu_s") is not None]
        lines += [
            "",
            f"Mean wall time per run: {np.mean([r['wall_s'] for r in runs]):.0f} s. CPU (user + system):"
            f" {sum(cpu):.0f} s over {len(cpu)} runs" + ("" if sft_cpu is None else f", warm-up {sft_cpu:.0f} s") + ".",
        ]
        stepped = [r for r in runs if r.get("step_wall_s") is not None]
        if stepped:
            lines.append(
                f"One RL step (rollouts, credit, update, sync; held-out measures left out), mean over {len(stepped)}"
                f" runs: {np.mean([r['step_wall_s'] for r in stepped]):.0f} s wall,"
                f" {np.mean([r['step_cpu_s'] for r in stepped]):.0f} s CPU (the trainer's own count: rollouts and update)."
            )
        lines.append("")
    path = RESULTS / f"gain_{env}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


CHECK_STEPS = 2


def check_updates(env: str) -> dict:
    """The shipped warm-up (shared with the gain runs), then `CHECK_STEPS` GRPO steps without held-out
    measures: passes when a step has groups with both outcomes and GRPO updates at least once."""
    if not (sft_dir(env) / "sft_model" / "config.json").exists():
        _run(sft_cmd(env), sft_dir(env).with_suffix(".log"))
    path = RUNS / env / "check_updates"
    if not is_complete(path, CHECK_STEPS):
        cmd = [
            "rlgym",
            "train",
            *SETUPS[env],
            "credit=grpo",
            f"sft.init={sft_dir(env) / 'sft_model'}",
            f"trainer.steps={CHECK_STEPS}",
            "trainer.eval_tasks=0",
            *common(env),
            f"out_dir={path}",
            *([f"resume={path}"] if (path / "config.yaml").exists() else []),
        ]
        _run(cmd, path.with_suffix(".log"))
    if not is_complete(path, CHECK_STEPS):
        return {"env": env, "passed": False, "why": f"the run did not finish: see {path.with_suffix('.log')}"}
    records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()]
    summary = json.loads((path / "summary.json").read_text())
    success = [r["success"] for r in records[:CHECK_STEPS]]
    done = summary["updates"]["done"]
    return {
        "env": env,
        "success": success,
        "tied_groups": [r["zero_variance_share"] for r in records[:CHECK_STEPS]],
        "updates": done,
        "passed": done >= 1 and any(0 < x < 1 for x in success),
        "wall_s": summary["total_wall_s"],
    }


def write_check(row: dict) -> Path:
    """Add (or replace) one env's row of `tier_updates.{md,json}` and rewrite the table."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stored_file = RESULTS / "tier_updates.json"
    rows = json.loads(stored_file.read_text()) if stored_file.exists() else {}
    row = {**row, "command": f"python benchmarks/learning/env_gain.py {row['env']} --check-updates"}
    rows[row["env"]] = {**row, "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    stored_file.write_text(json.dumps(rows, indent=1))
    lines = [
        "# Do the shipped warm-ups leave GRPO something to update?",
        "",
        f"Each row: `python benchmarks/learning/env_gain.py <env> --check-updates`: the env's shipped warm-up"
        f" (`rlgym sft <setup>`, shared with the gain runs), then {CHECK_STEPS} GRPO steps of its config's batch"
        " (`rlgym train <setup> credit=grpo trainer.steps=2 trainer.eval_tasks=0`). Passes when a step has groups"
        " with both outcomes (training success strictly between 0 and 1) and GRPO updates at least once.",
        "",
        "| env | training success per step | tied groups per step | updates | wall s | passes | generated |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for r in rows.values():
        if "success" not in r:
            lines.append(f"| {r['env']} | - | - | - | - | **no**: {r['why']} | {r['generated']} |")
            continue
        lines.append(
            f"| {r['env']} | {' '.join(f'{x:.2f}' for x in r['success'])} | {' '.join(f'{x:.2f}' for x in r['tied_groups'])}"
            f" | {r['updates']}/{CHECK_STEPS} | {r['wall_s']:.0f} | {'yes' if r['passed'] else '**no**'} | {r['generated']} |"
        )
    path = RESULTS / "tier_updates.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", choices=ENVS)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (each uses one torch thread)")
    p.add_argument("--report", action="store_true", help="only rewrite the result file from the run folders")
    p.add_argument("--steps", type=int, default=None, help="RL steps per run (default: the env's config)")
    p.add_argument("--check-updates", action="store_true", help="warm-up + 2 GRPO steps: does GRPO update?")
    args = p.parse_args()
    if args.check_updates:
        stop_on_signal()
        row = check_updates(args.env)
        print(write_check(row).read_text())
        return 0 if row["passed"] else 1
    if not args.report:
        stop_on_signal()
        grid(args.env, args.seeds, args.jobs, args.steps)
    # the command that makes these runs (a `--report` names the grid it reports, not itself)
    command = f"python benchmarks/learning/env_gain.py {args.env}"
    if args.seeds != list(SEEDS):
        command += " --seeds " + " ".join(map(str, args.seeds))
    if args.steps is not None:
        command += f" --steps {args.steps}"
    path = write(args.env, collect(args.env, args.seeds, args.steps), command, args.steps)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
