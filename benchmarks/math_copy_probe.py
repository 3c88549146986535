"""How fast does the tiny model's warm-up learn to copy digits on Math-v0 level 0?

A diagnostic behind the calibration in docs/math_env.md. It trains the tiny model on the demonstrations
of the config's teacher (`env.oracle`) exactly as `rlgym sft` does (its own `sft()` loop, with the
config's lr and schedule), and every `--every` steps measures, teacher-forced on the teacher's
successful episodes among 64 held-out ones, how often the argmax
predicts each digit the answer depends on: the first operand in the calculator call, the second,
and the answer (the tool result copied into "The answer is ..." and `submit_answer`). It prints one
JSON line per measure; `--out` also writes them to a file.

    python benchmarks/math_copy_probe.py sft.successful_only=false --steps 600    # the shipped tier and warm-up
    python benchmarks/math_copy_probe.py env.oracle=rlgym_agents.math:MathOracleAgent sft.lr=3e-3 \
        sft.lr_schedule=constant --easy-max 9 --steps 1200   # the 2026-11-27 tables: the oracle, operands 1..9
    python benchmarks/math_copy_probe.py sft.lr=3e-3 sft.successful_only=false --steps 600 --every 50  # the lr
    python benchmarks/math_copy_probe.py sft.idle_prob=0.35 sft.successful_only=false  # + config overrides

Results of the runs quoted in docs/math_env.md: benchmarks/results/math_copy_probe.md.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="rlgym train overrides (after env=math)")
    parser.add_argument("--easy-max", type=int, default=None, help="level 0's largest operand (default: the env's)")
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import rlgym_envs.math.tasks as tasks

    if args.easy_max is not None:
        tasks.EASY_MAX = args.easy_max  # read at each draw

    import torch

    from rlgym_llm.config import load_config
    from rlgym_llm.recipes import parts
    from rlgym_llm.train.sft import oracle_trajectories, sft
    from rlgym_llm.train.trainer import TrainBatch

    torch.set_num_threads(args.threads)
    cfg = load_config("train", ["env=math", "sft.idle_prob=0", "sft.successful_only=true", *args.overrides])
    torch.manual_seed(cfg.seed)
    model, tok, _ = parts.setup_model(cfg.policy, lambda line: None, None)
    make_env, agent = parts.env_factory(cfg.env, cfg.sandbox), parts.build_agent(cfg.agent, tok)
    oracle, pad = parts.oracle_factory(cfg.env.oracle), tok.pad_token_id or 0

    def episodes(start: int, n: int, idle: float, successful_only: bool):
        seeds = range(start, start + n)
        return oracle_trajectories(make_env, agent, tok, oracle, seeds, cfg.env.max_turns, idle, successful_only)

    def batch(trajs):
        return TrainBatch.from_trajectories(trajs, [np.asarray(t.loss_mask, dtype=np.float32) for t in trajs], pad)

    demos = episodes(cfg.env.train_seed_start, cfg.sft.episodes, cfg.sft.idle_prob, cfg.sft.successful_only)
    test = batch(episodes(cfg.env.test_seed_start, 64, 0.0, True))
    digits = torch.tensor([tok.decode([i]).strip().lstrip("-").isdigit() for i in range(len(tok))])

    def measure() -> dict:
        model.eval()
        with torch.no_grad():
            pred = model(input_ids=test.input_ids, attention_mask=test.attention_mask).logits[:, :-1].argmax(-1)
        model.train()
        target, mask = test.input_ids[:, 1:], test.loss_mask[:, 1:] > 0
        is_digit = digits[target] & mask
        # the k-th trained digit of an episode: 0 first operand, 1 second operand, 2+ the answer
        rank = torch.cumsum(is_digit.long(), dim=1) - 1
        right = pred == target
        out = {}
        for name, sel in (("op1", rank == 0), ("op2", rank == 1), ("answer", rank >= 2)):
            sel = sel & is_digit
            out[name] = round(float((right & sel).sum() / sel.sum().clamp(min=1)), 3)
        out["all_digits"] = round(float((right | ~is_digit).all(dim=1).float().mean()), 3)
        return out

    start, rows = time.perf_counter(), []

    def on_step(i: int, loss: float) -> None:  # sft() calls it after each step (i from 0)
        if (i + 1) % args.every == 0:
            row = {"step": i + 1, "loss": round(loss, 3), **measure(), "s": round(time.perf_counter() - start)}
            rows.append(row)
            print(json.dumps(row), flush=True)

    # the warm-up itself, as `rlgym sft` runs it (its schedule included)
    sft(
        model,
        demos,
        pad,
        args.steps,
        cfg.sft.batch_size,
        cfg.sft.lr,
        seed=cfg.seed,
        on_step=on_step,
        lr_schedule=cfg.sft.lr_schedule,
    )
    if args.out:
        args.out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


if __name__ == "__main__":
    main()
