"""Lean updates, measured against the plain path in the same run (issue: throughput and scale, item 3).

    python benchmarks/lean_update.py                 # tiny model and SmolLM2-135M, env reuse; ~6 min idle
    python benchmarks/lean_update.py --models tiny --rounds 1 --no-write

Rows:
- update: one `PolicyTrainer.update` on a multi-turn batch (8 trajectories for the tiny model, 2 for
  SmolLM2: a 256-token prompt, then 3 turns of 64 observation + 32 completion tokens), LM head over every position (`lean_head=False`,
  the old path) vs over the trained positions only (`lean_head=True`). Completion tokens/s is the median
  of 3 updates after one warm-up; peak RSS is the child process's `ru_maxrss` after the updates, and
  "update peak" is how far the updates raised it above the loaded model's RSS. Each configuration runs
  in its own process, in ABBA order over `--rounds` rounds.
- env: µs per episode of the rollout manager on a one-turn env, with a new env per episode
  (`reuse_envs=False`, the old behaviour) vs envs kept and reset (`reuse_envs=True`), for the bare
  `InstantEnv` of benchmarks/rollout_overhead.py and for `rlgym/Math-v0` (Gymnasium `make` + wrappers).

Writes benchmarks/results/lean_update.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
PROMPT, TURNS, OBS, COMPLETION = 256, 3, 64, 32
ROWS = {"tiny": 8, "smollm2": 2}  # SmolLM2's update on 2 loaded cores takes ~10x the tiny model's


def _model_dir(name: str) -> Path:
    if name == "tiny":
        from rlgym_llm.rollout.tiny_model import build_tiny_model

        return build_tiny_model()
    from rlgym_llm.rollout.smollm2 import build_smollm2

    return build_smollm2()


def update_child(model_name: str, lean: bool) -> dict[str, Any]:
    """One configuration in this process: load, warm up, time 3 updates; return the figures."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    from rlgym_llm.core.types import AssistantTurn, Trajectory, Turn
    from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer, TrainBatch

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(_model_dir(model_name), dtype=torch.float32)
    vocab = model.config.vocab_size
    rng = np.random.default_rng(0)
    trajs, advs = [], []
    for i in range(ROWS[model_name]):
        traj = Trajectory(env_id="bench", seed=i, task_id="t", prompt_token_ids=tuple(rng.integers(0, vocab, PROMPT)))
        for k in range(TURNS):
            obs = tuple(int(x) for x in rng.integers(0, vocab, OBS)) if k else ()
            comp = tuple(int(x) for x in rng.integers(0, vocab, COMPLETION))
            traj.turns.append(
                Turn(
                    k,
                    AssistantTurn(),
                    [],
                    0.0,
                    False,
                    False,
                    obs_token_ids=obs,
                    completion_token_ids=comp,
                    completion_logprobs=(-5.0,) * COMPLETION,
                )
            )
        trajs.append(traj)
        advs.append(np.where(np.asarray(traj.loss_mask) > 0, rng.normal(), 0.0))
    batch = TrainBatch.from_trajectories(trajs, advs, pad_id=0)
    trainer = PolicyTrainer(
        model, LossConfig(), OptimConfig(lr=1e-6), micro_batch_size=ROWS[model_name], lean_head=lean
    )
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    trainer.update(batch)  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        trainer.update(batch)
        times.append(time.perf_counter() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tokens = float(batch.loss_mask.sum())
    return {
        "model": model_name,
        "lean_head": lean,
        "vocab": vocab,
        "update_s_p50": statistics.median(times),
        "tokens_per_s": tokens / statistics.median(times),
        "peak_rss_mb": peak,
        "update_peak_mb": peak - rss_loaded,
    }


def run_updates(models: list[str], rounds: int) -> list[dict[str, Any]]:
    rows = []
    for model in models:
        for r in range(rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            for lean in order + order[::-1]:  # ABBA
                out = subprocess.run(
                    [sys.executable, __file__, "--child", model, str(int(lean))],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"  {model} lean={lean}: {rows[-1]['tokens_per_s']:.0f} tok/s", flush=True)
    return rows


def run_env_reuse(episodes: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from rollout_overhead import CALL_TEXT, InstantEnv, InstantPolicy, PassThroughAgent

    import rlgym_envs  # noqa: F401  (registers rlgym/Math-v0)
    from rlgym_llm.core.registry import make
    from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager

    factories = {"InstantEnv": lambda: InstantEnv(turns=1), "rlgym/Math-v0": lambda: make("rlgym/Math-v0")}
    rows = []
    for name, factory in factories.items():
        for reuse in (False, True, True, False):
            config = RolloutConfig(max_turns=1, concurrency=1, token_check="off", env_in_thread=False, reuse_envs=reuse)
            with RolloutManager(factory, PassThroughAgent(), InstantPolicy([1, 2, 3], CALL_TEXT), config) as manager:
                manager.run_sync(range(50))  # warm-up
                t0 = time.perf_counter()
                manager.run_sync(range(episodes))
                us = (time.perf_counter() - t0) / episodes * 1e6
            rows.append({"env": name, "reuse_envs": reuse, "us_per_episode": us})
            print(f"  {name} reuse={reuse}: {us:.1f} µs/episode", flush=True)
    return rows


def _ratio(rows: list[dict[str, Any]], key: str, flag: str, value: str, group: str) -> dict[str, float]:
    out = {}
    for g in sorted({r[group] for r in rows}):
        on = statistics.median(r[value] for r in rows if r[group] == g and r[flag])
        off = statistics.median(r[value] for r in rows if r[group] == g and not r[flag])
        out[g] = on / off
    return out


def write(result: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lean_update.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Lean updates",
        "",
        f"`{result['command']}` on {result['machine']} (load before: {result['load']}), {result['date']}.",
        "",
        "## Update: LM head over every position vs the trained positions only",
        "",
        "| model | vocab | head | update s (p50) | completion tokens/s | peak RSS MB | update peak MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for model in sorted({r["model"] for r in result["updates"]}):
        for lean in (False, True):
            rs = [r for r in result["updates"] if r["model"] == model and r["lean_head"] == lean]
            med = {
                k: statistics.median(r[k] for r in rs)
                for k in ("update_s_p50", "tokens_per_s", "peak_rss_mb", "update_peak_mb")
            }
            lines.append(
                f"| {model} | {rs[0]['vocab']} | {'trained positions' if lean else 'every position'} | "
                f"{med['update_s_p50']:.3f} | {med['tokens_per_s']:.0f} | {med['peak_rss_mb']:.0f} | {med['update_peak_mb']:.0f} |"
            )
    lines += ["", "Ratios, lean / plain (medians over the ABBA runs):", ""]
    for model, r in _ratio(result["updates"], "", "lean_head", "tokens_per_s", "model").items():
        mem = _ratio(result["updates"], "", "lean_head", "update_peak_mb", "model")[model]
        lines.append(f"- {model}: tokens/s x{r:.2f}; update peak memory x{mem:.2f}")
    lines += [
        "",
        "## Rollout manager: a new env per episode vs envs kept and reset",
        "",
        "| env | reuse_envs | µs per episode |",
        "|---|---|---|",
    ]
    for r in result["env_reuse"]:
        lines.append(f"| {r['env']} | {r['reuse_envs']} | {r['us_per_episode']:.1f} |")
    lines += ["", "Ratios, reused / new (medians):", ""]
    for env, r in _ratio(result["env_reuse"], "", "reuse_envs", "us_per_episode", "env").items():
        lines.append(f"- {env}: x{r:.2f} of the time per episode")
    (RESULTS / "lean_update.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(update_child(sys.argv[2], bool(int(sys.argv[3])))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,smollm2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    result = {
        "command": "python benchmarks/lean_update.py " + " ".join(sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "updates": run_updates(args.models.split(","), args.rounds),
        "env_reuse": run_env_reuse(args.episodes),
    }
    if not args.no_write:
        write(result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("updates", "env_reuse")}))


if __name__ == "__main__":
    main()
