"""CPU thread policy: the main job's CPU time alone vs beside CPU-bound competitors, torch's
defaults vs the policy `rlgym` applies (OMP_WAIT_POLICY=PASSIVE, threads from the CPU affinity mask).

Each run is a separate process running `rlgym train` (the README's main job, shortened: a smaller
warm-up and one RL step, with every batch going through the update) and is measured by its own
rusage (user + system CPU seconds, its children included) and its wall time. "loaded" runs start
`--hogs` busy-loop processes first and stop them after. The old policy is torch's defaults: the
driver imports torch before `rlgym` can set the wait policy (so GNU OpenMP keeps its spinning
workers) and passes torch's own default thread count. Policies in ABBA order, each policy's idle
and loaded runs alternating, so drifting background load hits both alike.

    python benchmarks/thread_policy.py                 # 8 runs: ABBA x (idle, loaded)
    python benchmarks/thread_policy.py --reps 1 --hogs 2

Writes benchmarks/results/thread_policy.{json,md}; a killed run resumes (`--resume`) from the json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
JOB = [
    "sft.episodes=24",
    "sft.steps=6",
    "trainer.steps=1",
    "trainer.tasks_per_step=2",
    "trainer.group_size=4",
    "trainer.filter_zero_variance=false",  # every batch goes through the update, tied groups too
    "trainer.eval_tasks=4",
    "trainer.eval_every=0",
    "trainer.save_every=0",
    "progress=false",
]
OLD = (
    "import sys, torch\n"  # OpenMP loads here, with its own defaults, before rlgym can set anything
    "from rlgym_llm.cli.main import main\n"
    "sys.exit(main(['train', *sys.argv[1:], f'trainer.threads={torch.get_num_threads()}']))\n"
)
NEW = "import sys\nfrom rlgym_llm.cli.main import main\nsys.exit(main(['train', *sys.argv[1:]]))\n"
HOG = "while True:\n    pass\n"


def run_job(policy: str, loaded: bool, hogs: int, out_dir: Path) -> dict[str, Any]:
    """One `rlgym train` process under `policy` (old/new), alone or beside `hogs` busy loops."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    env["TOKENIZERS_PARALLELISM"] = "false"
    burners = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs if loaded else 0)]
    proc = None
    try:
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-c", OLD if policy == "old" else NEW, *JOB, f"out_dir={out_dir}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        assert proc.stdout is not None
        output = proc.stdout.read().decode(errors="replace")
        _, status, usage = os.wait4(proc.pid, 0)  # the job's own rusage (and its waited-for children)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for b in burners:
            b.kill()
            b.wait()
        if proc is not None and proc.returncode is None:  # interrupted: the job goes too
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"{policy}/{'loaded' if loaded else 'idle'} run failed:\n{output[-3000:]}")
    return {
        "policy": policy,
        "loaded": loaded,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": wall,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per (policy, condition) and the ratios the target is about."""
    med = {
        f"{p}_{c}": {
            k: statistics.median(r[k] for r in runs if r["policy"] == p and r["loaded"] == (c == "loaded"))
            for k in ("cpu_s", "wall_s")
        }
        for p in ("old", "new")
        for c in ("idle", "loaded")
        if any(r["policy"] == p and r["loaded"] == (c == "loaded") for r in runs)
    }
    ratios = {}
    for p in ("old", "new"):
        if f"{p}_idle" in med and f"{p}_loaded" in med:
            ratios[f"{p}_cpu_loaded_over_idle"] = med[f"{p}_loaded"]["cpu_s"] / med[f"{p}_idle"]["cpu_s"]
            ratios[f"{p}_wall_loaded_over_idle"] = med[f"{p}_loaded"]["wall_s"] / med[f"{p}_idle"]["wall_s"]
    for c in ("idle", "loaded"):
        if f"old_{c}" in med and f"new_{c}" in med:
            ratios[f"new_over_old_cpu_{c}"] = med[f"new_{c}"]["cpu_s"] / med[f"old_{c}"]["cpu_s"]
            ratios[f"new_over_old_wall_{c}"] = med[f"new_{c}"]["wall_s"] / med[f"old_{c}"]["wall_s"]
    return {"medians": med, "ratios": ratios}


def write_markdown(data: dict[str, Any], path: Path) -> None:
    s, r = data["summary"], data["summary"]["ratios"]
    lines = [
        "# CPU thread policy: the main job's CPU time alone vs under load",
        "",
        f"Command: `{data['command']}`  ",
        f"Date: {data['date']}  ",
        f"Machine: {data['machine']}  ",
        f"Load average (1 min) over the runs: {data['load_min']:.1f} to {data['load_max']:.1f} "
        "(other jobs share this machine; *idle* means without this benchmark's busy loops)",
        "",
        f"Job: `rlgym train {' '.join(JOB)}` (the README's main job, shortened). Old: torch's defaults "
        f"(OpenMP's spinning workers, torch's default thread count). New: `rlgym`'s policy "
        f"(`OMP_WAIT_POLICY=PASSIVE`, `trainer.threads=auto`). Loaded: {data['hogs']} busy-loop processes "
        "beside the job. Each run is a separate process; CPU is its rusage (user + system).",
        "",
        "| policy | condition | runs | CPU s (median) | wall s (median) |",
        "|---|---|---|---|---|",
    ]
    for key, m in s["medians"].items():
        p, c = key.split("_")
        n = sum(1 for x in data["runs"] if x["policy"] == p and x["loaded"] == (c == "loaded"))
        lines.append(f"| {p} | {c} | {n} | {m['cpu_s']:.1f} | {m['wall_s']:.1f} |")
    lines += ["", "| ratio | value |", "|---|---|"]
    lines += [f"| {k} | {v:.2f}x |" for k, v in r.items()]
    if "new_cpu_loaded_over_idle" in r:
        ok = r["new_cpu_loaded_over_idle"] <= 1.3
        lines += [
            "",
            f"Target (new policy: CPU under load / CPU alone <= 1.3x): "
            f"{'met' if ok else 'NOT met'}, {r['new_cpu_loaded_over_idle']:.2f}x.",
        ]
    lines += ["", "Runs in order:", "", "| # | policy | condition | CPU s | wall s | load before | load after |"]
    lines.append("|---|---|---|---|---|---|---|")
    for i, x in enumerate(data["runs"]):
        cond = "loaded" if x["loaded"] else "idle"
        lines.append(
            f"| {i + 1} | {x['policy']} | {cond} | {x['cpu_s']:.1f} | {x['wall_s']:.1f} | "
            f"{x['load_before']:.1f} | {x['load_after']:.1f} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2, help="ABBA blocks' halves: 2 gives old,new,new,old")
    parser.add_argument("--hogs", type=int, default=2, help="busy-loop processes in a loaded run")
    parser.add_argument("--resume", action="store_true", help="keep the runs already in the json")
    parser.add_argument("--out", type=Path, default=RESULTS / "thread_policy")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a `kill` still stops the busy loops and the job

    order = [p for k in range(args.reps) for p in (("old", "new") if k % 2 == 0 else ("new", "old"))]
    # each policy's idle and loaded runs alternate which comes first
    plan = [(p, loaded) for i, p in enumerate(order) for loaded in ((False, True) if i % 2 == 0 else (True, False))]
    json_path = args.out.with_suffix(".json")
    runs: list[dict[str, Any]] = []
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.resume and json_path.exists():
        saved = json.loads(json_path.read_text())
        runs, started = saved["runs"], saved["date"]  # the date its first run started
    cpu = platform.processor() or platform.machine()
    data: dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "date": started,
        "machine": f"{platform.system()} {cpu}, {os.cpu_count()} cores, "
        f"affinity {len(os.sched_getaffinity(0))} CPUs, Python {platform.python_version()}",
        "hogs": args.hogs,
        "job": JOB,
        "plan": [[p, loaded] for p, loaded in plan],
    }

    def save() -> None:
        loads = [x[k] for x in runs for k in ("load_before", "load_after")]
        data.update(runs=runs, summary=summarize(runs), load_min=min(loads), load_max=max(loads))
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(data, indent=2) + "\n")
        write_markdown(data, args.out.with_suffix(".md"))

    with tempfile.TemporaryDirectory(prefix="thread-policy-") as tmp:
        for i, (policy, loaded) in enumerate(plan):
            if i < len(runs):
                continue
            run = run_job(policy, loaded, args.hogs, Path(tmp) / f"run{i}")
            runs.append(run)
            print(
                f"{i + 1}/{len(plan)} {policy} {'loaded' if loaded else 'idle'}: "
                f"CPU {run['cpu_s']:.1f} s, wall {run['wall_s']:.1f} s, load {run['load_before']:.1f}",
                flush=True,
            )
            save()  # after every run: a kill loses one run
    runs = runs[: len(plan)]  # a resumed json may hold a longer plan's runs
    save()
    print(json.dumps(data["summary"]["ratios"], indent=2))


if __name__ == "__main__":
    main()
