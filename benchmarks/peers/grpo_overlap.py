"""End-to-end GRPO throughput with rollouts sampled ahead (`trainer.off_policy_steps=1`), against the
synchronous loop and TRL's `GRPOTrainer`, measured in the same run.

    python benchmarks/peers/grpo_overlap.py                # installs TRL's venv on first use
    python benchmarks/peers/grpo_overlap.py --steps 3 --no-write

The config of `grpo_update.py` (tiny model, 32 chat prompts, 8 completions = 2 prompts x 4 per
optimizer step, <= 64 new tokens at temperature 1, clip 0.2, no KL, token-mean loss, AdamW lr 1e-6
with linear decay, one micro-batch, 2 torch threads, OMP_WAIT_POLICY=PASSIVE). Four systems, each
run in its own process, in the order ours, TRL, loop, loop-overlap, loop-overlap-thread,
loop-overlap-thread, loop-overlap, loop, TRL, ours (`--cycles` times; 568 s with the defaults on the
2-core machine at load 18-19, an estimated ~5 min with `--steps 2 --warmup 1`; ~8 min more the first
time, to install TRL's venv):
- `trl`: `GRPOTrainer` (see `grpo_worker.run_trl`);
- `ours`: the hand-written sample-then-update loop of `grpo_update.py` (`grpo_worker.run_ours`);
- `loop`: the product's training loop, `rlgym_llm.train.loop.train`, synchronous (off_policy_steps=0),
  with a one-turn env per prompt, the rollout manager and GRPO credit;
- `loop-overlap`: the same with off_policy_steps=1 (step t+1 samples from a snapshot while step t
  updates; pi_old is recomputed, the behaviour logprobs enter the truncated IS weight), the snapshot
  sampled in a child process with `--sampler-threads` torch threads (`trainer.off_policy_threads`);
- `loop-overlap-thread`: the same, sampled in a thread of the trainer's process
  (`trainer.off_policy_threads=0`), sharing its GIL.
End-to-end completion tokens/s of a step = its completion tokens / its wall time (step start to step
start: sampling, credit, update, sync, whatever overlaps); cells are medians over the timed steps of
all runs of a system. Writes benchmarks/results/peers/grpo_overlap.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import grpo_update  # noqa: E402
import gsm8k_like  # noqa: E402
import report  # noqa: E402
import venvs  # noqa: E402
from env_step import RESULTS, machine  # noqa: E402

SYSTEMS = ("ours", "trl", "loop", "loop-overlap", "loop-overlap-thread")
LABELS = {
    "trl": "TRL GRPOTrainer",
    "ours": "ours, hand-written loop (grpo_update.py)",
    "loop": "ours, train loop, off_policy_steps=0",
    "loop-overlap": "ours, train loop, off_policy_steps=1, sampler process",
    "loop-overlap-thread": "ours, train loop, off_policy_steps=1, sampler thread",
}


def e2e(step: dict[str, Any]) -> float:
    return step["completion_tokens"] / step["wall_s"]


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system, rs in runs.items():
        steps = [s for r in rs for s in r["steps"]]
        values = {
            "e2e_completion_tokens_per_s": [e2e(s) for s in steps],
            "wall_s": [s["wall_s"] for s in steps],
            "gen_s": [s["gen_s"] for s in steps],
            "update_s": [s["update_s"] for s in steps],
            "completion_tokens": [s["completion_tokens"] for s in steps],
        }
        if all("gen_wait_s" in s for s in steps):
            values["gen_wait_s"] = [s["gen_wait_s"] for s in steps]
        out[system] = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in values.items()}
        out[system]["steps"] = len(steps)
        # pooled over each run's timed steps: total completion tokens / total wall
        out[system]["per_run_e2e"] = [
            sum(s["completion_tokens"] for s in r["steps"]) / sum(s["wall_s"] for s in r["steps"]) for r in rs
        ]
    return out


def write(result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "grpo_overlap.json").write_text(json.dumps(result, indent=2) + "\n")
    s, m, r = result["summary"], result["machine"], result["ratios"]
    thread_vs_trl = r["thread_vs_sync"] * r["sync_vs_trl"]
    lines = [
        "# End-to-end GRPO throughput: rollouts sampled ahead vs synchronous vs TRL GRPOTrainer",
        "",
        f"Date: {result['date']}. Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        "(shared with other jobs: compare ratios, not absolute numbers).",
        "",
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s; venv install not included).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items())) + ".",
        "",
        f"Settings (every system): {grpo_update.FLAGS}. Order: {' '.join(result['order'])}; "
        f"loop-overlap's sampling process: {result['sampler_threads']} torch thread(s). "
        f"{result['warmup']} warm-up step(s) per run untimed, {result['steps']} timed; cells are medians over "
        "all timed steps [min-max].",
        "",
        "## Result (end-to-end completion tokens/s, ratios of medians)",
        "",
        f"- off_policy_steps=1, sampler process / off_policy_steps=0 (the train loop): **{r['overlap_vs_sync']:.2f}**",
        f"- off_policy_steps=1, sampler process / sampler thread: **{r['process_vs_thread']:.2f}** "
        f"(the thread / sync: {r['thread_vs_sync']:.2f})",
        f"- off_policy_steps=1, sampler process / TRL: **{r['overlap_vs_trl']:.2f}** "
        f"(goal >= 1.5: {'met' if r['overlap_vs_trl'] >= 1.5 else '**not met**'})",
        f"- off_policy_steps=1, sampler thread (the default) / TRL: **{thread_vs_trl:.2f}** "
        f"(goal >= 1.5: {'met' if thread_vs_trl >= 1.5 else '**not met**'})",
        f"- off_policy_steps=0 (train loop) / TRL: {r['sync_vs_trl']:.2f}",
        f"- hand-written loop (`grpo_update.py`'s ours) / TRL: {r['ours_vs_trl']:.2f}",
        f"- pooled per run (total tokens / total wall), overlap / sync: "
        f"{', '.join(f'{x:.2f}' for x in r['overlap_vs_sync_per_pair'])} (adjacent runs)",
        "",
        "| per optimizer step | " + " | ".join(LABELS[x] for x in SYSTEMS) + " |",
        "|---|" + "---:|" * len(SYSTEMS),
    ]
    rows = (
        ("end-to-end completion tokens/s", "e2e_completion_tokens_per_s", "{:,.0f}"),
        ("wall (s)", "wall_s", "{:.3f}"),
        ("sampling (s)", "gen_s", "{:.3f}"),
        ("waiting for the batch (s)", "gen_wait_s", "{:.3f}"),
        ("update (s)", "update_s", "{:.3f}"),
        ("completion tokens", "completion_tokens", "{:.0f}"),
    )
    for label, key, fmt in rows:
        cells = []
        for system in SYSTEMS:
            c = s[system].get(key)
            cells.append(f"{fmt.format(c['median'])} [{fmt.format(c['min'])}–{fmt.format(c['max'])}]" if c else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    report.write_markdown(RESULTS / "grpo_overlap.md", lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6, help="timed optimizer steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps per run first")
    ap.add_argument("--cycles", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="torch threads of each system (the trainer's)")
    ap.add_argument("--sampler-threads", type=int, default=2, help="loop-overlap: the sampling process's torch threads")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--report", action="store_true", help="only rewrite the .md from the .json on disk")
    args = ap.parse_args()
    if args.report:
        write(json.loads((RESULTS / "grpo_overlap.json").read_text()))
        return
    t0 = time.perf_counter()
    venvs.ensure("trl")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    model_dir = build_tiny_model()
    import random

    rng = random.Random(0)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    cycle = [*SYSTEMS, *reversed(SYSTEMS)]  # ABBA: drifts of the machine's load cancel out in the ratios
    order = [s for _ in range(args.cycles) for s in cycle]
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.json"
        prompts.write_text(json.dumps([gsm8k_like.row(rng)["question"] for _ in range(32)]))
        for system in order:
            runs[system].append(grpo_update.run_worker(system, model_dir, prompts, args))
    summary = summarise(runs)
    med = {x: summary[x]["e2e_completion_tokens_per_s"]["median"] for x in SYSTEMS}
    ratios = {
        "overlap_vs_sync": med["loop-overlap"] / med["loop"],
        "overlap_vs_trl": med["loop-overlap"] / med["trl"],
        "process_vs_thread": med["loop-overlap"] / med["loop-overlap-thread"],
        "thread_vs_sync": med["loop-overlap-thread"] / med["loop"],
        "sync_vs_trl": med["loop"] / med["trl"],
        "ours_vs_trl": med["ours"] / med["trl"],
        "overlap_vs_sync_per_pair": [
            o / s for o, s in zip(summary["loop-overlap"]["per_run_e2e"], summary["loop"]["per_run_e2e"])
        ],
    }
    import importlib.metadata as md

    versions = {
        "rlgym-llm": md.version("rlgym-llm"),
        "torch": md.version("torch"),
        "transformers": md.version("transformers"),
        **{f"{k} (TRL venv)": v for k, v in venvs.versions("trl", ["trl", "torch", "transformers"]).items()},
    }
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "load_before": load_before,
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "command": f"python benchmarks/peers/grpo_overlap.py {argv}".strip(),
        "wall_s": time.perf_counter() - t0,
        "versions": versions,
        "order": order,
        "steps": args.steps,
        "warmup": args.warmup,
        "sampler_threads": args.sampler_threads,
        "summary": summary,
        "ratios": ratios,
        "runs": runs,
    }
    print(
        f"end-to-end completion tokens/s: overlap/sync {ratios['overlap_vs_sync']:.2f}, overlap/TRL "
        f"{ratios['overlap_vs_trl']:.2f}, sync/TRL {ratios['sync_vs_trl']:.2f}, hand loop/TRL {ratios['ours_vs_trl']:.2f}"
    )
    if not args.no_write:
        write(result)
        print(f"wrote {RESULTS / 'grpo_overlap.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
