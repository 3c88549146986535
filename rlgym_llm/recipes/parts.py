"""The parts every recipe builds from its config sections: env factory, model, agent, policy, oracle,
rollout settings. Each builder takes the sections it reads and returns a plain object; the recipes
(`train`, `sft`, `eval`) call them in order.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rlgym_llm
from rlgym_llm.config import AgentConfig, EnvConfig, LoraConfig, PolicyConfig, SandboxConfig, load_config
from rlgym_llm.config.schema import DEFAULT_MAX_TURNS
from rlgym_llm.core import threads
from rlgym_llm.core.errors import ConfigError, MissingDependencyError
from rlgym_llm.rollout.manager import Agent, RolloutConfig
from rlgym_llm.rollout.policy import TrainablePolicy
from rlgym_llm.rollout.progress import ProgressReporter as ProgressReporter  # re-exported for the CLI

if TYPE_CHECKING:
    from rlgym_llm.rollout.device import Compute
    from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy

logger = logging.getLogger(__name__)


def load(
    config_name: str,
    overrides: Sequence[str] = (),
    config_dir: str | os.PathLike | None = None,
    extra: Sequence[str | os.PathLike] = (),
) -> Any:
    """The validated root config of a recipe (`train` or `eval`) from Hydra overrides; `extra`
    config folders add options to the main tree (`rlgym_llm.config.compose.search_path`).

    Raises:
        ConfigError: every problem of the config, each with its fix.
    """
    return load_config(config_name, overrides, config_dir, extra)


def cpu_threads(setting: int | str) -> int:
    """Apply the CPU thread policy (`rlgym_llm.core.threads`) and return torch's thread count.

    `OMP_WAIT_POLICY=PASSIVE` goes into the environment first (unless set), so that it is there when
    torch loads OpenMP, if this is the process's first `import torch`; then torch gets `setting`
    threads ("auto": the CPUs this process may run on).
    """
    threads.quiet_openmp()
    import torch

    n = threads.resolve(setting)
    torch.set_num_threads(n)
    logger.info("torch CPU threads: %d (threads=%s), OMP_WAIT_POLICY=%s", n, setting, os.environ["OMP_WAIT_POLICY"])
    return n


def config_yaml(cfg: Any) -> str:
    """A config as YAML (what `--print-config` shows and a run folder's config.yaml holds)."""
    from omegaconf import OmegaConf

    def plain(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        return [plain(v) for v in x] if isinstance(x, (list, tuple)) else x

    return OmegaConf.to_yaml(plain(dataclasses.asdict(cfg)))


RESUMABLE_CHANGES = (
    "out_dir",
    "resume",
    "progress",
    "trainer.steps",
    "trainer.nproc",
    "trainer.sampling_seeds",
    "trainer.threads",
)
"""The settings a resumed run may change: where it is and how it reports, its step budget, its
number of processes (the checkpoint holds the sampling-seed kind it was sampled with: the loop
refuses another) and its CPU threads (another machine has other cores)."""


def _flat(x: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(x, dict):
        return {k: v for key, value in x.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): x}


def config_differences(saved: dict[str, Any], cfg: Any) -> list[str]:
    """`key: saved -> now` for every setting of `cfg` that differs from a run's saved config,
    except `RESUMABLE_CHANGES`."""
    from omegaconf import OmegaConf

    now = _flat(OmegaConf.to_container(OmegaConf.create(config_yaml(cfg))))
    old = _flat(saved)
    missing = object()
    for key in set(now) - set(old):
        # A setting added after the run was saved behaved as its default there: not a difference
        # while it still has that default.
        default = _field_default(cfg, key, missing)
        if default is not missing and default == now[key]:
            old[key] = default
    return [
        f"{key}: {old.get(key, '(absent)')!r} -> {now.get(key, '(absent)')!r}"
        for key in sorted(set(now) | set(old))
        if key not in RESUMABLE_CHANGES and old.get(key, missing) != now.get(key, missing)
    ]


def _field_default(cfg: Any, key: str, missing: Any) -> Any:
    """The schema default of the dotted setting `key` of a config dataclass tree, or `missing`."""
    *parents, name = key.split(".")
    node = cfg
    for part in parents:
        node = getattr(node, part, None)
    if node is None or not dataclasses.is_dataclass(node):
        return missing
    for f in dataclasses.fields(node):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return missing


def run_folder(cfg: Any, command: str = "train", create: bool = True) -> Path:
    """The folder of this run, created, with the composed config written to its `config.yaml`
    (`create=False`: only checked, as `rlgym train` does before it starts torchrun and `rlgym eval`
    before it loads the model).

    A new run (or evaluation) gets a new folder: `out_dir` (timestamped by default) must not hold
    anything yet, so an earlier run is never reused or overwritten silently.
    `resume=FOLDER` continues a training run there instead, and only when its saved config matches
    this one in everything but `RESUMABLE_CHANGES`; `cfg.out_dir` becomes that folder.

    Raises:
        ConfigError: the folder holds another run, or the run to resume is missing or differs.
    """
    from omegaconf import OmegaConf

    resume = getattr(cfg, "resume", None)
    if resume is not None:
        if command != "train":
            raise ConfigError([f"`resume={resume}`: only `rlgym train` resumes; drop resume="])
        out = Path(resume)
        saved = out / "config.yaml"
        if not saved.exists():
            raise ConfigError([f"`resume={resume}`: no run there ({saved} is missing); pass a folder of `rlgym train`"])
        cfg.out_dir = str(out)
        differences = config_differences(OmegaConf.to_container(OmegaConf.load(saved)), cfg)  # type: ignore[arg-type]
        if differences:
            raise ConfigError(
                [
                    f"`resume={resume}`: this config differs from the run's in {len(differences)} setting(s) "
                    f"(only {', '.join(RESUMABLE_CHANGES[3:])} may change when resuming; start a new run for the others)",
                    *differences,
                ]
            )
    else:
        out = Path(cfg.out_dir)
        if out.exists() and any(out.iterdir()):
            fix = f"pass resume={cfg.out_dir} to continue that run, or " if command == "train" else ""
            raise ConfigError(
                [
                    f"`out_dir={cfg.out_dir}` already holds files (another run?): {fix}choose a new out_dir "
                    "(the default is a new timestamped folder)"
                ]
            )
    if not create:
        return out
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.yaml").write_text(config_yaml(cfg))
    except OSError as e:
        raise ConfigError([f"`out_dir={cfg.out_dir}`: {e}"]) from e
    return out


def import_object(target: str) -> Any:
    """`module:Name` -> the object."""
    module, _, name = target.partition(":")
    if not name:
        raise ConfigError([f"{target!r} is not of the form module:Name"])
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ConfigError([f"cannot import {target!r}: {e}"]) from e


def register_env(env: EnvConfig) -> None:
    """Import `env.module` (it registers its envs), and register `env.id` from `env.entry_point`
    when it is not registered yet (toy and user envs)."""
    from rlgym_llm.core import registry

    if env.module:
        registry.import_env_module(env.module)
    if env.id and env.entry_point and registry.needs_registration(env.id, env.entry_point):
        registry.import_env_module(env.entry_point.partition(":")[0])  # make() imports it: find local modules
        rlgym_llm.register(env.id, env.entry_point)  # no limit here: `turn_limit` finds the class's own


def turn_limit(env: EnvConfig) -> tuple[int, str]:
    """(the turn limit of an episode, where it comes from): `env.max_turns` when the config sets it;
    else the env's own, from its registration (`rlgym_llm.register(id, ..., max_turns=N)`), for an
    env named by `env.entry_point` from its class's `max_turns` attribute or the registration of that
    class under another id; else `DEFAULT_MAX_TURNS`."""
    if env.max_turns is not None:
        return env.max_turns, "env.max_turns in the config"
    from rlgym_llm.core import registry

    register_env(env)
    env_id = str(env.id)
    own = registry.default_max_turns(env_id)
    if own is not None:
        return own, "from the env's registration"
    entry = registry.spec(env_id).entry_point
    cls = import_object(entry) if isinstance(entry, str) else entry
    stated = getattr(cls, "max_turns", None)
    if isinstance(stated, int) and not isinstance(stated, bool) and stated >= 1:
        return stated, f"from {getattr(cls, '__name__', cls)}.max_turns"
    # the same class registered under another id (README: `register("me/Echo-v0", EchoEnv, max_turns=1)`
    # in the module that `env.entry_point=my_envs:EchoEnv` names)
    names = {cls, f"{getattr(cls, '__module__', '')}:{getattr(cls, '__qualname__', '')}"}
    limits: dict[int, str] = {}
    for other in rlgym_llm.list_envs():
        limit = registry.default_max_turns(other)
        if other != env_id and limit is not None and registry.spec(other).entry_point in names:
            limits.setdefault(limit, other)
    if len(limits) == 1:
        ((limit, other),) = limits.items()
        return limit, f"from the registration of {other}"
    return DEFAULT_MAX_TURNS, "the default: the env sets no limit; env.max_turns=N sets one"


def resolve_turn_limit(env: EnvConfig) -> str:
    """Set `env.max_turns` to the limit of `turn_limit` (the run folder's config.yaml then says it),
    and return the line that reports it, e.g. `env me/Echo-v0: max_turns=1 (from the env's registration)`."""
    env.max_turns, source = turn_limit(env)
    return f"env {env.id}: max_turns={env.max_turns} ({source})"


def env_kwargs(env: EnvConfig, sandbox: SandboxConfig | None = None) -> dict[str, Any]:
    """Constructor kwargs of the env (the sandbox backend and the data set included)."""
    return env.call_kwargs(sandbox.backend if sandbox is not None else None)


def env_factory(env: EnvConfig, sandbox: SandboxConfig | None = None, split: str = "train") -> Callable[[], Any]:
    """A zero-argument factory of fresh envs drawing from the content pool `split` (DESIGN.md: training
    from `train`, the held-out curve from `val`, before/after numbers from `test`). An env whose
    constructor takes no `split` gets none: its pools are told apart by seed only (`takes_split`)."""
    register_env(env)
    kwargs, env_id = env_kwargs(env, sandbox), str(env.id)  # a validated config always names its env
    if takes_split(env_id):
        kwargs["split"] = split
    limit = turn_limit(env)[0]
    return lambda: rlgym_llm.make(env_id, max_turns=limit, **kwargs)


def takes_split(env_id: str) -> bool:
    """Whether the env's constructor takes `split` (every shipped env does; a user env may not)."""
    from rlgym_llm.core import registry

    entry = registry.spec(env_id).entry_point
    cls = import_object(entry) if isinstance(entry, str) else entry
    if not callable(cls):
        return False
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return "split" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def split_note(env: EnvConfig) -> str | None:
    """The line that says a run's held-out tasks may repeat training content, for an env without splits."""
    register_env(env)
    if takes_split(str(env.id)):
        return None
    return (
        f"env {env.id} takes no `split`: its held-out tasks are other seeds, and may repeat training content "
        "(add `split` to its constructor: docs/adding_an_env.md)"
    )


def probe_env(env: EnvConfig, sandbox: SandboxConfig | None = None) -> None:
    """Build the env once and close it, before anything heavy starts: the constructor's own checks
    of its arguments (a level out of range, a dataset that does not exist) fail now, as a config
    error, instead of in every episode after the model has loaded."""
    try:
        built = env_factory(env, sandbox)()
    except ConfigError as e:
        raise ConfigError([f"{env.id} with env.kwargs={env.kwargs}: {p}" for p in e.problems]) from e
    except (TypeError, ValueError, LookupError, OSError) as e:
        raise ConfigError([f"{env.id} with env.kwargs={env.kwargs}: {type(e).__name__}: {e}"]) from e
    built.close()


def model_dir(policy: PolicyConfig) -> Path:
    """The Hugging Face folder of `policy.model`: `tiny` and `smollm2` are built/converted once and
    cached; a folder is used as it is; a Hub id (`org/name`) is found in the Hugging Face cache or
    downloaded (`rlgym_llm.rollout.hub`)."""
    if policy.model == "tiny":
        from rlgym_llm.rollout.tiny_model import build_tiny_model

        return build_tiny_model()
    if policy.model == "smollm2":
        from rlgym_llm.rollout.smollm2 import build_smollm2

        return build_smollm2()
    from rlgym_llm.rollout.hub import resolve_model

    return resolve_model(policy.model)


def setup_model(
    policy: PolicyConfig, report: Callable[[str], None], on: Compute | None = None
) -> tuple[Any, Any, Path]:
    """(model, tokenizer, folder) of `policy.model` on `on`'s device, with a report line before and
    after (building or converting a built-in model the first time takes a while)."""
    import time

    t0 = time.perf_counter()
    report(f"setup: model {policy.model} ...")
    folder = model_dir(policy)
    model, tokenizer = load_model(folder, on)
    report(f"setup: model {policy.model} loaded from {folder} ({time.perf_counter() - t0:.0f} s)")
    return model, tokenizer, folder


def compute(device: str, dtype: str) -> Compute:
    """The device and compute dtype of a run (`trainer.device`/`trainer.dtype`, eval's `device`/`dtype`)."""
    from rlgym_llm.rollout.device import resolve

    return resolve(device, dtype)


def release_memory() -> bool:
    """Collect garbage and hand the C heap's free pages back to the OS (`core.memory.trim_heap`).

    Freed tensors stay in the process's heap, counted in its resident memory, until the allocator
    returns them; between phases (after the warm-up, before the final export) that was the gap
    between a run's working set and its peak RSS. Returns False where there is no glibc.
    """
    import gc

    from rlgym_llm.core.memory import trim_heap

    gc.collect()
    return trim_heap()


def load_model(path: str | os.PathLike, on: Compute | None = None) -> tuple[Any, Any]:
    """(model with float32 weights in eval mode, on `on.device` (default cpu); tokenizer) from a folder."""
    model: Any = _transformers("loading a model").AutoModelForCausalLM.from_pretrained(str(path), dtype="float32")
    if on is not None:
        model.to(on.device)
    model.eval()
    return model, load_tokenizer(path)


def _transformers(feature: str) -> Any:
    """The `transformers` module, or the error that names the package missing (it, or torch under it)."""
    try:
        import transformers
    except ImportError as e:
        raise MissingDependencyError.of(e, feature, default="transformers") from e
    return transformers


def load_tokenizer(path: str | os.PathLike) -> Any:
    """The tokenizer of a model folder, with a chat template that renders tools (the model's own
    where it has one, `rlgym_llm.rollout.hub.ensure_chat_template`)."""
    from rlgym_llm.rollout.hub import ensure_chat_template

    tokenizer = _transformers("loading a tokenizer").AutoTokenizer.from_pretrained(str(path))
    ensure_chat_template(tokenizer)
    return tokenizer


def add_lora(model: Any, lora: LoraConfig) -> Any:
    """Wrap `model` with trainable LoRA adapters (peft); the base weights are frozen."""
    try:
        from peft import LoraConfig as PeftLoraConfig
        from peft import get_peft_model
    except ImportError as e:
        raise MissingDependencyError.of(e, "LoRA training", default="peft") from e
    config = PeftLoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=list(lora.target_modules)
    )
    return get_peft_model(model, config)


class WithoutToolSchemas:
    """An agent that renders prompts without the env's tool schemas (parsing is unchanged)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def render_text(self, messages: Any, tools: Any, generation_prompt: bool) -> str:
        return self.inner.render_text(messages, None, generation_prompt)

    def render_prompt(self, messages: Any, tools: Any) -> list[int]:
        return self.inner.render_prompt(messages, None)

    def render_continuation(self, history: Any, new_messages: Any, tools: Any, completion: Any) -> list[int]:
        return self.inner.render_continuation(history, new_messages, None, completion)

    def __getattr__(self, name: str) -> Any:  # prepare, parse, assistant_message, tokenizer
        return getattr(self.inner, name)


def build_agent(agent: AgentConfig, tokenizer: Any) -> Agent:
    """The agent named by `agent.name` (`tool_calling`: rlgym_agents.ToolCallingAgent)."""
    from rlgym_agents.tool_calling import ToolCallingAgent

    built = ToolCallingAgent(tokenizer, system_prompt=agent.system_prompt, full_history=agent.full_history)
    return built if agent.tool_schemas else WithoutToolSchemas(built)


def build_trainable_policy(
    policy: PolicyConfig,
    model: Any,
    tokenizer: Any,
    folder: Path,
    lora_rank: int | None = None,
    on: Compute | None = None,
    sync: str | None = None,
) -> TrainablePolicy:
    """The engine RL samples from and syncs weights to: `hf` shares `model` with the trainer
    (in-place sync, computing as `on` says), `vllm` starts a server on `folder` (the weights it
    serves first) on `on`'s device type and dtype, synced as `sync` says (default `policy.sync`)."""
    if policy.backend == "hf":
        from rlgym_llm.rollout.hf_policy import TransformersPolicy

        return TransformersPolicy(
            model, tokenizer, max_batch_size=policy.max_batch_size, max_context=policy.max_context, compute=on
        )
    if policy.backend == "vllm":
        from rlgym_llm.rollout.vllm_policy import VLLMPolicy

        sync = sync or policy.sync
        rank = lora_rank if sync in ("auto", "lora") else None  # inplace and restart serve merged weights
        return VLLMPolicy(
            folder, max_lora_rank=rank, sync=sync, inplace_load=policy.inplace_load, **vllm_server_kwargs(policy, on)
        ).start()
    raise ConfigError([f"policy={policy.backend} cannot be trained; use policy=hf or policy=vllm"])


def vllm_server_kwargs(policy: PolicyConfig, on: Compute | None = None) -> dict[str, Any]:
    """`VLLMServer` settings from the config: context, parallel sizes, and on a GPU the device,
    dtype and memory share."""
    kwargs: dict[str, Any] = {
        "max_model_len": policy.max_context,
        "tensor_parallel_size": policy.tensor_parallel_size,
        "data_parallel_size": policy.data_parallel_size,
    }
    if on is not None and on.device.type == "cuda":
        kwargs.update(
            device="cuda",
            dtype=str(on.dtype).removeprefix("torch."),
            gpu_memory_utilization=policy.gpu_memory_utilization,
        )
        if policy.server_gpus:
            kwargs["env"] = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, policy.server_gpus))}
    return kwargs


def build_policy(
    policy: PolicyConfig, model: Any, tokenizer: Any, folder: Path, on: Compute | None = None
) -> TrainablePolicy | OpenAICompatiblePolicy:
    """Any engine, for evaluation: a trainable one, or `openai` (any OpenAI-compatible endpoint).
    Every backend's `close()` releases it."""
    if policy.backend != "openai":
        # evaluation never syncs weights: no in-place machinery (vLLM's dev endpoints) on the server
        return build_trainable_policy(policy, model, tokenizer, folder, on=on, sync="restart")
    from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy

    if not policy.base_url:
        raise ConfigError(["policy.base_url is required for policy=openai, e.g. http://127.0.0.1:8000/v1"])
    return OpenAICompatiblePolicy(
        policy.base_url,
        model=policy.served_model or policy.model,
        max_context=policy.max_context,
        api_key=os.environ.get(policy.api_key_env),
    )


def oracle_factory(target: str) -> Callable[[Any], Callable[[Any], Any]]:
    """Adapt an env's scripted expert to `sft.Oracle`: built after the env's reset, called with messages.

    The shipped oracles differ in shape: some take the env in their constructor, some a `reset`
    with the task or the opening messages; this reads their signatures once.
    """
    cls = import_object(target)
    init = [p for p in inspect.signature(cls).parameters if p not in ("self",)]

    def make(env: Any) -> Callable[[Any], Any]:
        oracle = cls(env) if init and init[0] == "env" else cls()
        reset = getattr(oracle, "reset", None)
        if reset is not None:
            params = list(inspect.signature(reset).parameters)
            if params and params[0] == "task":
                reset(env.unwrapped.task)
            else:
                reset()
        return oracle.act

    return make


def rollout_config(
    policy: PolicyConfig,
    env: EnvConfig,
    agent: AgentConfig,
    group_size: int,
    temperature: float,
    episode_timeout_s: float | None = None,
    call_timeout_s: float | None = None,
) -> RolloutConfig:
    """The rollout manager's config: `group_size` samples per task at `temperature` (training: G
    and the sampling temperature; evaluation: 1 or n and the evaluation temperature), each episode
    limited to `episode_timeout_s` and each generate call to `call_timeout_s` (None: the manager's
    defaults)."""
    config = RolloutConfig(
        group_size=group_size,
        max_turns=turn_limit(env)[0],
        max_context=policy.max_context,
        sampling=dataclasses.replace(policy.sampling, temperature=temperature),
        concurrency=policy.concurrency,
        token_check=agent.token_check,
        # Envs that run code are slow: step them in threads. Others step on the event loop, which
        # keeps batching (and so sampling) deterministic for exact resumes.
        env_in_thread=env.sandbox_kwarg is not None,
    )
    if episode_timeout_s is not None:
        config = dataclasses.replace(config, episode_timeout_s=episode_timeout_s)
    if call_timeout_s is not None:
        config = dataclasses.replace(config, call_timeout_s=call_timeout_s)
    return config
