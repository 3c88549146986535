"""Why GRPO lowers held-out success on Math-v0's tier: the optimizer settings, varied one at a time.

    python benchmarks/learning/math_optim_study.py            # every variant x seeds 0-2, then the report
    python benchmarks/learning/math_optim_study.py --report   # only the report, from the run folders

`benchmarks/learning/env_gain.py math` found GRPO's held-out gain on the Math tier negative over 5
seeds, from the warm-up shipped until 2026-11-28: the oracle's own clone, 10 RL steps (`ORACLE_TIER`;
the tier now clones a re-checking teacher, docs/math_env.md). This study keeps that tier: it starts
every run from one such warm-up (`runs/learning/math_optim/sft`, made here when missing) and changes
one setting of `rlgym train env=math credit=grpo` per variant: the learning
rate, the batch (tasks per step), AdamW's eps, a KL penalty to the warm-up policy. Within a seed every
variant trains on the same task stream and is measured on the same held-out tasks with the same
sampling seeds, so variants are compared seed by seed (paired). The seed is the unit.

Resumable: finished runs are skipped. Run folders: `runs/learning/math_optim/`; results:
`benchmarks/results/learning/math_optim.{md,json}`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_gain import COMMON
from run import RESULTS, ROOT, _run, is_complete

RUNS = ROOT / "runs" / "learning" / "math_optim"
SEEDS = (0, 1, 2)
STEPS = 10
# the tier as shipped until 2026-11-28 (configs/env_train/math.yaml then): the oracle's clone, 10 steps
ORACLE_TIER = [
    "env.oracle=rlgym_agents.math:MathOracleAgent",
    "sft.successful_only=true",
    "sft.steps=1500",  # the warm-up's length and learning rate then (now 600 steps at 3e-4)
    "sft.lr=3e-3",
    f"trainer.steps={STEPS}",
    "trainer.eval_every=5",
]
SFT = RUNS / "sft"
# name -> (overrides, what it tests); "default" is `rlgym train env=math credit=grpo` on ORACLE_TIER
VARIANTS: dict[str, tuple[list[str], str]] = {
    "default": ([], "lr 1e-4, 6 tasks x 8 samples per step, eps 1e-8, no KL"),
    "lr1e-5": (["trainer.optim.lr=1e-5"], "learning rate / 10"),
    "lr3e-5": (["trainer.optim.lr=3e-5"], "learning rate / 3"),
    "lr3e-4": (["trainer.optim.lr=3e-4"], "learning rate x 3"),
    "lr1e-3": (["trainer.optim.lr=1e-3"], "learning rate x 10"),
    "tasks24": (["trainer.tasks_per_step=24"], "4x the samples per step (less gradient noise)"),
    "eps1e-5": (["trainer.optim.eps=1e-5"], "AdamW eps 1e-5: weights with gradients far below it stay still"),
    "eps1e-4": (["trainer.optim.eps=1e-4"], "AdamW eps 1e-4 (about the RMS gradient per weight)"),
    "kl0.1": (["trainer.loss.kl_coef=0.1"], "KL (k3) to the warm-up policy, coefficient 0.1"),
    "long_lr3e-5": (
        ["trainer.steps=50", "trainer.optim.lr=3e-5", "trainer.eval_every=25"],
        "5x the steps (50) at lr 3e-5: small steps, more of them",
    ),
}


def steps_of(name: str) -> int:
    """The variant's number of RL steps (its `trainer.steps=` override, else the default's)."""
    for o in VARIANTS[name][0]:
        if o.startswith("trainer.steps="):
            return int(o.split("=", 1)[1])
    return STEPS


def tier(overrides: list[str]) -> list[str]:
    """ORACLE_TIER without the keys `overrides` set (Hydra takes one value per key)."""
    keys = {o.split("=", 1)[0] for o in overrides}
    return [o for o in ORACLE_TIER if o.split("=", 1)[0] not in keys]


def sft_cmd() -> list[str]:
    return [
        "rlgym",
        "sft",
        "env=math",
        *tier([]),
        "trainer.eval_tasks=0",
        "trainer.threads=1",
        *COMMON,
        f"out_dir={SFT}",
    ]


def run_dir(name: str, seed: int) -> Path:
    return RUNS / f"{name}_s{seed}"


def train_cmd(name: str, seed: int) -> list[str]:
    path = run_dir(name, seed)
    return [
        "rlgym",
        "train",
        "env=math",
        "credit=grpo",
        f"seed={seed}",
        f"env.train_seed_start={100_000 * (seed + 1)}",  # as env_gain.py: the same task stream per seed
        f"sft.init={SFT / 'sft_model'}",
        *tier(VARIANTS[name][0]),
        *VARIANTS[name][0],
        *COMMON,
        f"out_dir={path}",
        *([f"resume={path}"] if (path / "config.yaml").exists() else []),
    ]


def collect() -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for name in VARIANTS:
        for seed in SEEDS:
            path = run_dir(name, seed)
            if not is_complete(path, steps_of(name)):
                continue
            records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()]
            records = records[: steps_of(name)]
            summary = json.loads((path / "summary.json").read_text())
            cpu = path.with_suffix(".cpu")
            out.setdefault(name, []).append(
                {
                    "seed": seed,
                    "before": summary["before"]["success"],
                    "after": summary["after"]["success"],
                    "train_first3": sum(r["success"] for r in records[:3]) / 3,
                    "train_last3": sum(r["success"] for r in records[-3:]) / 3,
                    "entropy_first": records[0]["entropy"],
                    "entropy_last": records[-1]["entropy"],
                    "grad_norm_max": max(r["grad_norm"] for r in records),
                    "cpu_s": float(cpu.read_text()) if cpu.exists() else None,
                }
            )
    return out


def write(results: dict[str, list[dict]], command: str) -> Path:
    from rlgym_llm.eval.metrics import paired_seed_comparison

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "math_optim.json").write_text(json.dumps({"steps": STEPS, "variants": results}, indent=1))
    lines = [
        "# GRPO on Math-v0's tier: the optimizer settings, one at a time",
        "",
        f"Command: `{command}` (resumable; `--report` rewrites this file from the run folders).",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; tiny model, 2 CPU cores shared with other jobs.",
        "",
        f"Each run: `rlgym train env=math credit=grpo seed=<s>` ({STEPS} steps unless the variant says) from the oracle's"
        f" clone (the tier shipped until 2026-11-28: `{' '.join(ORACLE_TIER)}`), plus the variant's overrides. Gain = held-out success"
        " after RL - before (64 tasks, same sampling seeds); vs default = the paired difference of gains"
        " over seeds (`paired_seed_comparison`; 3 seeds: bootstrap and t intervals).",
        "",
        "| variant | what | seeds | gain per seed | mean gain | vs default: diff [t 95%] | training success,"
        " first 3 -> last 3 steps | entropy, first -> last step | max grad norm | CPU s per run |",
        "|---|---|---:|---|---:|---|---|---|---:|---:|",
    ]
    base = {r["seed"]: r["after"] - r["before"] for r in results.get("default", [])}
    for name, (_, what) in VARIANTS.items():
        runs = results.get(name, [])
        if not runs:
            lines.append(f"| {name} | {what} | 0 | | | | | | | |")
            continue
        gains = [r["after"] - r["before"] for r in runs]
        mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
        vs = ""
        paired = [(g, base[r["seed"]]) for g, r in zip(gains, runs) if r["seed"] in base]
        if name != "default" and len(paired) >= 2:
            c = paired_seed_comparison([p[0] for p in paired], [p[1] for p in paired])
            vs = f"{c.diff:+.3f} [{c.t_low:+.3f}, {c.t_high:+.3f}]"
        cpu = [r["cpu_s"] for r in runs if r["cpu_s"] is not None]
        lines.append(
            f"| {name} | {what} | {len(runs)} | {' '.join(f'{g:+.3f}' for g in gains)} | {mean(gains):+.3f} | {vs} |"
            f" {mean([r['train_first3'] for r in runs]):.2f} -> {mean([r['train_last3'] for r in runs]):.2f} |"
            f" {mean([r['entropy_first'] for r in runs]):.3f} -> {mean([r['entropy_last'] for r in runs]):.3f} |"
            f" {max(r['grad_norm_max'] for r in runs):.2f} | {mean(cpu) if cpu else 0:.0f} |"
        )
    out = RESULTS / "math_optim.md"
    out.write_text("\n".join(lines) + "\n")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", action="store_true", help="only rewrite the result file from the run folders")
    p.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = p.parse_args()
    if not args.report:
        if not (SFT / "sft_model" / "config.json").exists():
            _run(sft_cmd(), SFT.with_suffix(".log"))
        for seed in SEEDS:  # seed-major: every variant of a seed before the next seed
            for name in args.variants:
                if not is_complete(run_dir(name, seed), steps_of(name)):
                    _run(train_cmd(name, seed), run_dir(name, seed).with_suffix(".log"))
    print(write(collect(), "python benchmarks/learning/math_optim_study.py"))


if __name__ == "__main__":
    main()
