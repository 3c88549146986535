"""GRPO update throughput, ours (`PolicyTrainer`) vs TRL's `GRPOTrainer`, measured in the same run (ABBA).

    python benchmarks/peers/grpo_update.py                 # installs TRL's venv on first use
    python benchmarks/peers/grpo_update.py --steps 3 --no-write

Same tiny model (the project's, `rlgym_llm.rollout.tiny_model.build_tiny_model()`, random init,
fp32), same 32 chat prompts, same batch (8 completions = 2 prompts x 4), same lengths (<= 64 new
tokens) and loss settings; see `grpo_worker.py` for the exact flags. Runs alternate ours, TRL, TRL,
ours (`--cycles` times), each in its own process and venv; timings are pooled over the timed steps
of all runs of a system, and each cell is the median. Both workers run with `OMP_WAIT_POLICY=PASSIVE`:
on a shared 2-core machine, OpenMP's default spin-waiting made a 2-thread update 10x slower for both.

Target: our update tokens/s (prompt + completion tokens per second of loss forward/backward +
optimizer step) at least equal to TRL's (ratio >= 1). Writes benchmarks/results/peers/grpo_update.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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
from env_step import RESULTS, machine  # noqa: E402

FLAGS = (
    "per_device_train_batch_size=8, num_generations=4 (8 completions = 2 prompts x 4 per optimizer step), "
    "max_completion_length=64, temperature=1.0, top_p=1.0, top_k=0, beta=0.0 (no reference model), "
    "use_vllm=False, bf16=False (fp32), gradient_checkpointing=False, loss_type='dapo' (token mean over the batch; "
    "ours: agg='token-mean'), epsilon=0.2 both sides (ours: clip_low=clip_high=0.2), num_iterations=1 "
    "(old logprobs = the sampling policy's), AdamW lr 1e-6 with linear decay, weight decay 0, max_grad_norm=1.0, "
    "one micro-batch of 8, 2 torch threads, OMP_WAIT_POLICY=PASSIVE"
)


def run_worker(system: str, model_dir: Path, prompts: Path, args: argparse.Namespace) -> dict[str, Any]:
    py = str(venvs.python_of("trl")) if system == "trl" else sys.executable
    cmd = [py, str(HERE / "grpo_worker.py"), system, str(model_dir), str(prompts)]
    cmd += ["--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    if getattr(args, "sampler_threads", None) is not None:
        cmd += ["--sampler-threads", str(args.sampler_threads)]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{system} failed:\n{res.stderr[-3000:]}")
    out = json.loads(next(ln for ln in reversed(res.stdout.splitlines()) if ln.startswith("RESULT "))[7:])
    out["wall_s"] = time.perf_counter() - t0
    print(f"  {system:5s} {out['wall_s']:6.1f} s", file=sys.stderr, flush=True)
    return out


def per_step(s: dict[str, Any]) -> dict[str, float]:
    tokens = s["prompt_tokens"] + s["completion_tokens"]
    return {
        "update_s": s["update_s"],
        "gen_s": s["gen_s"],
        "wall_s": s["wall_s"],
        "tokens": tokens,
        "completion_tokens": s["completion_tokens"],
        "update_tokens_per_s": tokens / s["update_s"],
        "update_tokens_per_cpu_s": tokens / s["update_cpu_s"],
        "gen_tokens_per_s": s["completion_tokens"] / s["gen_s"],
        "gen_tokens_per_cpu_s": s["completion_tokens"] / s["gen_cpu_s"],
        "e2e_completion_tokens_per_s": s["completion_tokens"] / s["wall_s"],
    }


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for system, rs in runs.items():
        steps = [per_step(s) for r in rs for s in r["steps"]]
        out[system] = {
            key: {
                "median": statistics.median(s[key] for s in steps),
                "min": min(s[key] for s in steps),
                "max": max(s[key] for s in steps),
            }
            for key in steps[0]
        }
        out[system]["steps"] = len(steps)
        # per run, so the ABBA pairs can be compared one by one
        out[system]["per_run_update_tokens_per_s"] = [
            statistics.median(per_step(s)["update_tokens_per_s"] for s in r["steps"]) for r in rs
        ]
    return out


def write(result: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "grpo_update.json").write_text(json.dumps(result, indent=2) + "\n")
    s, m, r = result["summary"], result["machine"], result["ratios"]
    lines = [
        "# GRPO update throughput: rlgym-llm PolicyTrainer vs TRL GRPOTrainer",
        "",
        f"Date: {result['date']}. Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        "(the machine was shared with other jobs: compare ratios, not absolute numbers).",
        "",
        f"Command: `{result['command']}` ({result['wall_s']:.0f} s; venv install not included).",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(result["versions"].items())) + ".",
        "",
        f"Model: {result['model']}. Settings (both sides): {FLAGS}. "
        f"Order: {' '.join(result['order'])}; {result['warmup']} warm-up step(s) per run untimed, "
        f"{result['steps']} timed; cells are medians over all timed steps [min-max].",
        "",
        "## Result",
        "",
        f"- update tokens/s, ours / TRL: **{r['update_tokens_per_s']:.2f}** "
        f"(target >= 1: {'met' if r['update_tokens_per_s'] >= 1 else '**not met**'}); "
        f"per ABBA pair: {', '.join(f'{x:.2f}' for x in r['update_per_pair'])}",
        f"- update tokens per CPU-second (process CPU time, less disturbed by other jobs), ours / TRL: "
        f"{r['update_tokens_per_cpu_s']:.2f}",
        f"- generation tokens/s, ours / TRL: {r['gen_tokens_per_s']:.2f} "
        f"(per CPU-second: {r['gen_tokens_per_cpu_s']:.2f})",
        f"- end-to-end completion tokens/s, ours / TRL: {r['e2e_completion_tokens_per_s']:.2f}",
        "",
        "| per optimizer step | ours | TRL |",
        "|---|---:|---:|",
    ]
    rows = (
        ("wall (s)", "wall_s", "{:.3f}"),
        ("generation (s)", "gen_s", "{:.3f}"),
        ("update: loss fwd/bwd + optimizer (s)", "update_s", "{:.3f}"),
        ("tokens per step (prompt + completion)", "tokens", "{:.0f}"),
        ("update tokens/s", "update_tokens_per_s", "{:,.0f}"),
        ("update tokens per CPU-second", "update_tokens_per_cpu_s", "{:,.0f}"),
        ("generation tokens/s", "gen_tokens_per_s", "{:,.0f}"),
        ("generation tokens per CPU-second", "gen_tokens_per_cpu_s", "{:,.0f}"),
        ("end-to-end completion tokens/s", "e2e_completion_tokens_per_s", "{:,.0f}"),
    )
    for label, key, fmt in rows:
        cells = []
        for system in ("ours", "trl"):
            c = s[system][key]
            cells.append(f"{fmt.format(c['median'])} [{fmt.format(c['min'])}–{fmt.format(c['max'])}]")
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    lines += [""]
    report.write_markdown(RESULTS / "grpo_update.md", lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=6, help="timed optimizer steps per run")
    ap.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps per run first")
    ap.add_argument("--cycles", type=int, default=1, help="ABBA cycles (ours, TRL, TRL, ours)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    venvs.ensure("trl")
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    model_dir = build_tiny_model()
    import random

    rng = random.Random(0)
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    order = [s for _ in range(args.cycles) for s in ("ours", "trl", "trl", "ours")]
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        prompts = Path(tmp) / "prompts.json"
        prompts.write_text(json.dumps([gsm8k_like.row(rng)["question"] for _ in range(32)]))
        for system in order:
            runs[system].append(run_worker(system, model_dir, prompts, args))
    summary = summarise(runs)
    ratio: dict[str, Any] = {
        key: summary["ours"][key]["median"] / summary["trl"][key]["median"]
        for key in (
            "update_tokens_per_s",
            "update_tokens_per_cpu_s",
            "gen_tokens_per_s",
            "gen_tokens_per_cpu_s",
            "e2e_completion_tokens_per_s",
        )
    }
    ours_runs, trl_runs = summary["ours"]["per_run_update_tokens_per_s"], summary["trl"]["per_run_update_tokens_per_s"]
    ratio["update_per_pair"] = [o / t for o, t in zip(ours_runs, trl_runs)]  # (ours, TRL) adjacent in ABBA order
    import importlib.metadata as md

    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    from transformers import AutoModelForCausalLM

    n_params = f"{sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters()) / 1e6:.1f}M"
    versions = {
        "rlgym-llm": md.version("rlgym-llm"),
        "torch": md.version("torch"),
        "transformers": md.version("transformers"),
        **{
            f"{k} (TRL venv)": v
            for k, v in venvs.versions("trl", ["trl", "torch", "transformers", "accelerate"]).items()
        },
    }
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
    result = {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "load_before": load_before,
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "command": f"python benchmarks/peers/grpo_update.py {argv}".strip(),
        "wall_s": time.perf_counter() - t0,
        "versions": versions,
        "model": (
            f"tiny Qwen2 ({n_params} params, vocab {cfg['vocab_size']}, hidden {cfg['hidden_size']}, "
            f"{cfg['num_hidden_layers']} layers, {cfg['num_attention_heads']} heads, "
            f"{cfg['num_key_value_heads']} KV heads, intermediate {cfg['intermediate_size']}, tied embeddings)"
        ),
        "flags": FLAGS,
        "order": order,
        "steps": args.steps,
        "warmup": args.warmup,
        "summary": summary,
        "ratios": ratio,
        "runs": runs,
    }
    print(
        f"update tokens/s ours/TRL = {ratio['update_tokens_per_s']:.2f} "
        f"({'MET' if ratio['update_tokens_per_s'] >= 1 else 'not met'}); generation {ratio['gen_tokens_per_s']:.2f}; "
        f"end-to-end {ratio['e2e_completion_tokens_per_s']:.2f}"
    )
    if not args.no_write:
        write(result)
        print(f"wrote {RESULTS / 'grpo_update.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
