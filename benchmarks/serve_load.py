"""Load on one `rlgym serve` server: 64 concurrent sessions of Search-v0 and of Code-v0 (local box).

    python benchmarks/serve_load.py                         # both envs, 64 sessions, 180 s each
    python benchmarks/serve_load.py --envs rlgym/Search-v0 --sessions 8 --seconds 10   # a quick look

For each env: a server (`python -m rlgym_llm.cli.main serve ENV --max-sessions N`) in its own process,
and N client threads, each holding one session (rlgym/Remote-v0) and playing episodes back to back for
`--seconds`: seeds i, i + N, i + 2N, ... with a fixed script of tool calls per env. Then the same
episodes (the seeds each thread finished, the same script) in this process with N threads, one env
each. Reported side by side: requests, failed requests, p50 / p99 of a step and of a reset, and the
sandbox processes left (children of the server once every client has closed; children of this
process once the in-process envs are closed).

Both sides run on the same 2-core machine as the clients, so the served latencies include the
clients' own JSON and WebSocket work and the contention between 64 threads and the server.
Writes benchmarks/results/serve_load.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

import rlgym_llm

RESULTS = Path(__file__).resolve().parent / "results"


def _call(name: str, **args: Any) -> dict[str, Any]:
    arguments = json.dumps(args)
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}]}  # fmt: skip


SOLUTION = "import sys\nfrom collections import Counter\nc = Counter(sys.stdin.read().split())\nfor w, n in sorted(c.items(), key=lambda x: (-x[1], x[0])):\n    print(w, n)\n"  # fmt: skip
SCRIPTS = {  # what a middling agent does: a look around, a malformed call, then an answer
    "rlgym/Search-v0": [
        _call("search", query="founded organisation employs"),
        _call("open", doc_id="d0"),
        "I think I know.",
        _call("search", query="person"),
        _call("answer", answer="Acme"),
    ],
    "rlgym/Code-v0": [
        _call("run_examples", code="print(input())"),
        _call("run_examples", code=SOLUTION),
        "def f(:",
        _call("submit", code=SOLUTION),
    ],
}


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Side:
    """What one side (served or in process) measured."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[float] = []
        self.resets: list[float] = []
        self.failures: list[str] = []
        self.episodes = 0

    def add(self, steps: list[float], reset: float) -> None:
        with self.lock:
            self.steps += steps
            self.resets.append(reset)
            self.episodes += 1

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what)

    def summary(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "requests": len(self.steps) + len(self.resets),
            "failed_requests": len(self.failures),
            "failures": self.failures[:10],
            "step_p50_ms": 1000 * _percentile(self.steps, 0.50),
            "step_p99_ms": 1000 * _percentile(self.steps, 0.99),
            "reset_p50_ms": 1000 * _percentile(self.resets, 0.50),
            "reset_p99_ms": 1000 * _percentile(self.resets, 0.99),
            "step_mean_ms": 1000 * statistics.fmean(self.steps) if self.steps else float("nan"),
        }


def _episode(env: Any, seed: int, script: list[Any], side: Side) -> None:
    start = time.perf_counter()
    env.reset(seed=seed)
    reset = time.perf_counter() - start
    steps = []
    for action in script:
        start = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        steps.append(time.perf_counter() - start)
        if terminated or truncated:
            break
    side.add(steps, reset)


def _served(env_id: str, sessions: int, seconds: float) -> tuple[Side, list[list[int]], int, int]:
    cmd = [sys.executable, "-m", "rlgym_llm.cli.main", "serve", env_id, "--port", "0"]
    cmd += ["--max-sessions", str(sessions), "--max-turns", "8"]
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline() if server.stdout else ""
        if not line.startswith("rlgym serve: "):
            raise SystemExit(f"the server did not start: {line!r}")
        url = line.split(" at ")[1].split()[0]
        side, done = Side(), [[] for _ in range(sessions)]
        stop = time.monotonic() + seconds

        def client(i: int) -> None:
            env = rlgym_llm.make("rlgym/Remote-v0", url=url, max_turns=8, step_timeout_s=120)
            seed = i
            try:
                while time.monotonic() < stop:
                    try:
                        _episode(env, seed, SCRIPTS[env_id], side)
                        done[i].append(seed)
                    except Exception as e:  # counted, and the thread goes on with the next episode
                        side.fail(f"seed {seed}: {type(e).__name__}: {e}"[:300])
                    seed += sessions
            finally:
                env.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(sessions)]
        for t in threads:
            t.start()
        peak = 0
        while any(t.is_alive() for t in threads):
            peak = max(peak, len(psutil.Process(server.pid).children(recursive=True)))
            time.sleep(1.0)
        for t in threads:
            t.join()
        deadline = time.monotonic() + 30  # the server closes each session's env as its client leaves
        while (left := len(psutil.Process(server.pid).children(recursive=True))) and time.monotonic() < deadline:
            time.sleep(0.5)
        return side, done, peak, left
    finally:
        server.terminate()
        server.wait(timeout=60)


def _in_process(env_id: str, seeds: list[list[int]]) -> tuple[Side, int]:
    side = Side()

    def worker(mine: list[int]) -> None:
        env = rlgym_llm.make(env_id, max_turns=8)
        try:
            for seed in mine:
                try:
                    _episode(env, seed, SCRIPTS[env_id], side)
                except Exception as e:
                    side.fail(f"seed {seed}: {type(e).__name__}: {e}"[:300])
        finally:
            env.close()

    threads = [threading.Thread(target=worker, args=(mine,)) for mine in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(1.0)
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    return side, len(left)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="rlgym/Search-v0,rlgym/Code-v0")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--out", default=str(RESULTS / "serve_load"))
    args = parser.parse_args()
    rows = []
    for env_id in args.envs.split(","):
        t0 = time.time()
        served, seeds, peak, left = _served(env_id, args.sessions, args.seconds)
        local, local_left = _in_process(env_id, seeds)
        row = {
            "env": env_id,
            "sessions": args.sessions,
            "seconds": args.seconds,
            "served": {**served.summary(), "peak_server_children": peak, "sandboxes_left": left},
            "in_process": {**local.summary(), "sandboxes_left": local_left},
            "wall_s": round(time.time() - t0, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    command = "python benchmarks/serve_load.py " + " ".join(sys.argv[1:])
    meta = {
        "command": command.strip(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cpus, python {platform.python_version()}",
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    lines = [
        "# One `rlgym serve` server under load",
        "",
        f"`{meta['command']}` ({meta['date']}, {meta['machine']}). Each env: {args.sessions} client threads,",
        "one session each, episodes back to back; then the same episodes in process on as many threads.",
        "",
        "| env | side | episodes | requests | failed | step p50 ms | step p99 ms | reset p50 ms | reset p99 ms | sandboxes left |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for name in ("served", "in_process"):
            s = row[name]
            lines.append(
                f"| {row['env']} | {name.replace('_', ' ')} | {s['episodes']} | {s['requests']} | {s['failed_requests']} "
                f"| {s['step_p50_ms']:.1f} | {s['step_p99_ms']:.1f} | {s['reset_p50_ms']:.1f} | {s['reset_p99_ms']:.1f} "
                f"| {s['sandboxes_left']} |"
            )
    lines += [
        "",
        "Served latencies are end to end (client JSON + WebSocket + server + env), with the clients on the same",
        "2 cores as the server. `sandboxes left`: processes under the server once every client had closed",
        "(served), or under the benchmark once the in-process envs were closed.",
    ]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    failed = sum(r[s]["failed_requests"] for r in rows for s in ("served", "in_process"))
    leaked = sum(r[s]["sandboxes_left"] for r in rows for s in ("served", "in_process"))
    if failed or leaked:
        raise SystemExit(f"{failed} failed requests, {leaked} sandboxes left (see {out.with_suffix('.md')})")


if __name__ == "__main__":
    main()
