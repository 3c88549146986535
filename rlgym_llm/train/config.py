"""The trainer's settings: loop, optimizer, loss, LoRA. Declared once, here; they are also the
`trainer` section of `rlgym train`'s config (`rlgym_llm.config` puts them in its schema), so a
setting's name, type, choices, default and check live in one place.

This module imports nothing (no torch): the config can read it without loading the trainer.
Choices are `Literal` types (checked by `rlgym_llm.core.validation`); ranges are checked in each
class's `__post_init__`, every problem at once.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Literal

from rlgym_llm.core.errors import ConfigError

AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
"""How per-token losses become the batch loss (see `losses.aggregate`)."""
KLEstimator = Literal["k1", "k2", "k3"]
"""Estimators of KL(pi || pi_ref) per token (see `losses.kl_penalty`)."""
Schedule = Literal["constant", "linear", "cosine"]
"""The learning-rate schedule after warm-up."""
Device = Literal["auto", "cpu", "cuda"]
"""Where a local model computes (auto: cuda when torch sees a GPU, else cpu)."""
Precision = Literal["auto", "float32", "bfloat16"]
"""Matrix-product precision (auto: bfloat16 on a GPU, float32 on CPU); weights stay float32."""
StrategyKind = Literal["auto", "single", "ddp", "fsdp"]
"""How the update is spread over the processes (see `TrainerConfig.strategy`)."""
SamplingSeeds = Literal["auto", "calls", "episode"]
"""How the training rollouts' sampling seeds are drawn (see `TrainerConfig.sampling_seeds`)."""


def _raise(problems: list[str]) -> None:
    if problems:
        raise ConfigError(problems)


@dataclass(frozen=True)
class OptimConfig:
    """Optimizer (AdamW) and learning-rate schedule.

    Args:
        lr: peak learning rate. RL moves a policy that already works: a fresh Adam's first steps
            move every weight by ~lr; on the tiny model 1e-3 collapsed the policy in two steps and
            3e-4 was unstable, 1e-4 is steady.
        weight_decay: AdamW weight decay.
        betas: AdamW betas.
        eps: AdamW's denominator term. Adam scales every weight's step to ~lr whatever the size
            of its gradient; a larger eps keeps weights whose gradients are far below it nearly
            still (the 1e-8 default moves them all).
        warmup_steps: linear warm-up from 0 to `lr`.
        schedule: after warm-up, `constant`, `linear` (to 0 at `total_steps`) or `cosine`.
        total_steps: the horizon of the linear and cosine schedules (null: the run's `trainer.steps`).
        max_grad_norm: gradient clipping by global norm (0: off).
    """

    lr: float = 1e-4
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    warmup_steps: int = 0
    schedule: Schedule = "constant"
    total_steps: int | None = None
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        p = [] if self.lr > 0 else [f"lr must be > 0, got {self.lr} (e.g. 1e-4)"]
        p += [] if self.eps > 0 else [f"eps must be > 0, got {self.eps} (e.g. 1e-8)"]
        p += [f"{k} must be >= 0" for k in ("weight_decay", "warmup_steps", "max_grad_norm") if getattr(self, k) < 0]
        if self.total_steps is not None and self.total_steps < 1:
            p.append(f"total_steps must be >= 1 (or null), got {self.total_steps}")
        if not all(0 <= b < 1 for b in self.betas):
            p.append(f"betas must lie in [0, 1), got {self.betas}")
        _raise(p)


@dataclass(frozen=True)
class LossConfig:
    """The clipped policy loss, with optional KL-to-reference and entropy terms.

    Args:
        clip_low: lower clip epsilon of the importance ratio (range [1 - clip_low, 1 + clip_high]).
        clip_high: upper clip epsilon; > clip_low is DAPO's clip-higher.
        agg: loss aggregation: token-mean, seq-mean-token-mean, seq-mean-token-sum or
            seq-mean-token-sum-norm (Dr. GRPO: token sums over a constant).
        norm_const: the constant of seq-mean-token-sum-norm (null: the most completion tokens an
            episode can hold, `policy.sampling.max_tokens` x `env.max_turns`).
        kl_coef: weight of the KL-to-reference term (0: no reference model).
        kl_estimator: k1, k2 or k3.
        entropy_coef: weight of the entropy bonus.
        is_cap: truncation of the engine-vs-trainer importance weight.
        recompute_old_logp: recompute pi_old with the trainer instead of trusting the engine's
            logprobs (needed when the engine is another program; `rlgym train` turns it on for
            policy=vllm); the engine's logprobs then enter only through the truncated weight.
    """

    clip_low: float = 0.2
    clip_high: float = 0.28
    agg: AggMode = "token-mean"
    norm_const: float | None = None
    kl_coef: float = 0.0
    kl_estimator: KLEstimator = "k3"
    entropy_coef: float = 0.0
    is_cap: float = 2.0
    recompute_old_logp: bool = False

    def __post_init__(self) -> None:
        p = []
        if not 0 < self.clip_low < 1 or self.clip_high <= 0:
            p.append(f"clip range needs 0 < clip_low < 1 and clip_high > 0, got {self.clip_low}, {self.clip_high}")
        p += [f"{k} must be >= 0" for k in ("kl_coef", "entropy_coef") if getattr(self, k) < 0]
        if self.is_cap <= 0:
            p.append(f"is_cap must be > 0, got {self.is_cap}")
        if self.norm_const is not None and self.norm_const <= 0:
            p.append(f"norm_const must be > 0 (or null), got {self.norm_const}")
        _raise(p)


@dataclass(frozen=True)
class LoraConfig:
    """LoRA adapters via `peft` (the base weights stay frozen).

    Args:
        enabled: train LoRA adapters instead of every weight.
        r: adapter rank.
        alpha: scaling numerator (the update is scaled by alpha / r).
        dropout: dropout on the adapter input.
        target_modules: module names that get adapters.
    """

    enabled: bool = False
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")

    def __post_init__(self) -> None:
        usable = self.r >= 1 and self.target_modules
        p = [] if usable or not self.enabled else ["LoRA needs r >= 1 and at least one target_modules entry"]
        if not 0 <= self.dropout < 1:
            p.append(f"dropout must be in [0, 1), got {self.dropout}")
        _raise(p)


@dataclass(frozen=True)
class TrainerConfig:
    """The RL loop and the policy update (the `trainer` section of `rlgym train`).

    Args:
        steps: optimizer steps (one rollout batch each).
        tasks_per_step: tasks per batch; each is rolled out `group_size` times with one seed.
        group_size: G samples per task (group-relative credit needs >= 2).
        micro_batch_size: trajectories per forward/backward pass (gradients accumulate).
        mini_batches: optimizer steps per RL step: the step's batch is split into this many
            consecutive parts (whole groups when tasks_per_step divides evenly), each one
            optimizer step, as PPO's mini-batches (verl's ppo_mini_batch_size, TRL's
            steps_per_generation); the later parts are off-policy and the ratio clip acts. The
            learning-rate schedule steps once per RL step. 1: one optimizer step per batch.
        filter_zero_variance: leave groups whose advantages are all 0 out of the loss (they add no
            gradient but dilute token-mean losses).
        off_policy_steps: how far rollout generation may run ahead of the update. 0: synchronous
            (collect, then update, then sync). 1: the rollouts of step t+1 are generated in a
            background thread while step t updates, from a snapshot of the weights taken before
            that update; k: at most k updates behind. Every trajectory is tagged with the weights
            version that generated it (the metrics' `staleness`); its logprobs are the behaviour
            policy of the truncated importance weight (`loss.recompute_old_logp` is turned on).
            Needs an engine with weights of its own (policy=hf gets a copy of the model).
        off_policy_threads: with off_policy_steps > 0 and policy=hf on the CPU, n > 0 samples in a
            child process with n torch threads over shared-memory weights (its own interpreter: it
            never waits for the trainer's GIL; `rlgym_llm.rollout.hf_process`); 0 (the default):
            in a thread of the trainer's process, the only way on a GPU. The trainer keeps `threads`.
            On the 2 shared cores neither was reliably faster (benchmarks/results/peers/grpo_overlap.md).
        max_draws: DAPO's dynamic sampling, with filter_zero_variance: while fewer than
            tasks_per_step groups are kept, draw the missing number of new tasks again, up to this
            many rollout draws per step (DAPO: 10, `max_num_gen_batches`); 1 drops without refilling.
            The metrics count `draws` and `refill_groups`.
        eval_tasks: held-out tasks for the success measure before and after training (0: skip).
        eval_every: also measure held-out success every N steps (0: only before and after); the
            step's record gets `eval_success`, `eval_reward` and `eval_failed`.
        eval_temperature: sampling temperature of the held-out measure (0: greedy).
        save_every: checkpoint every N steps (0: only at the end).
        keep_checkpoints: how many checkpoints to keep.
        threads: torch CPU threads: auto (the CPUs this process may run on: its affinity mask,
            capped by a cgroup CPU quota; `rlgym_llm.core.threads`) or a number. The `rlgym`
            command also sets `OMP_WAIT_POLICY=PASSIVE` (unless set) so that idle OpenMP workers
            sleep instead of spinning against other jobs (docs/training.md, "CPU threads").
        max_failed_share: stop the run (exit 1, with the first error) when more than this share of
            the episodes of a batch fail (a training step, a held-out measure, the SFT
            demonstrations): an env that raises or an unreachable engine is a broken run, not data.
            1.0: never stop.
        episode_timeout_s: limit for one episode (generation and env steps) in training, the
            held-out measures and the SFT demonstrations; past it the episode is recorded as
            failed (and counts toward max_failed_share). Raise it on an overloaded machine.
        call_timeout_s: limit for one generate call in the same places (with policy=hf one call
            samples a batch of turns); past it the call is retried if the engine allows, then the
            episode fails. Raise it on an overloaded machine or for long completions.
        device: where the model trains and (policy=hf) samples: auto (cuda when torch sees a GPU),
            cpu or cuda (`rlgym_llm.rollout.device`).
        dtype: compute precision: auto (bfloat16 on a GPU, float32 on CPU), float32 or bfloat16.
            bfloat16 runs the matrix products under `torch.autocast`; the weights (the optimizer's
            master copy), logprobs and losses stay float32. A vLLM server on a GPU loads the weights in it.
        nproc: data-parallel training processes (`torch.distributed`, launched by torchrun; see
            docs/distributed.md). Each process rolls out its share of a step's tasks (whole groups)
            and trains on them; the gradients are averaged by DDP (gloo on CPU, NCCL on GPUs), so
            the update equals one process's on the same batch. `rlgym train trainer.nproc=N`
            starts N processes on this machine; across machines it is the total (torchrun's world
            size). Needs trainer.off_policy_steps=0 and tasks_per_step >= nproc.
        strategy: how the update is spread over the processes (`rlgym_llm.train.strategy`):
            `single` (one process), `ddp` (every rank holds the whole model; gradients averaged),
            `fsdp` (FSDP2: parameters, gradients and Adam states sharded over the ranks, one
            decoder layer gathered at a time; a full copy of the weights is kept for generation),
            or `auto`: ddp when nproc > 1, else single (what nproc alone selected before).
        activation_checkpointing: recompute each decoder layer's activations in the backward pass
            instead of storing them (less activation memory for about one more forward pass).
        sampling_seeds: `calls`: the n-th generate call of the run gets seed base + n (the order
            the calls arrive in one process); `episode`: each call's seed is a hash of its task
            seed, sample index and turn, so a step samples the same tokens however its tasks are
            split over processes or the order the calls arrive; `auto`: episode with several
            processes or a server backend (`TrainConfig.episode_seeds`), calls otherwise. A
            checkpoint resumes only with the kind it was sampled with.
        optim: optimizer and schedule.
        loss: the policy loss.
        lora: LoRA settings.
    """

    steps: int = 20
    tasks_per_step: int = 8
    group_size: int = 8
    micro_batch_size: int = 16
    mini_batches: int = 1
    filter_zero_variance: bool = True
    off_policy_steps: int = 0
    off_policy_threads: int = 0
    max_draws: int = 1
    eval_tasks: int = 32
    eval_every: int = 0
    eval_temperature: float = 0.0
    save_every: int = 10
    keep_checkpoints: int = 2
    threads: int | Literal["auto"] = "auto"
    max_failed_share: float = 0.5
    episode_timeout_s: float = 600.0
    call_timeout_s: float = 120.0
    device: Device = "auto"
    dtype: Precision = "auto"
    nproc: int = 1
    strategy: StrategyKind = "auto"
    activation_checkpointing: bool = False
    sampling_seeds: SamplingSeeds = "auto"
    optim: OptimConfig = field(default_factory=OptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)

    def __post_init__(self) -> None:
        p = [
            f"{k}={getattr(self, k)} must be >= 1"
            for k in (
                "steps",
                "tasks_per_step",
                "micro_batch_size",
                "mini_batches",
                "keep_checkpoints",
                "max_draws",
                "nproc",
            )
            if getattr(self, k) < 1
        ]
        if self.threads != "auto" and not (type(self.threads) is int and self.threads >= 1):
            p.append(f"threads={self.threads!r} must be auto (the CPUs this process may use) or an int >= 1")
        if self.group_size < 2:
            p.append(f"group_size={self.group_size}: group-relative credit needs >= 2 samples per task (e.g. 8)")
        p += [
            f"{k} must be >= 0"
            for k in ("eval_tasks", "save_every", "eval_temperature", "off_policy_steps", "off_policy_threads")
            if getattr(self, k) < 0
        ]
        if self.eval_every < 0:
            p.append("eval_every must be >= 0 (0: evaluate only before and after training)")
        if not 0 <= self.max_failed_share <= 1:
            p.append(f"max_failed_share must be in [0, 1], got {self.max_failed_share} (1.0: never stop)")
        if not self.episode_timeout_s > 0:
            p.append(f"episode_timeout_s must be > 0 seconds, got {self.episode_timeout_s} (e.g. 600)")
        if not self.call_timeout_s > 0:
            p.append(f"call_timeout_s must be > 0 seconds, got {self.call_timeout_s} (e.g. 120)")
        if self.strategy not in typing.get_args(StrategyKind):
            p.append(f"strategy={self.strategy!r} must be one of {', '.join(typing.get_args(StrategyKind))}")
        if self.strategy == "single" and self.nproc > 1:
            p.append(
                f"strategy=single with nproc={self.nproc}: single runs one process; "
                "set trainer.strategy=ddp or fsdp (or auto), or trainer.nproc=1"
            )
        if self.nproc > 1:
            p += self._distributed_problems()
        _raise(p)

    def _distributed_problems(self) -> list[str]:
        """What `nproc > 1` cannot be combined with, each with its fix."""
        n, p = self.nproc, []
        if self.off_policy_steps:
            p.append(
                f"nproc={n} with off_policy_steps={self.off_policy_steps}: sampling ahead runs in one process "
                "only so far; set trainer.off_policy_steps=0, or trainer.nproc=1"
            )
        if self.tasks_per_step < n:
            p.append(
                f"nproc={n} with tasks_per_step={self.tasks_per_step}: each process rolls out whole tasks; "
                f"set trainer.tasks_per_step >= {n}"
            )
        if self.sampling_seeds == "calls":
            p.append(
                f"nproc={n} with sampling_seeds=calls: call-counter seeds depend on the order of the calls in one "
                "process; set trainer.sampling_seeds=episode (or auto)"
            )
        return p

    @property
    def strategy_kind(self) -> str:
        """The strategy `strategy` names, `auto` resolved (ddp with several processes, else single)."""
        if self.strategy != "auto":
            return self.strategy
        return "ddp" if self.nproc > 1 else "single"

    @property
    def episode_seeds(self) -> bool:
        """Whether `sampling_seeds` asks for episode-keyed seeds whatever the backend (a server
        backend gets them under `auto` too: `TrainConfig.episode_seeds`)."""
        return self.sampling_seeds == "episode" or (self.sampling_seeds == "auto" and self.nproc > 1)


@dataclass(frozen=True)
class LogConfig:
    """Where the per-step metrics go besides `metrics.jsonl`; every numeric field keeps its name
    (`success`, `loss`, `failures/env`, ...) in each.

    Args:
        tensorboard: TensorBoard event files under `out_dir/tb` (the `tb` extra).
        wandb: a Weights & Biases run (the `wandb` extra) holding the run's config; with
            `WANDB_MODE=offline` it stays under `out_dir/wandb` until `wandb sync`.
        wandb_project: the W&B project.
        wandb_name: the W&B run name (null: the run folder's name).
    """

    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "rlgym-llm"
    wandb_name: str | None = None
