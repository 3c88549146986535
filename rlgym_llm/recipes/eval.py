"""`rlgym eval`: a policy on an env's held-out tasks, n samples each; report, JSON and plots.

    result, files = run(load_config("eval", ["env=gui", "policy.model=smollm2", "tasks=16"]))

Tasks are drawn by the seeds `env.test_seed_start + i`, disjoint from the training seeds; seeds that
draw the same task (the same content) are one task, their samples pooled, and the report states the
distinct tasks next to the episodes (`rlgym_llm.eval.runner`). Samples use
`policy.sampling.temperature` (pass@k needs sampling; set it to 0 for one greedy sample per task),
each generate call with a sampling seed keyed by (`seed`, task, sample, turn): the same command
samples the same episodes on any backend that honours seeds, whatever order a server answers in.
The policy is `policy.model` (`tiny`, `smollm2` or a folder) on `policy.backend`, or the weights of a
training run (`checkpoint=`).
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rlgym_llm.config import AgentConfig, EvalConfig
from rlgym_llm.recipes import export, parts
from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy
from rlgym_llm.rollout.policy import EpisodeSeededPolicy, TrainablePolicy

BUILTIN_MODELS = ("tiny", "smollm2")
"""Model names `policy.model` resolves itself (see `parts.model_dir`)."""


def run(cfg: EvalConfig, command: str = "rlgym eval") -> tuple[Any, dict[str, Path]]:
    """Evaluate as `cfg` says; write the report files to `out_dir`, a new or empty folder (as for
    `rlgym train`: an earlier report is never overwritten).

    Args:
        cfg: a validated config (`load_config("eval", overrides)`).
        command: the command line that reproduces the run (written into the report).

    Returns:
        (the `EvalResult`, the written files: markdown, json, pass_at_k and scores plots).

    Raises:
        ConfigError: `out_dir` already holds files; checked before anything loads.
    """
    from rlgym_llm.eval.report import write_report

    parts.run_folder(cfg, command="eval", create=False)
    parts.cpu_threads(cfg.threads)  # before the first `import torch`: OpenMP reads its wait policy then
    result = asyncio.run(_evaluate(with_run_settings(cfg)))
    return result, write_report(result, cfg.out_dir, command=command)


async def _evaluate(cfg: EvalConfig) -> Any:
    from rlgym_llm.eval.runner import aevaluate
    from rlgym_llm.rollout.progress import RolloutProgress
    from rlgym_llm.rollout.store import TrajectoryWriter

    parts.probe_env(cfg.env, cfg.sandbox)
    folder = parts.model_dir(cfg.policy)
    rollout = parts.rollout_config(cfg.policy, cfg.env, cfg.agent, cfg.samples, cfg.policy.sampling.temperature)
    rollout = replace(rollout, episode_timeout_s=cfg.episode_timeout_s, call_timeout_s=cfg.call_timeout_s)
    async with _Engine(cfg, folder) as (policy, tokenizer):
        Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
        writer = TrajectoryWriter(Path(cfg.out_dir) / "trajectories.jsonl") if cfg.save_trajectories else None
        progress = RolloutProgress(cfg.tasks * cfg.samples, "eval") if cfg.progress else None
        try:
            if progress is not None:
                progress.__enter__()
            result = await aevaluate(
                parts.env_factory(cfg.env, cfg.sandbox, cfg.split),
                parts.build_agent(cfg.agent, tokenizer),
                EpisodeSeededPolicy(policy, cfg.seed),
                env_id=cfg.env.id,
                seeds=range(cfg.env.test_seed_start, cfg.env.test_seed_start + cfg.tasks),
                samples=cfg.samples,
                rollout=rollout,
                policy_name=cfg.label or _label(cfg),
                ks=cfg.ks,
                success_threshold=cfg.success_threshold,
                reps=cfg.bootstrap_reps,
                confidence=cfg.confidence,
                seed=cfg.seed,
                writer=writer,
                on_episode=progress,
                max_failed_share=cfg.max_failed_share,
            )
        finally:
            if progress is not None:
                progress.__exit__(None, None, None)
            if writer is not None:
                writer.close()
    result.config.update({"eval": _plain(asdict(cfg)), "model_dir": str(folder)})
    return result


def with_run_settings(cfg: EvalConfig) -> EvalConfig:
    """With `checkpoint=` of a training run (or a folder `rlgym export` wrote): the run's model,
    prompt settings (the whole `agent` section: system prompt, tool schemas, history) and token
    budgets (`max_context`, `sampling.max_tokens`), so its weights are evaluated on the prompts they
    were trained on. Other settings (env, sampling temperature, tasks) stay as given."""
    run = export.run_config(Path(cfg.checkpoint)) if cfg.checkpoint else None
    if run is None:
        return cfg
    p = run["policy"]
    sampling = replace(cfg.policy.sampling, max_tokens=p["sampling"]["max_tokens"])
    policy = replace(cfg.policy, model=p["model"], max_context=p["max_context"], sampling=sampling)
    return replace(cfg, agent=AgentConfig(**run["agent"]), policy=policy)


def _plain(x: Any) -> Any:
    return {k: _plain(v) for k, v in x.items()} if isinstance(x, dict) else x


def _label(cfg: EvalConfig) -> str:
    name = Path(cfg.policy.model).name if cfg.policy.model not in BUILTIN_MODELS else cfg.policy.model
    if cfg.checkpoint:
        name += f" @ {cfg.checkpoint}"
    return name if cfg.policy.backend == "hf" else f"{name} ({cfg.policy.backend})"


class _Engine:
    """Async context manager: (policy, tokenizer) of the configured backend, stopped and closed on exit."""

    def __init__(self, cfg: EvalConfig, folder: Path):
        self.cfg, self.folder = cfg, folder
        self.policy: TrainablePolicy | OpenAICompatiblePolicy | None = None

    async def __aenter__(self) -> tuple[Any, Any]:
        cfg = self.cfg
        on = parts.compute(cfg.device, cfg.dtype)
        if cfg.policy.backend == "hf":
            model, tokenizer = parts.load_model(self.folder)
            if cfg.checkpoint:
                model = export.load_weights(model, Path(cfg.checkpoint))
            model.to(on.device)
        else:  # the engine holds the weights: only the tokenizer is needed here
            model, tokenizer = None, parts.load_tokenizer(self.folder)
        # vllm starts its server here (blocking until healthy): keep the event loop free meanwhile.
        self.policy = await asyncio.to_thread(parts.build_policy, cfg.policy, model, tokenizer, self.folder, on)
        return self.policy, tokenizer

    async def __aexit__(self, *exc: Any) -> None:
        if self.policy is not None:
            await self.policy.close()
