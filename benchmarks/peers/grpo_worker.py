"""One GRPO run, ours or TRL's, in its own interpreter; prints per-step timings as JSON (see `grpo_update.py`).

    python benchmarks/peers/grpo_worker.py ours MODEL_DIR PROMPTS.json --steps 10 --warmup 2
    benchmarks/peers/.venvs/trl/bin/python benchmarks/peers/grpo_worker.py trl MODEL_DIR PROMPTS.json

Both sides: the same model folder (fp32), the same chat prompts, 8 completions per optimizer step
(2 prompts x 4 generations), at most 64 new tokens sampled at temperature 1 (no top-p/top-k), the
same toy reward, group-normalised advantages, clipped loss with epsilon 0.2 (no clip-higher), no KL
(beta 0, no reference model), token-mean aggregation over the batch (TRL's "dapo"), one optimizer
step per generation batch, AdamW, lr 1e-6, grad clipping at 1.0, one micro-batch of 8, no gradient
checkpointing, 2 torch threads.

Per step (wall clock, and process CPU time as `*_cpu_s`, which a shared machine disturbs less):
`gen_s` = sampling + reward + advantages (+ TRL's batch preparation, which runs inside its
generation phase); `update_s` = loss forward/backward + optimizer (for TRL: step wall minus gen_s;
for ours: building the padded batch + `PolicyTrainer.update`); tokens = prompt + completion tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from typing import Any

BATCH, GROUP, MAX_NEW = 8, 4, 64


def reward_of(text: str) -> float:
    """A cheap deterministic reward that varies within a group (so advantages are non-zero)."""
    return (sum(map(ord, text)) % 7) / 6.0


def run_trl(model_dir: str, prompts: list[str], steps: int, warmup: int) -> list[dict[str, Any]]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": q}]} for q in prompts])

    def reward(completions: list[Any], **kwargs: Any) -> list[float]:
        return [reward_of(c if isinstance(c, str) else c[0]["content"]) for c in completions]

    cfg = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        per_device_train_batch_size=BATCH,
        num_generations=GROUP,
        max_completion_length=MAX_NEW,
        beta=0.0,
        use_vllm=False,
        bf16=False,
        gradient_checkpointing=False,
        max_steps=warmup + steps,
        logging_steps=10_000,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=cfg, train_dataset=dataset)
    records: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    original = trainer._generate_and_score_completions

    def timed_generate(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        out = original(*args, **kwargs)
        current["gen_s"] = current.get("gen_s", 0.0) + time.perf_counter() - t0
        current["gen_cpu_s"] = current.get("gen_cpu_s", 0.0) + time.process_time() - c0
        current["prompt_tokens"] = int(out["prompt_mask"].sum())
        current["completion_tokens"] = int(out["completion_mask"].sum())
        current["sequences"] = int(out["completion_mask"].shape[0])
        return out

    trainer._generate_and_score_completions = timed_generate

    class Timer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            current.clear()
            current["t0"], current["c0"] = time.perf_counter(), time.process_time()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            wall, cpu = time.perf_counter() - current.pop("t0"), time.process_time() - current.pop("c0")
            gen, gen_cpu = current.get("gen_s", 0.0), current.get("gen_cpu_s", 0.0)
            records.append({**current, "wall_s": wall, "update_s": wall - gen, "update_cpu_s": cpu - gen_cpu})

    trainer.add_callback(Timer())
    trainer.train()
    return records[warmup:]


def run_ours(model_dir: str, prompts: list[str], steps: int, warmup: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch

    from rlgym_llm.credit.outcome import grpo_advantages
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.policy import SamplingParams
    from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer, TrainBatch

    torch.manual_seed(0)
    policy = TransformersPolicy.from_pretrained(model_dir, max_batch_size=BATCH)
    model, tokenizer = policy.model, policy.tokenizer
    trainer = PolicyTrainer(
        model,
        loss=LossConfig(clip_low=0.2, clip_high=0.2, agg="token-mean", kl_coef=0.0),
        optim=OptimConfig(lr=1e-6, max_grad_norm=1.0, schedule="linear", total_steps=warmup + steps),
        micro_batch_size=BATCH,
    )
    # Render, then tokenize the text, as TRL does.
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in prompts
    ]
    encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    per_step = BATCH // GROUP
    records = []
    for step in range(warmup + steps):
        t0, c0 = time.perf_counter(), time.process_time()
        group_prompts = [encoded[(step * per_step + k) % len(encoded)] for k in range(per_step)]
        batch_prompts = [p for p in group_prompts for _ in range(GROUP)]
        samplings = [SamplingParams(max_tokens=MAX_NEW, temperature=1.0, seed=step * BATCH + i) for i in range(BATCH)]
        model.eval()
        completions = policy.generate_batch(batch_prompts, samplings)
        rewards = np.array([reward_of(c.text) for c in completions])
        adv = np.concatenate([grpo_advantages(rewards[g : g + GROUP]) for g in range(0, BATCH, GROUP)])
        t1, c1 = time.perf_counter(), time.process_time()
        # Right-padded (B, T) batch: prompt tokens masked out, each completion token gets its advantage.
        width = max(len(p) + len(c.token_ids) for p, c in zip(batch_prompts, completions))
        ids = torch.full((BATCH, width), policy.pad_id, dtype=torch.long)
        attn, mask = torch.zeros((BATCH, width), dtype=torch.long), torch.zeros((BATCH, width))
        advs, logp = torch.zeros((BATCH, width)), torch.zeros((BATCH, width))
        for i, (p, c) in enumerate(zip(batch_prompts, completions)):
            n, k = len(p), len(c.token_ids)
            ids[i, : n + k] = torch.tensor(p + list(c.token_ids))
            attn[i, : n + k] = 1
            mask[i, n : n + k] = 1.0
            advs[i, n : n + k] = float(adv[i])
            logp[i, n : n + k] = torch.tensor(c.logprobs)
        trainer.update(TrainBatch(ids, attn, mask, advs, logp))
        t2, c2 = time.perf_counter(), time.process_time()
        records.append(
            {
                "gen_s": t1 - t0,
                "update_s": t2 - t1,
                "gen_cpu_s": c1 - c0,
                "update_cpu_s": c2 - c1,
                "wall_s": t2 - t0,
                "prompt_tokens": sum(len(p) for p in batch_prompts),
                "completion_tokens": sum(len(c.token_ids) for c in completions),
                "sequences": BATCH,
            }
        )
    return records[warmup:]


def run_loop(
    model_dir: str, prompts: list[str], steps: int, warmup: int, off_policy_steps: int, sampler_threads: int = 0
) -> list[dict[str, Any]]:
    """Ours through the product's loop (`rlgym_llm.train.loop.train`): a one-turn env per prompt, the
    rollout manager, GRPO credit, one update per batch; `off_policy_steps=1` samples each batch
    while the previous update runs (and recomputes pi_old, as that setting requires), in a child
    process with `sampler_threads` torch threads (0: in a thread of this process)."""
    import torch

    from rlgym_agents.tool_calling import ToolCallingAgent
    from rlgym_llm.core.env import Env, Step, Task
    from rlgym_llm.rollout import hf_process
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
    from rlgym_llm.rollout.policy import SamplingParams, SeededPolicy
    from rlgym_llm.train.config import TrainerConfig
    from rlgym_llm.train.credit_inputs import CreditAssigner
    from rlgym_llm.train.loop import RunParts, train
    from rlgym_llm.train.metrics import MetricsLog
    from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer

    class PromptEnv(Env):
        """One turn: a prompt of the set (drawn by the reset seed), rewarded by `reward_of`."""

        tools = ()

        def __init__(self) -> None:
            super().__init__()
            self.reward = 0.0

        def sample_task(self, options: Any) -> Task:
            i = int(self.np_random.integers(len(prompts)))
            return Task(id=f"prompt-{i}", prompt=prompts[i], answer="")

        def opening(self, task: Task) -> Any:
            return [{"role": "user", "content": task.prompt}]

        def new_episode(self, task: Task) -> None:
            self.reward = 0.0

        def respond(self, turn: Any) -> Step:
            self.reward = reward_of(turn.content)
            return Step([], reward=self.reward, terminated=True)

        def outcome(self) -> dict[str, Any]:
            return {"reward": self.reward}

    torch.manual_seed(0)
    policy = TransformersPolicy.from_pretrained(model_dir, max_batch_size=BATCH)
    model, tokenizer = policy.model, policy.tokenizer
    engine = hf_process.detached(policy, threads=sampler_threads) if off_policy_steps else policy
    config = RolloutConfig(
        group_size=GROUP,
        max_turns=1,
        max_context=2048,
        sampling=SamplingParams(max_tokens=MAX_NEW, temperature=1.0),
        token_check="off",
        env_in_thread=False,
    )
    manager = RolloutManager(PromptEnv, ToolCallingAgent(tokenizer), SeededPolicy(engine, 0), config)
    trainer = PolicyTrainer(
        model,
        loss=LossConfig(
            clip_low=0.2, clip_high=0.2, agg="token-mean", kl_coef=0.0, recompute_old_logp=off_policy_steps > 0
        ),
        optim=OptimConfig(lr=1e-6, max_grad_norm=1.0, schedule="linear", total_steps=warmup + steps),
        micro_batch_size=BATCH,
    )
    run = RunParts(manager, trainer, engine, CreditAssigner("grpo", {}), pad_id=policy.pad_id)
    cfg = TrainerConfig(
        steps=warmup + steps,
        tasks_per_step=BATCH // GROUP,
        group_size=GROUP,
        micro_batch_size=BATCH,
        filter_zero_variance=False,
        eval_tasks=0,
        save_every=0,
        off_policy_steps=off_policy_steps,
    )
    marks: list[tuple[float, float, dict[str, Any]]] = [(time.perf_counter(), time.process_time(), {})]
    out = tempfile.mkdtemp(prefix="loop-bench-")
    on_step = lambda r: marks.append((time.perf_counter(), time.process_time(), r))  # noqa: E731
    try:
        train(run, cfg, out, resume=False, on_step=on_step, log=MetricsLog(out, tensorboard=False))
    finally:
        if engine is not policy:
            asyncio.run(engine.close())
    records = []
    for (t_prev, c_prev, _), (t, c, r) in itertools.pairwise(marks):
        tokens = round(r["rollout_tokens_per_s"] * r["time_rollout_s"])
        records.append(
            {
                "gen_s": r["time_rollout_s"],
                "gen_wait_s": r["time_rollout_wait_s"],
                "update_s": r["time_update_s"],
                "wall_s": t - t_prev,
                "cpu_s": c - c_prev,
                "completion_tokens": tokens,
                "staleness": r["staleness"],
                "sequences": r["trajectories"],
            }
        )
    return records[warmup:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("system", choices=("ours", "trl", "loop", "loop-overlap", "loop-overlap-thread"))
    ap.add_argument("model_dir")
    ap.add_argument("prompts", help="a JSON list of user prompts")
    ap.add_argument("--steps", type=int, default=10, help="timed optimizer steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed optimizer steps first")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sampler-threads", type=int, default=2, help="loop-overlap: the sampling process's torch threads")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    with open(args.prompts, encoding="utf-8") as f:
        prompts = json.load(f)
    if args.system.startswith("loop"):
        k = int(args.system != "loop")
        sampler = args.sampler_threads if args.system == "loop-overlap" else 0
        records = run_loop(args.model_dir, prompts, args.steps, args.warmup, k, sampler)
    else:
        run = run_trl if args.system == "trl" else run_ours
        records = run(args.model_dir, prompts, args.steps, args.warmup)
    # A marked line: trainers may print their own summaries to stdout.
    print("RESULT " + json.dumps({"system": args.system, "steps": records}), flush=True)


if __name__ == "__main__":
    main()
