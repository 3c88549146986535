"""Env step cost, ours vs GEM and SkyRL-gym, measured in the same run (ABBA order), as ratios.

    python benchmarks/peers/env_step.py                    # installs the peers' venvs on first use
    python benchmarks/peers/env_step.py --calls 300 --no-write   # a quick look

Every system grades the same locally generated GSM8K-like rows (`gsm8k_like.py`; no hub download)
with ~450-character chain-of-thought actions, correct and wrong (answer + 1, well formatted). Each
system runs in its own process and interpreter (ours: this one; GEM and SkyRL: their venvs under
`benchmarks/peers/.venvs/`), see `env_worker.py` for what one call does. Runs are interleaved in
ABBA order (all systems, then all in reverse) `--cycles` times; each cell reports the median over runs.

Comparisons (the target: our cost at most 1/3 of the faster peer's, i.e. a ratio <= 0.33):
- light path (`ours-light`: a bare `submit_answer("N")`) vs SkyRL's string checks (`gsm8k`, `aime`),
  both building an env per episode as their trainers do;
- full verifier (`ours-full-reuse`: the whole `\\boxed{}` response through our verifier, envs reused)
  vs GEM's grader (`gem`: default, grading process per env; `gem-inproc`: in-process SIGALRM
  grading), both reusing envs as GEM's vector env does; and `ours-full` (env made per episode, as
  our rollout manager does today) vs the same.

Writes benchmarks/results/peers/env_step.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gsm8k_like  # noqa: E402
import report  # noqa: E402
import venvs  # noqa: E402

RESULTS = HERE.parent / "results" / "peers"
SYSTEMS = (
    "ours-light",
    "ours-light-reuse",
    "ours-full",
    "ours-full-reuse",
    "gem",
    "gem-inproc",
    "skyrl-gsm8k",
    "skyrl-aime",
)
VENV_OF = {"gem": "gem", "gem-inproc": "gem", "skyrl-gsm8k": "skyrl", "skyrl-aime": "skyrl"}
# (title, ours, peers): each pairs our path with the peers' equivalent, env lifetimes alike.
COMPARISONS = (
    ("light path, env made per episode, vs SkyRL-gym string checks", "ours-light", ("skyrl-gsm8k", "skyrl-aime")),
    ("full verifier, env reused, vs GEM's grader", "ours-full-reuse", ("gem", "gem-inproc")),
    ("full verifier, env made per episode, vs GEM's grader", "ours-full", ("gem", "gem-inproc")),
)
LATENCY_CELLS = ("reset", "step_correct", "step_wrong", "episode_correct", "episode_wrong")
BATCH_CELLS = ("sync_correct", "sync_wrong", "threads_correct", "threads_wrong")


def run_worker(system: str, data: Path, args: argparse.Namespace) -> dict[str, Any]:
    py = str(venvs.python_of(VENV_OF[system])) if system in VENV_OF else sys.executable
    cmd = [py, str(HERE / "env_worker.py"), system, str(data), "--calls", str(args.calls)]
    cmd += ["--rounds", str(args.rounds), "--budget-s", str(args.budget_s)]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"{system} failed:\n{res.stderr[-3000:]}")
    out = json.loads(next(ln for ln in reversed(res.stdout.splitlines()) if ln.startswith("RESULT "))[7:])
    out["wall_s"] = time.perf_counter() - t0
    print(f"  {system:12s} {out['wall_s']:6.1f} s", file=sys.stderr, flush=True)
    return out


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median over runs of every cell; episode = reset + step (their p50s summed, per run)."""
    out: dict[str, Any] = {}
    for system, rs in runs.items():
        cells: dict[str, Any] = {}
        for cell in ("reset", "step_correct", "step_wrong"):
            cells[cell] = {
                "p50_us": statistics.median(r["single"][cell]["p50_us"] for r in rs),
                "p99_us": statistics.median(r["single"][cell]["p99_us"] for r in rs),
                "n": sum(r["single"][cell]["n"] for r in rs),
                "mean_reward": rs[0]["single"][cell]["mean_reward"],
            }
        for kind in ("correct", "wrong"):
            ep = [r["single"]["reset"]["p50_us"] + r["single"][f"step_{kind}"]["p50_us"] for r in rs]
            cells[f"episode_{kind}"] = {"p50_us": statistics.median(ep)}
        for cell in BATCH_CELLS:
            vals = [r["batched"][cell] for r in rs if cell in r["batched"]]
            if vals:
                cells[cell] = {
                    "env_steps_per_s": statistics.median(v["env_steps_per_s"] for v in vals),
                    "mean_reward": vals[0]["mean_reward"],
                }
        out[system] = cells
    return out


def cost(cells: dict[str, Any], cell: str) -> float | None:
    """µs per call (latency cells) or µs per env-step (batched cells); None if not measured."""
    c = cells.get(cell)
    if c is None:
        return None
    return c["p50_us"] if "p50_us" in c else 1e6 / c["env_steps_per_s"]


def comparisons(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for title, ours, peers in COMPARISONS:
        for cell in LATENCY_CELLS + BATCH_CELLS + ("batched_best_correct", "batched_best_wrong"):
            if cell.startswith("batched_best"):
                kind = cell.rsplit("_", 1)[1]

                def best(s: str, kind: str = kind) -> float | None:
                    vals = [cost(summary[s], f"{m}_{kind}") for m in ("sync", "threads")]
                    vals = [v for v in vals if v is not None]
                    return min(vals) if vals else None

                ours_cost, peer_costs = best(ours), {p: best(p) for p in peers}
            else:
                ours_cost, peer_costs = cost(summary[ours], cell), {p: cost(summary[p], cell) for p in peers}
            measured = {p: c for p, c in peer_costs.items() if c is not None}
            if ours_cost is None or not measured:
                continue
            faster = min(measured, key=lambda p: measured[p])
            ratio = ours_cost / measured[faster]
            rows.append(
                {
                    "comparison": title,
                    "cell": cell,
                    "ours_us": ours_cost,
                    "faster_peer": faster,
                    "peer_us": measured[faster],
                    "ratio": ratio,
                    "met": ratio <= 1 / 3,
                }
            )
    return rows


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "os": platform.platform()}


def write(result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "env_step.json").write_text(json.dumps(result, indent=2) + "\n")
    s, m = result["summary"], result["machine"]
    lines = [
        "# Env step cost: rlgym-llm vs GEM and SkyRL-gym",
        "",
        f"Date: {result['date']}. Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        "(the machine was shared with other jobs: compare ratios, not absolute numbers).",
        "",
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s; venv installs not included).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items())) + ".",
        "",
        f"Same {result['rows']} synthetic GSM8K-like rows for all (three-number word problems, integer answers, "
        "~450-character chain-of-thought actions; wrong = answer + 1, well formatted). "
        f"Each system in its own process, {result['cycles']} ABBA cycle(s) "
        f"({' '.join(result['order'][: len(SYSTEMS)])} then reversed): "
        "every cell is the median over runs. What one call does: `benchmarks/peers/env_worker.py`.",
        "",
        "## Ratios (ours / faster peer; target <= 0.33)",
        "",
        "Cost = µs per call (p50) or µs per env-step (batched, 1 / throughput). Episode = reset + one step.",
        "",
        "| comparison | cell | ours µs | faster peer | peer µs | ratio | target met |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for r in result["comparisons"]:
        lines.append(
            f"| {r['comparison']} | {r['cell']} | {r['ours_us']:.1f} | {r['faster_peer']} | {r['peer_us']:.1f} | "
            f"{r['ratio']:.3f} | {'yes' if r['met'] else '**no**'} |"
        )
    lines += [
        "",
        "## Single process: latency per call (µs)",
        "",
        "| system | reset p50 | reset p99 | step correct p50 | p99 | step wrong p50 | p99 | reward correct / wrong |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name in SYSTEMS:
        if name not in s:
            continue
        c = s[name]
        lines.append(
            f"| {name} | {c['reset']['p50_us']:.1f} | {c['reset']['p99_us']:.1f} | "
            f"{c['step_correct']['p50_us']:.1f} | {c['step_correct']['p99_us']:.1f} | "
            f"{c['step_wrong']['p50_us']:.1f} | {c['step_wrong']['p99_us']:.1f} | "
            f"{c['step_correct']['mean_reward']:g} / {c['step_wrong']['mean_reward']:g} |"
        )
    lines += [
        "",
        "## 64 envs: env-steps/s (reset + step per episode)",
        "",
        "| system | sync, correct | sync, wrong | 64 threads, correct | 64 threads, wrong |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in SYSTEMS:
        if name not in s:
            continue
        vals = [f"{s[name][c]['env_steps_per_s']:,.0f}" if c in s[name] else "n/a" for c in BATCH_CELLS]
        lines.append(f"| {name} | " + " | ".join(vals) + " |")
    lines += [""]
    report.write_markdown(RESULTS / "env_step.md", lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000, help="timed calls per single-process cell")
    ap.add_argument("--rounds", type=int, default=10, help="rounds of 64 episodes per batched cell")
    ap.add_argument("--budget-s", type=float, default=5.0, help="time cap per cell (slow peers stop early)")
    ap.add_argument("--cycles", type=int, default=1, help="ABBA cycles (each runs every system twice)")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    t0 = time.perf_counter()
    for venv in sorted({VENV_OF[s] for s in systems if s in VENV_OF}):
        venvs.ensure(venv)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        data = gsm8k_like.write(Path(tmp) / "gsm8k_like.jsonl", n=args.rows)
        order = [s for _ in range(args.cycles) for s in (*systems, *reversed(systems))]
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
        for system in order:
            runs[system].append(run_worker(system, data, args))
    summary = summarise(runs)
    import importlib.metadata as md

    versions = {"rlgym-llm": md.version("rlgym-llm"), "math-verify (ours)": md.version("math-verify")}
    if "gem" in {VENV_OF.get(s) for s in systems}:
        versions.update(
            {
                f"{k} (GEM venv)" if k == "math-verify" else k: v
                for k, v in venvs.versions("gem", ["gem-llm", "math-verify"]).items()
            }
        )
    if "skyrl" in {VENV_OF.get(s) for s in systems}:
        versions.update(venvs.versions("skyrl", ["skyrl-gym"]))
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "load_before": load_before,
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "command": f"python benchmarks/peers/env_step.py {argv}".strip(),
        "wall_s": time.perf_counter() - t0,
        "versions": versions,
        "rows": args.rows,
        "cycles": args.cycles,
        "order": order,
        "summary": summary,
        "comparisons": comparisons(summary),
        "runs": runs,
    }
    for r in result["comparisons"]:
        print(
            f"{r['comparison']:40s} {r['cell']:22s} ours {r['ours_us']:9.1f} µs  {r['faster_peer']:12s} "
            f"{r['peer_us']:9.1f} µs  ratio {r['ratio']:.3f}  {'MET' if r['met'] else 'not met'}"
        )
    if not args.no_write:
        write(result)
        print(f"wrote {RESULTS / 'env_step.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
