"""Does GRPO raise held-out success on a mission env's learnable tier? One result file per env.

    python benchmarks/learning/env_gain.py search            # warm-up, 5 GRPO seeds, report (resumable)
    python benchmarks/learning/env_gain.py gui --seeds 0 1 2 3 4 5 6 7
    python benchmarks/learning/env_gain.py search --report   # only the report, from the run folders

Each env's tier is its shipped configs: `configs/env/<env>.yaml` (the difficulty) and
`configs/env_train/<env>.yaml` (the noisy-teacher warm-up and the RL budget), so every run is
`rlgym train env=<env> credit=grpo seed=<s>` plus bookkeeping overrides (run folder, one torch thread,
checkpoints for resuming). The warm-up is `rlgym sft env=<env>` once (seed 0, as `rlgym train
env=<env>` does it), and every seed starts from it (`sft.init`), so the seeds differ only in their RL
task stream and sampling. Held-out success is measured before RL (on the warm-up weights) and after
it, on the same held-out tasks with the same sampling seeds, so the per-seed gain after - before
differs only by the weights. The seed is the unit: GRPO's gain is the paired difference over seeds
(`rlgym_llm.eval.paired_seed_comparison`: mean, 95 % bootstrap CI resampling seeds and the paired t
interval); "GRPO raises held-out success" needs both intervals above 0.

Resumable: a finished run (all its steps in `metrics.jsonl` and a `summary.json`) is skipped, an
interrupted one resumes from its last checkpoint, and the report covers whichever seeds have finished.
Run folders: `runs/learning/gain/<env>/`; results: `benchmarks/results/learning/gain_<env>.md`.
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
from run import RESULTS, ROOT, _run, is_complete

RUNS = ROOT / "runs" / "learning" / "gain"
ENVS = ("search", "gui")
SEEDS = (0, 1, 2, 3, 4)
# bookkeeping only: the tier and the budget come from the env's configs
COMMON = ["trainer.threads=1", "trainer.save_every=2", "progress=false"]


def sft_dir(env: str) -> Path:
    return RUNS / env / "sft"


def run_dir(env: str, seed: int) -> Path:
    return RUNS / env / f"grpo_s{seed}"


def steps_of(env: str) -> int:
    """The RL steps of the env's training config (what `rlgym train env=<env>` runs)."""
    from rlgym_llm.config import load_config

    return load_config("train", [f"env={env}"]).trainer.steps


def sft_cmd(env: str) -> list[str]:
    return ["rlgym", "sft", f"env={env}", "trainer.eval_tasks=0", *COMMON, f"out_dir={sft_dir(env)}"]


def train_cmd(env: str, seed: int) -> list[str]:
    path = run_dir(env, seed)
    return [
        "rlgym",
        "train",
        f"env={env}",
        "credit=grpo",
        f"seed={seed}",
        # each seed trains on its own task seeds, none of them seen in the warm-up
        f"env.train_seed_start={100_000 * (seed + 1)}",
        f"sft.init={sft_dir(env) / 'sft_model'}",
        *COMMON,
        f"out_dir={path}",
        *([f"resume={path}"] if (path / "config.yaml").exists() else []),
    ]


def grid(env: str, seeds: list[int], jobs: int) -> None:
    if not (sft_dir(env) / "sft_model" / "config.json").exists():
        _run(sft_cmd(env), sft_dir(env).with_suffix(".log"))
    steps = steps_of(env)
    todo = [s for s in seeds if not is_complete(run_dir(env, s), steps)]
    print(f"{env}: {len(todo)} runs to do", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: _run(train_cmd(env, s), run_dir(env, s).with_suffix(".log")), todo))


def collect(env: str, seeds: list[int]) -> list[dict]:
    """Per finished seed: held-out success before and after RL, the curve, updates and times."""
    steps = steps_of(env)
    out = []
    for seed in seeds:
        path = run_dir(env, seed)
        if not is_complete(path, steps):
            continue
        records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()][:steps]
        summary = json.loads((path / "summary.json").read_text())
        out.append(
            {
                "seed": seed,
                "before": summary["before"]["success"],
                "after": summary["after"]["success"],
                "curve": [[r["step"], r["eval_success"]] for r in records if r.get("eval_success") is not None],
                "train_success": [r["success"] for r in records],
                "updates": sum(not r["skipped_update"] for r in records),
                "steps": len(records),
                "wall_s": summary["total_wall_s"],
            }
        )
    return out


def write(env: str, runs: list[dict], command: str) -> Path:
    from rlgym_llm.eval.metrics import paired_seed_comparison, seed_mean_interval

    RESULTS.mkdir(parents=True, exist_ok=True)
    sft_file = sft_dir(env) / "sft_summary.json"
    sft = json.loads(sft_file.read_text()) if sft_file.exists() else {}
    lines = [
        f"# GRPO on the learnable tier of `{env}`: held-out success before and after RL",
        "",
        f"Command: `{command}` (resumable; `--report` rewrites this file from the run folders).",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; tiny model, 2 CPU cores shared with other jobs.",
        "",
        f"Each run: `{' '.join(train_cmd(env, 0)[:4])} seed=<s>` from the shared warm-up (`rlgym sft env={env}`"
        + (f": loss {sft['loss_first']:.2f} -> {sft['loss_last']:.2f}" if "loss_first" in sft else "")
        + "); the tier and budget are `configs/env/"
        + f"{env}.yaml` and `configs/env_train/{env}.yaml`. Held-out success is on the same tasks and sampling seeds"
        " before and after RL; the seed is the unit (`rlgym_llm.eval.paired_seed_comparison`).",
        "",
    ]
    if len(runs) >= 2:
        before, after = [r["before"] for r in runs], [r["after"] for r in runs]
        c = paired_seed_comparison(after, before)
        b, a = seed_mean_interval(before), seed_mean_interval(after)
        lines += [
            f"**GRPO's held-out gain over {c.n} seeds: {c.diff:+.3f}, bootstrap 95% CI [{c.low:+.3f}, {c.high:+.3f}],"
            f" paired t 95% [{c.t_low:+.3f}, {c.t_high:+.3f}]: {c.verdict('after RL', 'before RL')}.**",
            "",
            f"Held-out success: before RL {b}, after RL {a} (mean over seeds, bootstrap 95% CI).",
            "",
        ]
    else:
        lines += [f"Only {len(runs)} finished seed(s): no interval yet.", ""]
    lines += [
        "| seed | held-out before | held-out after | gain | held-out curve (step: success) | training success per step"
        " | steps with an update | wall s |",
        "|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for r in runs:
        curve = ", ".join(f"{s}: {v:.2f}" for s, v in r["curve"])
        train = " ".join(f"{v:.2f}" for v in r["train_success"])
        lines.append(
            f"| {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['after'] - r['before']:+.3f} | {curve} | {train} |"
            f" {r['updates']}/{r['steps']} | {r['wall_s']:.0f} |"
        )
    if runs:
        lines += ["", f"Mean wall time per run: {np.mean([r['wall_s'] for r in runs]):.0f} s.", ""]
    path = RESULTS / f"gain_{env}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", choices=ENVS)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (each uses one torch thread)")
    p.add_argument("--report", action="store_true", help="only rewrite the result file from the run folders")
    args = p.parse_args()
    if not args.report:
        grid(args.env, args.seeds, args.jobs)
    path = write(
        args.env, collect(args.env, args.seeds), "python benchmarks/learning/env_gain.py " + " ".join(sys.argv[1:])
    )
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
