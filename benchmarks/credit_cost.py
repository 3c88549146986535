"""What credit assignment costs per training step: the estimators themselves, and IGPO's scoring pass.

    python benchmarks/credit_cost.py                 # writes benchmarks/results/credit_cost.{json,md}
    python benchmarks/credit_cost.py --no-write --groups 8

1. `compute_advantages` for every method on a synthetic batch (`--groups` groups of `--group-size`
   rollouts with 1..`--turns` turns each): milliseconds per batch (median of `--repeats`).
2. IGPO answer scoring on the tiny model (`rlgym_llm.rollout.tiny_model`): one probe per turn,
   contexts of ~`--score-contexts` tokens. It compares an unbatched loop (padded, micro-batch 1), padded
   micro-batches and the per-trajectory KV-cache method: probes/s, and the largest difference
   from the loop.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from rlgym_llm.core.types import AssistantTurn, Trajectory, Turn
from rlgym_llm.credit import METHODS, compute_advantages

RESULTS = Path(__file__).parent / "results"


def synthetic_batch(groups: int, size: int, turns: int, context: int, seed: int = 0) -> list[Trajectory]:
    rng = np.random.default_rng(seed)
    out = []
    for g in range(groups):
        for i in range(size):
            n = int(rng.integers(1, turns + 1))
            obs = max(context // (2 * turns), 1)
            out.append(
                Trajectory(
                    env_id="bench/Env-v0",
                    seed=g,
                    task_id=str(g),
                    group_id=str(g),
                    sample_index=i,
                    prompt_token_ids=tuple(int(x) for x in rng.integers(10, 1000, context // 2)),
                    turns=[
                        Turn(
                            index=t,
                            action=AssistantTurn(),
                            observation=[],
                            reward=float(rng.random() < 0.3),
                            terminated=t == n - 1,
                            truncated=False,
                            signals={"tool_ok": bool(rng.random() < 0.7), "state_key": f"s{rng.integers(4)}"},
                            obs_token_ids=tuple(int(x) for x in rng.integers(10, 1000, obs if t else 0)),
                            completion_token_ids=tuple(int(x) for x in rng.integers(10, 1000, 16)),
                            completion_logprobs=(-1.0,) * 16,
                        )
                        for t in range(n)
                    ],
                    outcome={"reward": float(rng.random() < 0.5)},
                )
            )
    return out


def time_methods(trajs: list[Trajectory], repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(1)
    extra = {
        "gated": {"outcome_tau": 0.5},
        "igpo": {"answer_probs": [rng.random(len(t.turns)) for t in trajs]},
        "spa": {"contributions": [rng.normal(size=len(t.turns)) for t in trajs]},
    }
    out = {}
    for method in METHODS:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            result = compute_advantages(trajs, method, **extra.get(method, {}))
            result.token_advantages(trajs)
            times.append(time.perf_counter() - start)
        out[method] = 1000 * statistics.median(times)
    return out


def time_scoring(
    trajs: list[Trajectory], batch_sizes: list[int], repeats: int, threads: int
) -> dict[str, dict[str, float]]:
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    from rlgym_llm.rollout.tiny_model import build_tiny_model
    from rlgym_llm.train.credit_models import AnswerTemplate, igpo_answer_probs

    model = AutoModelForCausalLM.from_pretrained(build_tiny_model(), dtype=torch.float32)
    tmpl = AnswerTemplate(answer_ids=(100, 200, 300, 400), template_prefix_ids=(5, 6, 7), template_suffix_ids=(8,))
    templates = [tmpl] * len(trajs)
    n_probes = sum(len(t.turns) for t in trajs)
    reference = None
    out = {}
    runs = [("padded", bs) for bs in batch_sizes] + [("prefix_cache", 1)]
    for method, bs in runs:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            probs = igpo_answer_probs(model, trajs, templates, method=method, micro_batch_size=bs)
            times.append(time.perf_counter() - start)
        flat = np.concatenate(probs)
        reference = flat if reference is None else reference
        secs = statistics.median(times)
        out[method if method == "prefix_cache" else f"padded, micro-batch {bs}"] = {
            "seconds": secs,
            "probes_per_s": n_probes / secs,
            "max_abs_diff_vs_first": float(np.abs(flat - reference).max()),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=64)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--turns", type=int, default=5)
    ap.add_argument("--context", type=int, default=256, help="approximate tokens before the last turn")
    ap.add_argument("--score-contexts", type=int, nargs="+", default=[256, 1536], help="contexts of the IGPO pass")
    ap.add_argument("--score-groups", type=int, default=2, help="groups scored in the IGPO pass")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 is steadiest on a shared machine)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    trajs = synthetic_batch(args.groups, args.group_size, args.turns, args.context)
    methods = time_methods(trajs, args.repeats)
    scoring, n_probes = {}, {}
    for ctx in args.score_contexts:
        scored = synthetic_batch(args.score_groups, args.group_size, args.turns, ctx, seed=1)
        n_probes[ctx] = sum(len(t.turns) for t in scored)
        scoring[ctx] = time_scoring(scored, [1, 8, 32], args.repeats, args.threads)
    record = {
        "command": "python " + " ".join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}, "
        f"{args.threads} torch thread(s)",
        "batch": {"trajectories": len(trajs), "turns": sum(len(t.turns) for t in trajs)},
        "compute_advantages_ms": methods,
        "igpo_scoring": {f"context_{c}": {"probes": n_probes[c], **scoring[c]} for c in args.score_contexts},
    }
    lines = [
        "# Credit assignment cost",
        "",
        f"`{record['command']}` ({record['date']}, {record['machine']})",
        "",
        f"## compute_advantages + token broadcast: {len(trajs)} trajectories, {record['batch']['turns']} turns",
        "",
        "| method | ms per batch |",
        "|---|---|",
        *[f"| {m} | {v:.1f} |" for m, v in methods.items()],
        "",
        "## IGPO answer scoring, tiny model",
        "",
        "| context | probes | method | probes/s | seconds | max abs diff vs the unbatched loop |",
        "|---|---|---|---|---|---|",
        *[
            f"| ~{c} | {n_probes[c]} | {k} | {v['probes_per_s']:.1f} | {v['seconds']:.2f} | "
            f"{v['max_abs_diff_vs_first']:.1e} |"
            for c in args.score_contexts
            for k, v in scoring[c].items()
        ],
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "credit_cost.json").write_text(json.dumps(record, indent=2) + "\n")
        md = RESULTS / "credit_cost.md"
        old = md.read_text() if md.exists() else ""
        analysis = old[old.index("## Analysis") :] if "## Analysis" in old else ""
        md.write_text(text + ("\n" + analysis if analysis else ""))


if __name__ == "__main__":
    main()
