"""Per-execution latency of `python -c "print(1)"`: sandbox backends (warm) vs a plain subprocess.

    python benchmarks/sandbox_latency.py                     # local vs subprocess, N=200 each
    python benchmarks/sandbox_latency.py --backends local,docker

Runs are interleaved (one of each per round) so background load hits every column alike.
Writes benchmarks/results/sandbox_latency.{json,md}.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rlgym_llm.sandbox import Limits, make_sandbox

CODE = "print(1)"
RESULTS = Path(__file__).resolve().parent / "results"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _subprocess_once() -> None:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    assert out.stdout == "1\n"


async def _run(backends: list[str], n: int, warmup: int) -> dict[str, list[float]]:
    boxes = {name: make_sandbox(name, Limits(wall_s=10)) for name in backends}
    for box in boxes.values():
        await box.start()
    try:
        samples: dict[str, list[float]] = {"subprocess": [], **{name: [] for name in boxes}}
        for i in range(warmup + n):
            start = time.perf_counter()
            _subprocess_once()
            elapsed = {"subprocess": time.perf_counter() - start}
            for name, box in boxes.items():
                start = time.perf_counter()
                # The host's interpreter path does not exist inside a container image.
                python = sys.executable if name == "local" else "python3"
                result = await box.exec([python, "-c", CODE])
                elapsed[name] = time.perf_counter() - start
                assert result.ok and result.stdout == "1\n", result
            if i >= warmup:
                for name, seconds in elapsed.items():
                    samples[name].append(seconds)
        return samples
    finally:
        for box in boxes.values():
            await box.close()


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", default="local", help="comma-separated sandbox backends to measure")
    parser.add_argument("-n", type=int, default=200, help="measured runs per column")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    load_before = os.getloadavg()[0]  # the machine is shared: absolute numbers move with load, ratios less so
    samples = asyncio.run(_run(backends, args.n, args.warmup))
    base = statistics.median(samples["subprocess"])
    rows = {
        name: {
            "p50_ms": 1000 * statistics.median(values),
            "p99_ms": 1000 * _percentile(values, 0.99),
            "mean_ms": 1000 * statistics.fmean(values),
            "p50_ratio_vs_subprocess": statistics.median(values) / base,
        }
        for name, values in samples.items()
    }
    command = "python benchmarks/sandbox_latency.py " + " ".join(sys.argv[1:])
    report = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": _machine(),
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": os.getloadavg()[0],
        "command": command.strip(),
        "n": args.n,
        "code": CODE,
        "results": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sandbox_latency.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# Sandbox per-execution latency",
        "",
        f'`python -c "{CODE}"`, {args.n} runs per column, interleaved; warm sandboxes (started before timing).',
        "",
        "| column | p50 (ms) | p99 (ms) | mean (ms) | p50 / subprocess |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['mean_ms']:.2f} | "
            f"{row['p50_ratio_vs_subprocess']:.2f}x |"
        )
    lines += [
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- load average (1 min) before/after: {load_before:.2f} / {report['load_avg_1m_after']:.2f}",
        f"- reproduce: `{report['command']}`",
    ]
    (args.out / "sandbox_latency.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
