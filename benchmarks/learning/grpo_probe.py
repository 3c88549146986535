"""Does one GRPO update move the policy toward the oracle? A per-update probe of the main job.

    python benchmarks/learning/grpo_probe.py sft.init=<warm-up>/sft_model trainer.steps=6 [overrides]

It runs `rlgym train` with the given overrides and wraps every policy update: before and after
it, teacher-forced on the oracle's episodes of 48 val-pool questions (never trained on), it
measures the mean logprob of the oracle's completion tokens and the share of episodes whose every
completion token is the argmax (what greedy decoding would copy right). Per update it also
prints the batch's episodes by their first mistake (`math_errors.classify`) with the mean
advantage of each kind, so a harmful update is seen in the step it happens, not 20 steps later.
And it measures where the update points: `sgd_align` is the cosine between the raw policy gradient
(descent direction) and the descent direction of the oracle episodes' NLL, `adam_align` the same for
the step the optimizer actually took, `step_norm` that step's L2 norm over all weights (a random
direction has |cos| ~ 1/sqrt(#weights), ~5e-4 on the tiny model).
One JSON line per update on stdout (and in `--out`). Findings: docs/math_env.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*")
    p.add_argument("--probe-tasks", type=int, default=48)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--keep",
        choices=("all", "positive", "negative"),
        default="all",
        help="train on every token's advantage, or only the positive (negative) ones (a diagnostic)",
    )
    args = p.parse_intermixed_args()

    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from math_errors import classify

    from rlgym_llm.config.compose import load_config
    from rlgym_llm.recipes import parts
    from rlgym_llm.recipes import train as train_recipe
    from rlgym_llm.train import trainer as trainer_mod
    from rlgym_llm.train.sft import oracle_trajectories, sft_loss

    cfg = load_config("train", args.overrides)
    if not cfg.sft.init:
        p.error("needs sft.init=<a warm-up's sft_model> (the start whose updates are probed)")
    probe: dict[str, object] = {}

    def oracle_batch(trainer: trainer_mod.PolicyTrainer) -> trainer_mod.TrainBatch:
        if "batch" not in probe:
            tok = parts.load_tokenizer(cfg.sft.init)
            agent = parts.build_agent(cfg.agent, tok)
            demos = oracle_trajectories(
                parts.env_factory(cfg.env, cfg.sandbox, "val"),
                agent,
                tok,
                parts.oracle_factory(cfg.env.oracle),
                range(args.probe_tasks),
                parts.turn_limit(cfg.env)[0],
            )
            zeros = [np.zeros(len(t.token_ids), dtype=np.float32) for t in demos]
            probe["batch"] = trainer_mod.TrainBatch.from_trajectories(demos, zeros, tok.pad_token_id or 0)
        return probe["batch"]  # type: ignore[return-value]

    @torch.no_grad()
    def measure(trainer: trainer_mod.PolicyTrainer) -> dict[str, float]:
        b = oracle_batch(trainer)
        model = trainer.model
        was = model.training
        model.eval()
        out = model(input_ids=b.input_ids, attention_mask=b.attention_mask)
        model.train(was)
        logits = out.logits[:, :-1].float()
        target = b.input_ids[:, 1:]
        mask = b.loss_mask[:, 1:] > 0
        logp = torch.log_softmax(logits, -1).gather(-1, target[..., None]).squeeze(-1)
        right = (logits.argmax(-1) == target) | ~mask
        ent = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
        return {
            "oracle_logp": float(logp[mask].mean()),
            "oracle_seq_logp": float((logp * mask).sum(-1).mean()),
            "argmax_all_right": float(right.all(-1).float().mean()),
            "oracle_entropy": float(ent[mask].mean()),
        }

    def val_nll_grad(trainer: trainer_mod.PolicyTrainer) -> list[torch.Tensor]:
        """The gradient of the oracle episodes' token-mean NLL (what SFT on them would descend)."""
        b = oracle_batch(trainer)
        params = [p for p in trainer.model.parameters() if p.requires_grad]
        was = trainer.model.training
        trainer.model.eval()
        loss = sft_loss(trainer.model, b, trainer.compute)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        trainer.model.train(was)
        return [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]

    def cos(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
        dot = sum(float((x * y).sum()) for x, y in zip(a, b))
        na = sum(float((x * x).sum()) for x in a) ** 0.5
        nb = sum(float((y * y).sum()) for y in b) ** 0.5
        return dot / max(na * nb, 1e-30)

    original_step = trainer_mod.PolicyTrainer._optimizer_step

    def optimizer_step(self: trainer_mod.PolicyTrainer) -> float:
        # How well the update points downhill on the unseen questions' oracle NLL: the raw RL
        # gradient's direction (an SGD step) and the step Adam actually took. A random direction
        # has |cos| ~ 1/sqrt(#weights), ~5e-4 for the tiny model.
        params = [p for p in self.model.parameters() if p.requires_grad]
        g_rl = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params]
        g_val = val_nll_grad(self)
        before = [p.detach().clone() for p in params]
        norm = original_step(self)
        step = [p.detach() - b for p, b in zip(params, before)]
        probe["align"] = {
            "sgd_align": round(cos([-g for g in g_rl], [-g for g in g_val]), 4),
            "adam_align": round(cos(step, [-g for g in g_val]), 4),
            "step_norm": round(sum(float((d * d).sum()) for d in step) ** 0.5, 5),
        }
        return norm

    trainer_mod.PolicyTrainer._optimizer_step = optimizer_step  # type: ignore[method-assign]

    original = trainer_mod.PolicyTrainer.update
    log = open(args.out, "w") if args.out else None  # noqa: SIM115

    def update(self: trainer_mod.PolicyTrainer, batch: trainer_mod.TrainBatch | None) -> dict[str, float]:
        before = measure(self)
        metrics = original(self, batch)
        after = measure(self)
        kinds = probe.pop("kinds", {})
        rec = {
            "update": self.step,
            **{f"before_{k}": round(v, 4) for k, v in before.items()},
            **{f"delta_{k}": round(after[k] - before[k], 4) for k in before},
            **probe.pop("align", {}),
            "kinds": kinds,
            "grad_norm": round(metrics.get("grad_norm", 0.0), 3),
            "clip_frac": round(metrics.get("clip_frac", 0.0), 4),
            "entropy": round(metrics.get("entropy", 0.0), 4),
        }
        print(json.dumps(rec), flush=True)
        if log:
            log.write(json.dumps(rec) + "\n")
            log.flush()
        return metrics

    original_from = trainer_mod.TrainBatch.from_trajectories.__func__  # type: ignore[attr-defined]

    def from_trajectories(cls, trajectories, token_advantages, pad_id):  # type: ignore[no-untyped-def]
        by_kind: dict[str, list[float]] = collections.defaultdict(list)
        for t, a in zip(trajectories, token_advantages):
            kind, _ = classify(t.to_dict())
            mask = np.asarray(t.loss_mask, dtype=bool)
            by_kind[kind].append(float(np.asarray(a)[mask].mean()) if mask.any() else 0.0)
        probe["kinds"] = {k: [len(v), round(float(np.mean(v)), 3)] for k, v in sorted(by_kind.items())}
        if args.keep != "all":
            sign = 1.0 if args.keep == "positive" else -1.0
            token_advantages = [np.where(sign * np.asarray(a) > 0, a, 0.0) for a in token_advantages]
        return original_from(cls, trajectories, token_advantages, pad_id)

    trainer_mod.PolicyTrainer.update = update  # type: ignore[method-assign]
    trainer_mod.TrainBatch.from_trajectories = classmethod(from_trajectories)  # type: ignore[method-assign]
    train_recipe.run(cfg)


if __name__ == "__main__":
    main()
