"""Does sampling ahead hurt learning? The main job (`rlgym train`: Counter, turn-level GRPO, 20 steps)
with `trainer.off_policy_steps=1` against the synchronous loop (0), seed by seed.

    python benchmarks/overlap_learning.py             # the warm-up, the runs (resumable), then the report
    python benchmarks/overlap_learning.py report      # only the report, from the runs on disk

As in benchmarks/learning: one SFT warm-up (the main job's: `rlgym sft` with Counter's demo
settings) that every run starts from (`sft.init`); seed s trains on task seeds from
100,000 x (s + 1). A seed's two runs differ only in `trainer.off_policy_steps`. Each run is
summarised by its held-out gain (success on 96 held-out tasks after RL minus before), and the two
settings are compared by the paired difference over seeds (`rlgym_llm.eval.paired_seed_comparison`:
bootstrap over seeds and the paired t interval); "not hurt" means the overlapped mean gain lies
inside the synchronous runs' seed-level interval (`seed_mean_interval`) and the paired interval
contains 0 or lies above it. Runs are subprocesses under `nice`, one torch thread each
(OMP_NUM_THREADS=1); a killed benchmark resumes every unfinished run from its last checkpoint.

Outputs: benchmarks/results/overlap_learning.{md,json}; run folders under runs/overlap_learning/.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs" / "overlap_learning"
RESULTS = ROOT / "benchmarks" / "results"
SEEDS = (0, 1, 2)
SETTINGS = (0, 1)  # trainer.off_policy_steps
SFT = RUNS / "sft"
# the main job as shipped, but for the held-out measure only before and after RL (eval_every=0: the
# periodic measures change nothing in training and would cost ~40% more CPU on 2 shared cores)
# trainer.off_policy_threads=1, as many as the trainer's: the sampling process then samples exactly what
# a thread of the trainer would (tests/train/test_overlap.py), so runs of either engine compare
COMMON = [
    "trainer.threads=1",
    "trainer.off_policy_threads=1",
    "trainer.save_every=5",
    "trainer.eval_every=0",
    "progress=false",
]


def _run(cmd: list[str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.time()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.call(["nice", "-n", "10", *cmd], stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    print(f"[{time.strftime('%H:%M:%S')}] rc={rc} {time.time() - t0:6.0f}s {log.parent.name}/{log.name}", flush=True)
    return rc


def run_dir(seed: int, k: int) -> Path:
    return RUNS / f"off{k}_s{seed}"


def train_cmd(seed: int, k: int) -> list[str]:
    out = run_dir(seed, k)
    return [
        sys.executable,
        "-m",
        "rlgym_llm.cli.main",
        "train",
        f"seed={seed}",
        f"env.train_seed_start={100_000 * (seed + 1)}",
        "sft.enabled=false",
        f"sft.init={SFT / 'sft_model'}",
        f"trainer.off_policy_steps={k}",
        *COMMON,
        f"out_dir={out}",
        *([f"resume={out}"] if (out / "config.yaml").exists() else []),
    ]


def done(seed: int, k: int) -> bool:
    return (run_dir(seed, k) / "summary.json").exists()


def runs(jobs: int) -> None:
    if not (SFT / "sft_model" / "config.json").exists():
        sft = [sys.executable, "-m", "rlgym_llm.cli.main", "sft", "trainer.eval_tasks=0", "trainer.threads=1"]
        sft += ["trainer.save_every=5", "progress=false"]
        sft.append(f"out_dir={SFT}")
        if _run(sft, RUNS / "sft.log") != 0:
            raise SystemExit(f"the warm-up failed: see {RUNS / 'sft.log'}")
    todo = [(s, k) for s in SEEDS for k in SETTINGS if not done(s, k)]  # seed-major: pairs finish together
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda sk: _run(train_cmd(*sk), run_dir(*sk).with_suffix(".log")), todo))


def report(command: str) -> dict:
    from rlgym_llm.eval import paired_seed_comparison, seed_mean_interval

    rows: dict[int, dict[int, dict]] = {}
    for seed in SEEDS:
        for k in SETTINGS:
            if done(seed, k):
                s = json.loads((run_dir(seed, k) / "summary.json").read_text())
                metrics = [json.loads(x) for x in (run_dir(seed, k) / "metrics.jsonl").read_text().splitlines()]
                rows.setdefault(seed, {})[k] = {
                    "before": s["before"]["success"],
                    "after": s["after"]["success"],
                    "gain": s["after"]["success"] - s["before"]["success"],
                    "updates_done": s["updates"]["done"],
                    "wall_s": s["total_wall_s"],
                    "cpu_s": s.get("cpu_s"),
                    "staleness_mean": sum(m.get("staleness", 0.0) for m in metrics) / len(metrics),
                    "staleness_max": max(m.get("staleness_max", 0) for m in metrics),
                }
    paired = [s for s in SEEDS if len(rows.get(s, {})) == len(SETTINGS)]
    result: dict = {
        "date": datetime.date.today().isoformat(),
        "command": command,
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "seeds": paired,
        "runs": {str(s): {str(k): v for k, v in r.items()} for s, r in rows.items()},
    }
    if len(paired) >= 2:
        on = [rows[s][1]["gain"] for s in paired]
        off = [rows[s][0]["gain"] for s in paired]
        cmp = paired_seed_comparison(on, off)
        sync = seed_mean_interval(off)
        # "mean": the mean paired difference (PairedComparison.diff), overlapped minus synchronous
        fields = {"n": "n", "mean": "diff", "low": "low", "high": "high", "t_low": "t_low", "t_high": "t_high"}
        result["paired"] = {key: getattr(cmp, attr) for key, attr in {**fields, "mdd": "mdd"}.items()}
        result["sync_interval"] = {"mean": sync.point, "low": sync.low, "high": sync.high}
        result["overlap_mean"] = sum(on) / len(on)
        result["within_sync_interval"] = sync.low <= result["overlap_mean"] <= sync.high
        result["not_hurt"] = result["within_sync_interval"] and cmp.t_high >= 0
    write(result)
    return result


def write(r: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "overlap_learning.json").write_text(json.dumps(r, indent=1) + "\n")
    lines = [
        "# Learning with rollouts sampled ahead: the main job, off_policy_steps 1 vs 0",
        "",
        f"Date: {r['date']}. Command: `{r['command']}`. Load average after: {r['load_after']} (2 shared cores).",
        "",
        "Each run: `rlgym train` (Counter, turn_grpo, 20 steps of 6 tasks x 8 samples, held-out success on 96 "
        "tasks before and after RL) from one shared SFT warm-up, `trainer.threads=1`; only "
        "`trainer.off_policy_steps` differs within a seed.",
        "",
        "| seed | off_policy_steps | held-out before | after | gain | staleness (mean / max) | updates | wall (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s, by_k in sorted(r["runs"].items()):
        for k, v in sorted(by_k.items()):
            lines.append(
                f"| {s} | {k} | {v['before']:.3f} | {v['after']:.3f} | {v['gain']:+.3f} | "
                f"{v['staleness_mean']:.2f} / {v['staleness_max']} | {v['updates_done']} | {v['wall_s']:.0f} |"
            )
    lines.append("")
    if "paired" in r:
        p, si = r["paired"], r["sync_interval"]
        lines += [
            f"Seeds paired: {r['seeds']}. Held-out gain, synchronous: mean {si['mean']:+.3f}, seed-level 95% CI "
            f"[{si['low']:+.3f}, {si['high']:+.3f}]; overlapped: mean {r['overlap_mean']:+.3f} "
            f"({'inside' if r['within_sync_interval'] else '**outside**'} that interval).",
            "",
            f"Paired difference (overlapped - synchronous) over {p['n']} seeds: {p['mean']:+.3f}, bootstrap 95% CI "
            f"[{p['low']:+.3f}, {p['high']:+.3f}], paired t interval [{p['t_low']:+.3f}, {p['t_high']:+.3f}]; "
            f"minimum detectable difference {p['mdd']:.3f}.",
            "",
            f"Verdict: learning {'**not hurt**' if r['not_hurt'] else '**hurt or inconclusive**'} at this number of seeds.",
        ]
    else:
        lines.append("Fewer than 2 complete seed pairs so far: no comparison.")
    (RESULTS / "overlap_learning.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="all", choices=("all", "report"))
    ap.add_argument("--jobs", type=int, default=3, help="runs at once")
    args = ap.parse_args()
    if args.what == "all":
        runs(args.jobs)
    r = report(f"python benchmarks/overlap_learning.py{' --jobs ' + str(args.jobs) if args.jobs != 3 else ''}")
    print(json.dumps({k: v for k, v in r.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
