"""Does every credit method raise held-out success on Counter from the demo's warm-up? One result file.

    python benchmarks/learning/counter_gain.py             # warm-up, 6 methods x 12 RL steps, report (resumable)
    python benchmarks/learning/counter_gain.py --report    # only the report, from the run folders
    python benchmarks/learning/counter_gain.py --seeds 0 1 2
    python benchmarks/learning/counter_gain.py --quick     # smoke of this script: a tiny budget, its own folder

The claim (formerly the slow test tests/train/test_learning.py): from one shared warm-up, each of
grpo, turn_grpo, gated, igpo, spa and gigpo raises held-out success by at least `MARGIN` in 12 RL
steps. Protocol, through the product's code path:
1. `rlgym sft` with the default config (configs/env_train/counter.yaml: 200 steps on 512 episodes of
   the noisy teacher, half of its turns idle), held-out success on 96 held-out episodes after it; its clone
   should fail often (`WARM_BAND`), so RL has room to improve.
2. per method and seed: `rlgym train credit=<method> sft.init=<that warm-up> trainer.steps=12
   trainer.eval_tasks=96`, held-out success on the same 96 held-out seeds (one episode each) and sampling seeds before and after
   RL, so the gain differs only by the weights. The 96 episodes are of few distinct tasks (Counter's
   targets); the report states how many.
Beside the gain: the turns per episode over the first and the last 3 steps (the policy should stop
wasting turns) and the updates done in the first 3 steps. The comparison between the methods, with
seeds as the unit, is run.py's (`make bench-learning`).

Run folders: `runs/learning/counter_gain/`; results: `benchmarks/results/learning/counter_gain.{md,json}`
(`--quick`: `runs/learning/counter_gain_quick/`, results beside its runs).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import RESULTS, ROOT, _run, heldout_scope, heldout_size, is_complete, stop_on_signal

METHODS = ("grpo", "turn_grpo", "gated", "igpo", "spa", "gigpo")
# at 96 held-out episodes one binomial standard error of a success rate is at most 0.05 (Counter's
# targets are few, so the episodes are of few distinct tasks: the report states how many)
MARGIN = 0.12
WARM_BAND = (0.2, 0.7)  # held-out success of the warm-up's clone


@dataclass(frozen=True)
class Budget:
    """What a run costs: the warm-up's overrides (none: the default config's), RL steps, held-out tasks."""

    name: str
    sft: tuple[str, ...]
    rl: tuple[str, ...]
    steps: int
    eval_tasks: int


FULL = Budget("counter_gain", (), (), steps=12, eval_tasks=96)
# the smoke proves the script runs end to end; its numbers mean nothing
QUICK = Budget(
    "counter_gain_quick",
    ("sft.steps=10", "sft.episodes=32", "sft.batch_size=8"),
    ("trainer.tasks_per_step=2", "trainer.group_size=4"),
    steps=2,
    eval_tasks=8,
)


def folder(b: Budget) -> Path:
    return ROOT / "runs" / "learning" / b.name


def run_dir(b: Budget, method: str, seed: int) -> Path:
    return folder(b) / f"{method}_s{seed}"


def common(b: Budget) -> list[str]:
    return [f"trainer.eval_tasks={b.eval_tasks}", "trainer.eval_every=0", "trainer.threads=1", "progress=false"]


def sft_cmd(b: Budget) -> list[str]:
    return ["rlgym", "sft", *b.sft, *common(b), f"out_dir={folder(b) / 'sft'}"]


def train_cmd(b: Budget, method: str, seed: int) -> list[str]:
    path = run_dir(b, method, seed)
    return [
        "rlgym",
        "train",
        f"credit={method}",
        f"seed={seed}",
        # seed 0 trains on the config's task seeds (the former test's run); others on their own
        *([f"env.train_seed_start={100_000 * seed}"] if seed else []),
        f"sft.init={folder(b) / 'sft' / 'sft_model'}",
        f"trainer.steps={b.steps}",
        *b.rl,
        *common(b),
        "trainer.save_every=2",
        f"out_dir={path}",
        # an interrupted run continues from its last checkpoint
        *([f"resume={path}"] if (path / "config.yaml").exists() else []),
    ]


def grid(b: Budget, seeds: list[int], jobs: int) -> None:
    if not (folder(b) / "sft" / "sft_model" / "config.json").exists():
        _run(sft_cmd(b), folder(b) / "sft.log")
    todo = [(m, s) for s in seeds for m in METHODS if not is_complete(run_dir(b, m, s), b.steps)]
    print(f"{len(todo)} runs to do", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda job: _run(train_cmd(b, *job), run_dir(b, *job).with_suffix(".log")), todo))


def results_dir(b: Budget) -> Path:
    return RESULTS if b is FULL else folder(b)


def stored(b: Budget) -> dict:
    path = results_dir(b) / f"{b.name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def collect(b: Budget, seeds: list[int]) -> list[dict]:
    """Per finished run: held-out success before and after RL, turns early and late, updates, wall time;
    runs whose folders are gone come from the stored `<name>.json`."""
    kept = {(r["method"], r["seed"]): r for r in stored(b).get("runs", [])}
    runs = []
    for seed in seeds:
        for method in METHODS:
            path = run_dir(b, method, seed)
            if not is_complete(path, b.steps):
                if (method, seed) in kept:
                    runs.append(kept[method, seed])
                continue
            records = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines() if x.strip()]
            records = records[: b.steps]
            summary = json.loads((path / "summary.json").read_text())
            before, after = summary["before"]["success"], summary["after"]["success"]
            early, late = records[:3], records[-3:]
            runs.append(
                {
                    "method": method,
                    "seed": seed,
                    "before": before,
                    "after": after,
                    "gain": after - before,
                    "passed": after - before >= MARGIN,
                    "turns_first3": sum(r["turns"] for r in early) / len(early),
                    "turns_last3": sum(r["turns"] for r in late) / len(late),
                    "updates_first3": sum(not r["skipped_update"] for r in early),
                    "updates": sum(not r["skipped_update"] for r in records),
                    "wall_s": summary["total_wall_s"],
                    **heldout_size(summary),
                }
            )
    return runs


def _shown(cmd: list[str]) -> str:
    """A command as the results file shows it: paths relative to the repository, no run folder."""
    return " ".join(c for c in cmd if not c.startswith("out_dir=")).replace(f"{ROOT}/", "")


def write(b: Budget, runs: list[dict], command: str) -> Path:
    out = results_dir(b)
    out.mkdir(parents=True, exist_ok=True)
    sft_file = folder(b) / "sft" / "sft_summary.json"
    sft = json.loads(sft_file.read_text()) if sft_file.exists() else stored(b).get("sft", {})
    methods = {m: [r for r in runs if r["method"] == m] for m in METHODS}
    verdict = {m: (all(r["passed"] for r in rs) if rs else None) for m, rs in methods.items()}
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    data = {"command": command, "generated": generated, "margin": MARGIN, "sft": sft, "verdict": verdict, "runs": runs}
    data["commands"] = {"sft": sft_cmd(b), "train": train_cmd(b, "<method>", 0)}
    (out / f"{b.name}.json").write_text(json.dumps(data, indent=1))
    low, high = WARM_BAND
    warm = sft.get("success_after")
    lines = [
        "# Counter: does every credit method raise held-out success from the demo's warm-up?",
        "",
        f"Command: `{command}` (resumable; `--report` rewrites this file from the run folders). Generated {generated};"
        " tiny model, 1 torch thread per run, 2 CPU cores shared with other jobs.",
        "",
        *(["A smoke of the script (`--quick`): its numbers mean nothing.", ""] if b is QUICK else []),
        f"Warm-up: `{_shown(sft_cmd(b))}`"
        + (
            f" (loss {sft['loss_first']:.2f} -> {sft['loss_last']:.2f}): held-out success {warm:.3f} on"
            f" {_sft_scope(sft)} ({'inside' if low < warm < high else 'OUTSIDE'} the band"
            f" {low}-{high} where RL has room to improve)."
            if warm is not None
            else " (not run yet)."
        ),
        "",
        f"Each run: `{_shown(train_cmd(b, '<method>', 0))}`; held-out success on the same"
        f" {b.eval_tasks} held-out seeds (one episode each) and sampling seeds before and after the {b.steps} RL"
        f" steps: {heldout_scope(runs) if runs else 'no finished run yet'}. A run passes when it"
        f" gains at least {MARGIN}; a method when all of its runs pass.",
        "",
        "| method | seed | held-out before | after | gain | passes | turns/episode, first 3 steps | last 3 steps"
        " | updates in the first 3 steps | updates | wall s |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['method']} | {r['seed']} | {r['before']:.3f} | {r['after']:.3f} | {r['gain']:+.3f} |"
            f" {'yes' if r['passed'] else '**no**'} | {r['turns_first3']:.2f} | {r['turns_last3']:.2f} |"
            f" {r['updates_first3']}/{min(3, b.steps)} | {r['updates']}/{b.steps} | {r['wall_s']:.0f} |"
        )
    lines += ["", "Verdict per method: " + ", ".join(f"{m} {_word(v)}" for m, v in verdict.items()) + ".", ""]
    path = out / f"{b.name}.md"
    path.write_text("\n".join(lines))
    return path


def _sft_scope(sft: dict) -> str:
    """The warm-up's held-out measure: its distinct tasks and episodes (before the count, `held_out_tasks`
    held the episodes)."""
    if "held_out_episodes" not in sft:
        return f"{sft['held_out_tasks']} episodes (distinct tasks not recorded)"
    return f"{sft['held_out_tasks']} distinct tasks ({sft['held_out_episodes']} episodes)"


def _word(passed: bool | None) -> str:
    return "no finished run" if passed is None else "raises it" if passed else "**does not raise it enough**"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel (each uses one torch thread)")
    p.add_argument("--report", action="store_true", help="only rewrite the result file from the run folders")
    p.add_argument("--quick", action="store_true", help="a smoke of this script (tiny budget, own folder)")
    args = p.parse_args()
    b = QUICK if args.quick else FULL
    if not args.report:
        stop_on_signal()
        grid(b, args.seeds, args.jobs)
    command = "python benchmarks/learning/counter_gain.py" + (" --quick" if args.quick else "")
    if args.seeds != [0]:
        command += " --seeds " + " ".join(map(str, args.seeds))
    path = write(b, collect(b, args.seeds), command)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
