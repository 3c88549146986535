"""One policy update: trajectories + per-token advantages -> clipped loss (+ KL, entropy) -> optimizer step.

The batch is split into micro-batches whose gradients accumulate; each micro-batch's loss is its exact
share of the full-batch loss (see `losses.BatchTotals`), so 1 micro-batch of 8 and 8 of 1 give the
same update. With several processes (`train.distributed`) each rank passes its own part of the
batch: the token and sequence counts are summed over the ranks first, so every share is a share of
the global loss, and the strategy (`train.strategy`: DDP or FSDP) averages the ranks' gradients;
2 ranks with half a batch each give the update of 1 process with all of it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from rlgym_llm.core.types import Trajectory
from rlgym_llm.rollout.device import Compute
from rlgym_llm.train.config import LossConfig, OptimConfig
from rlgym_llm.train.distributed import Distributed
from rlgym_llm.train.forward import MaskedForward, MaskedPolicy, masked_logprobs
from rlgym_llm.train.losses import BatchTotals, aggregate, kl_penalty, policy_loss
from rlgym_llm.train.strategy import DDP, Single, Strategy


@dataclass
class TrainBatch:
    """Right-padded token tensors of a batch of trajectories, shape (B, T) each."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    advantages: torch.Tensor
    engine_logp: torch.Tensor
    # pi_old computed before the step's first optimizer step (set by `PolicyTrainer.update` when a
    # batch is split into several mini-batches and loss.recompute_old_logp is on)
    old_logp: torch.Tensor | None = None

    @classmethod
    def from_trajectories(
        cls, trajectories: Sequence[Trajectory], token_advantages: Sequence[np.ndarray], pad_id: int
    ) -> TrainBatch:
        """Stack trajectories with their per-token advantages (aligned with `trajectory.token_ids`)."""
        width = max(len(t.token_ids) for t in trajectories)
        n = len(trajectories)
        ids = torch.full((n, width), pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.float32)
        adv = torch.zeros((n, width), dtype=torch.float32)
        logp = torch.zeros((n, width), dtype=torch.float32)
        for i, (t, a) in enumerate(zip(trajectories, token_advantages)):
            k = len(t.token_ids)
            if len(a) != k:
                raise ValueError(f"trajectory {i}: {k} tokens but {len(a)} advantages")
            ids[i, :k] = torch.tensor(t.token_ids)
            attn[i, :k] = 1
            mask[i, :k] = torch.tensor(t.loss_mask, dtype=torch.float32)
            adv[i, :k] = torch.as_tensor(np.asarray(a, dtype=np.float32))
            logp[i, :k] = torch.tensor(t.logprobs, dtype=torch.float32)
        return cls(ids, attn, mask, adv, logp)

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def to(self, device: torch.device) -> TrainBatch:
        """The same batch on `device`."""
        return TrainBatch(*(x.to(device) for x in self._fields()), *self._old(lambda x: x.to(device)))

    def slice(self, start: int, end: int) -> TrainBatch:
        """Rows [start, end), trimmed to their longest sequence."""
        width = int(self.attention_mask[start:end].sum(-1).max())
        return TrainBatch(*(x[start:end, :width] for x in self._fields()), *self._old(lambda x: x[start:end, :width]))

    def _fields(self) -> tuple[torch.Tensor, ...]:
        return (self.input_ids, self.attention_mask, self.loss_mask, self.advantages, self.engine_logp)

    def _old(self, f: Any) -> tuple[torch.Tensor, ...]:
        return () if self.old_logp is None else (f(self.old_logp),)


class PolicyTrainer:
    """Owns the optimizer and schedule of a causal LM and applies policy-gradient updates.

    Args:
        model: the policy (a Hugging Face causal LM, or a peft-wrapped one).
        loss: the loss settings.
        optim: optimizer and schedule.
        micro_batch_size: rows per forward/backward pass.
        mini_batches: optimizer steps per `update`: the batch is split into this many consecutive
            parts (whole groups when they divide evenly), each one optimizer step, as PPO's
            mini-batches (verl's ppo_mini_batch_size, TRL's steps_per_generation). pi_old is the
            weights before the first of them (the engine's logprobs, or recomputed once when
            loss.recompute_old_logp is on), so the later parts are off-policy and the ratio clip
            acts. The learning-rate schedule steps once per `update` (per RL step).
        ref_model: the frozen reference policy (required when `loss.kl_coef > 0`).
        lean_head: apply the LM head only to the positions that predict a trained token (see
            `train.forward`); False projects every position, as a plain forward pass does.
        compute: device and compute dtype (`rlgym_llm.rollout.device`; default: float32 where
            `model`'s weights are). The models must already be on its device.
        dist: the data-parallel ranks (default: one process); with several and no `strategy`,
            `model` is wrapped in DDP now (rank 0's weights are copied to every rank).
        strategy: how the update is spread over the ranks (`train.strategy`; default: DDP over
            `dist`, `Single` with one process). It wraps `model` now, before the optimizer is built
            (FSDP replaces the parameters by their shards).
    """

    def __init__(
        self,
        model: Any,
        loss: LossConfig | None = None,
        optim: OptimConfig | None = None,
        micro_batch_size: int = 8,
        mini_batches: int = 1,
        ref_model: Any | None = None,
        lean_head: bool = True,
        compute: Compute | None = None,
        dist: Distributed | None = None,
        strategy: Strategy | None = None,
    ):
        self.model = model
        if strategy is None:
            dist = dist or Distributed()
            strategy = DDP(dist) if dist.enabled else Single(dist)
        elif dist is not None and dist is not strategy.dist:
            raise ValueError("pass the ranks once: PolicyTrainer(strategy=...) or PolicyTrainer(dist=...)")
        self.strategy, self.dist = strategy, strategy.dist
        self.rollout_model = strategy.rollout_model(model)  # before wrapping: FSDP copies the full model
        # every trained (and pi_old) forward pass runs through the wrapped module: DDP's forward prepares
        # the gradient averaging, FSDP's gathers the sharded weights
        self._policy: Any = strategy.wrap(MaskedPolicy(model, lean_head), model)
        self.compute = compute or Compute.of(model)
        self.loss_cfg = loss or LossConfig()
        self.optim_cfg = optim or OptimConfig()
        if self.loss_cfg.kl_coef > 0 and ref_model is None:
            raise ValueError("loss.kl_coef > 0 needs a reference model (ref_model=...)")
        if self.loss_cfg.agg == "seq-mean-token-sum-norm" and self.loss_cfg.norm_const is None:
            raise ValueError("agg=seq-mean-token-sum-norm needs loss.norm_const (e.g. the most completion tokens)")
        if self.optim_cfg.schedule != "constant" and self.optim_cfg.total_steps is None:
            raise ValueError(f"schedule={self.optim_cfg.schedule} needs optim.total_steps (the run's steps)")
        if mini_batches < 1:
            raise ValueError(f"mini_batches={mini_batches} must be >= 1")
        self.micro_batch_size = micro_batch_size
        self.mini_batches = mini_batches
        self.ref_model = ref_model
        self.lean_head = lean_head
        params = [p for p in model.parameters() if p.requires_grad]
        o = self.optim_cfg
        self.optimizer = torch.optim.AdamW(params, lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step = 0

    def _lr_factor(self, step: int) -> float:
        o = self.optim_cfg
        if step < o.warmup_steps:
            return (step + 1) / o.warmup_steps
        if o.schedule == "constant":
            return 1.0
        total = o.total_steps or 1  # checked in __init__: set for every schedule that reads it
        progress = min(1.0, (step - o.warmup_steps) / max(1, total - o.warmup_steps))
        return 1.0 - progress if o.schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * progress))

    def _forward(self, model: Any, mb: TrainBatch, entropy_grad: bool = False) -> MaskedForward:
        # the matrix products in the compute dtype; logprobs, entropy and the loss in float32
        with self.compute.autocast():
            return masked_logprobs(
                model, mb.input_ids, mb.attention_mask, mb.loss_mask, entropy_grad=entropy_grad, lean=self.lean_head
            )

    @torch.no_grad()
    def _old_logp(self, batch: TrainBatch) -> torch.Tensor:
        """The logprobs of `batch` under the current weights, in eval mode: pi_old of the loss when it is
        recomputed (`accumulate` takes it from its own forward pass; tests compare it with the engine's)."""
        batch = batch.to(self.compute.device)
        was_training = self.model.training
        self.model.eval()
        starts = list(self._starts(batch))
        parts = []
        for i in range(self.strategy.passes(len(starts))):
            mb = batch.slice(starts[i], starts[i] + self.micro_batch_size) if i < len(starts) else self._nothing()
            logp = self._trained_forward(mb.to(self.compute.device), entropy_grad=False).logp
            if i < len(starts):
                parts.append(logp)
        self.model.train(was_training)
        out = torch.zeros_like(batch.engine_logp)
        for s, p in zip(self._starts(batch), parts):
            out[s : s + p.shape[0], : p.shape[1]] = p
        return out

    def _starts(self, batch: TrainBatch) -> range:
        return range(0, len(batch), self.micro_batch_size)

    def update(self, batch: TrainBatch | None) -> dict[str, float]:
        """One RL step over `batch`: `mini_batches` optimizer steps (each with gradient accumulation
        over micro-batches), then one step of the schedule. Returns metrics (the mini-batches'
        mean; `grad_norm` their mean, `optimizer_steps` their number).

        With several processes every rank calls it with its part of the batch (None: nothing this
        step, the rank still joins the gradient averaging); the metrics are the whole batch's."""
        if self.mini_batches == 1:
            metrics = self.accumulate(batch)
            return {**metrics, **self.apply_gradients(), "optimizer_steps": 1.0}
        parts = self._mini_batches(batch)
        out: dict[str, float] = {}
        norms = []
        for part in parts:
            if part is None and not self.dist.enabled:
                continue  # fewer rows than mini-batches: no step for an empty part
            metrics = self.accumulate(part)
            norms.append(self._optimizer_step())
            for k, v in metrics.items():
                out[k] = out.get(k, 0.0) + (v if k == "tokens" else v / len(parts))
        if not norms:
            raise ValueError("an update needs a batch (None is for a rank with nothing to train on)")
        self.scheduler.step()
        self.step += 1
        lr = float(self.scheduler.get_last_lr()[0])
        return {**out, "grad_norm": float(np.mean(norms)), "lr": lr, "optimizer_steps": float(len(norms))}

    def _mini_batches(self, batch: TrainBatch | None) -> list[TrainBatch | None]:
        """`batch` in `mini_batches` consecutive parts (None for a part with no rows: a rank with
        fewer rows still takes every optimizer step), each carrying pi_old of the weights now."""
        if batch is None:
            return [None] * self.mini_batches
        if self.loss_cfg.recompute_old_logp:
            batch = replace(batch, old_logp=self._old_logp(batch).cpu() if batch.old_logp is None else batch.old_logp)
        bounds = np.linspace(0, len(batch), self.mini_batches + 1).round().astype(int)
        return [batch.slice(a, b) if b > a else None for a, b in itertools.pairwise(bounds)]

    def _totals(self, batch: TrainBatch) -> BatchTotals:
        """The whole batch's token and sequence counts (summed over the ranks)."""
        mask = batch.loss_mask
        counts = self.dist.sum({"tokens": float(mask.sum()), "sequences": float((mask.sum(-1) > 0).sum())})
        tokens, sequences = max(int(counts["tokens"]), 1), max(int(counts["sequences"]), 1)
        return BatchTotals(tokens, sequences, self.loss_cfg.norm_const or 1.0)

    def _nothing(self) -> TrainBatch:
        """One row with no trained token: a rank with no trajectory this step runs it, so that it
        takes part in the gradient averaging with a zero gradient."""
        ids = torch.zeros((1, 2), dtype=torch.long)
        zeros = torch.zeros((1, 2), dtype=torch.float32)
        return TrainBatch(ids, torch.ones_like(ids), zeros, zeros, zeros)

    def _trained_forward(self, mb: TrainBatch, entropy_grad: bool) -> MaskedForward:
        with self.compute.autocast():
            logp, entropy = self._policy(mb.input_ids, mb.attention_mask, mb.loss_mask, entropy_grad)
        return MaskedForward(logp, entropy)

    def weights(self) -> Any:
        """The model the sampling engine syncs from after an update: the trained model itself, or
        (FSDP) the full copy, refreshed now from the shards. A collective: every rank calls it."""
        return self.strategy.weights(self.model)

    def full_state_dict(self) -> dict[str, torch.Tensor]:
        """The whole model's state on every rank (a collective under FSDP)."""
        return self.strategy.full_state_dict(self.model)

    def accumulate(self, batch: TrainBatch | None) -> dict[str, float]:
        """Zero the gradients, then accumulate the full-batch loss's gradient micro-batch by micro-batch."""
        if batch is None:
            if not self.dist.enabled:
                raise ValueError("an update needs a batch (None is for a rank with nothing to train on)")
            batch = self._nothing()
        batch = batch.to(self.compute.device)
        totals = self._totals(batch)
        # the strategy averages the ranks' gradients: each rank's loss is its share of the global loss, times world
        scale = float(self.dist.world)
        starts = list(self._starts(batch))
        passes = self.strategy.passes(len(starts))  # FSDP: as many as the rank with the most
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums = {
            "loss": 0.0,
            "pg_loss": 0.0,
            "kl": 0.0,
            "entropy": 0.0,
            "clip_frac": 0.0,
            "approx_kl": 0.0,
            "is_weight": 0.0,
        }
        for i in range(passes):
            # a rank with fewer micro-batches runs rows with no trained token: a zero gradient
            mb = batch.slice(starts[i], starts[i] + self.micro_batch_size) if i < len(starts) else self._nothing()
            with self.strategy.gradient_sync(self._policy, last=i == passes - 1):
                sums_mb = self._micro_batch(mb.to(self.compute.device), totals, scale)
            for k, v in sums_mb.items():
                sums[k] += v
        return {**self.dist.sum(sums), "tokens": float(totals.tokens)}

    def _micro_batch(self, mb: TrainBatch, totals: BatchTotals, scale: float) -> dict[str, float]:
        """Forward and backward of one micro-batch; returns its shares of the batch's metrics."""
        cfg = self.loss_cfg
        sums: dict[str, float] = {}
        fwd = self._trained_forward(mb, entropy_grad=cfg.entropy_coef > 0)
        logp = fwd.logp
        # One optimizer step per batch: every micro-batch's forward pass runs at the weights before
        # the step, so the recomputed pi_old is that pass, detached (no second pass, as TRL's
        # num_iterations=1); the engine's (behaviour) logprobs then enter the truncated IS weight.
        if mb.old_logp is not None:  # mini-batches: pi_old is the weights before the step's first one
            old = mb.old_logp
        else:
            old = logp.detach() if cfg.recompute_old_logp else mb.engine_logp
        engine = mb.engine_logp if cfg.recompute_old_logp else None
        out = policy_loss(
            logp, old, mb.advantages, mb.loss_mask, totals, cfg.clip_low, cfg.clip_high, cfg.agg, engine, cfg.is_cap
        )
        loss = out.loss
        share = mb.loss_mask.sum().item() / totals.tokens  # weight of this micro-batch's diagnostics
        if cfg.kl_coef > 0:
            with torch.no_grad():
                ref_logp = self._forward(self.ref_model, mb).logp
            kl = aggregate(kl_penalty(logp, ref_logp, cfg.kl_estimator), mb.loss_mask, cfg.agg, totals)
            loss = loss + cfg.kl_coef * kl
            sums["kl"] = kl.item()
        # entropy of the distribution each policy token was sampled from; a graph only for a bonus
        entropy = aggregate(fwd.entropy, mb.loss_mask, cfg.agg, totals)
        if cfg.entropy_coef > 0:
            loss = loss - cfg.entropy_coef * entropy
        (loss * scale if scale != 1.0 else loss).backward()
        sums["loss"] = loss.item()
        sums["pg_loss"] = out.loss.item()
        sums["entropy"] = entropy.item()
        sums["clip_frac"] = out.clip_fraction.item() * share
        sums["approx_kl"] = out.approx_kl.item() * share
        sums["is_weight"] = out.is_weight_mean.item() * share
        return sums

    def apply_gradients(self) -> dict[str, float]:
        """Clip the accumulated gradients, step the optimizer and the schedule."""
        grad_norm = self._optimizer_step()
        self.scheduler.step()
        self.step += 1
        return {"grad_norm": grad_norm, "lr": float(self.scheduler.get_last_lr()[0])}

    def _optimizer_step(self) -> float:
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.optim_cfg.max_grad_norm if self.optim_cfg.max_grad_norm > 0 else float("inf")
        grad_norm = self.strategy.clip_grad_norm(params, max_norm)
        self.optimizer.step()
        return grad_norm
