"""`rlgym sft`: the supervised warm-up alone, with held-out success before and after it.

    result = run(load_config("train", ["env=math", "sft.steps=200"]))

The warm-up (`warm_up`) is also the first stage of `recipes.train`: an oracle (a scripted expert)
plays `sft.episodes` tasks through the rollout manager, and the model is fine-tuned on its turns.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rlgym_llm.config import TrainConfig
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import parts
from rlgym_llm.rollout.manager import Agent, RolloutManager
from rlgym_llm.rollout.policy import EpisodeSeededPolicy, SeededPolicy, TrainablePolicy
from rlgym_llm.rollout.progress import ProgressReporter

if TYPE_CHECKING:
    from rlgym_llm.rollout.device import Compute

logger = logging.getLogger(__name__)

Report = Callable[[str], None]
"""Where a recipe reports progress lines (the CLI prints them; default: the log)."""


def warm_up(
    cfg: TrainConfig,
    model: Any,
    tokenizer: Any,
    agent: Agent,
    make_env: Callable[[], Any],
    out: Path,
    force: bool = False,
    report: Report = logger.info,
    progress: ProgressReporter | None = None,
    on: Compute | None = None,
) -> tuple[Any, dict[str, Any] | None]:
    """SFT on oracle demonstrations, saved to `out/sft_model`; or the weights of an earlier warm-up
    (`out/sft_model`, or `sft.init`), loaded instead unless `force`. `on`: device and compute dtype.

    Returns:
        (the warmed-up model, what the warm-up did, or None when its weights were loaded).
    """
    from rlgym_llm.train.sft import oracle_trajectories, sft

    saved = out / "sft_model"
    source = Path(cfg.sft.init) if cfg.sft.init else saved
    if (source / "config.json").exists() and not force:
        model, _ = parts.load_model(source, on)
        report(f"SFT: loaded the warm-up weights from {source}")
        return model, None
    if not cfg.env.oracle:
        raise ConfigError([f"SFT needs an oracle for {cfg.env.id}: set env.oracle=module:Class"])
    t0 = time.perf_counter()
    progress = progress or ProgressReporter(enabled=False)
    seeds = range(cfg.env.train_seed_start, cfg.env.train_seed_start + cfg.sft.episodes)
    with progress.phase("SFT demonstrations", cfg.sft.episodes) as shown:
        demos = oracle_trajectories(
            make_env,
            agent,
            tokenizer,
            parts.oracle_factory(cfg.env.oracle),
            seeds,
            parts.turn_limit(cfg.env)[0],
            idle_prob=cfg.sft.idle_prob,
            successful_only=cfg.sft.successful_only,
            env_in_thread=cfg.env.sandbox_kwarg is not None,
            max_failed_share=cfg.trainer.max_failed_share,
            on_episode=shown,
            episode_timeout_s=cfg.trainer.episode_timeout_s,
        )
    if not any(t.reward > 0 for t in demos):
        raise ConfigError(["the oracle solved none of the SFT episodes; check env.oracle and env.max_turns"])
    pad = tokenizer.pad_token_id or 0
    if cfg.sft.lora:
        model = parts.add_lora(model, cfg.trainer.lora)
    with progress.phase("SFT steps", cfg.sft.steps) as shown:
        step = lambda i, loss: shown.advance(status=f"loss {loss:.3f}")  # noqa: E731
        losses = sft(
            model,
            demos,
            pad,
            cfg.sft.steps,
            cfg.sft.batch_size,
            cfg.sft.lr,
            seed=cfg.seed,
            on_step=step,
            compute=on,
            lr_schedule=cfg.sft.lr_schedule,
            micro_batch_size=cfg.sft.micro_batch_size,
        )
    if cfg.sft.lora:  # the saved warm-up is a plain model: RL (with or without LoRA) starts from it
        model = model.merge_and_unload()
    model.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    parts.release_memory()  # the warm-up's optimizer and activations: RL's phase starts without them
    demo_success = sum(t.reward > 0 for t in demos) / len(demos)
    info = {"episodes": len(demos), "demo_success": demo_success, "steps": cfg.sft.steps}
    info.update(loss_first=losses[0], loss_last=losses[-1], seconds=time.perf_counter() - t0)
    report(
        f"SFT: {len(demos)} oracle episodes (success {demo_success:.2f}), {cfg.sft.steps} steps, "
        f"loss {losses[0]:.3f} -> {losses[-1]:.3f} ({info['seconds']:.0f} s); saved to {saved}"
    )
    return model, info


SEED_STRIDE = 1_000_003
"""Sampling seeds of one run's call streams are `base + n` for its n-th call. Bases of different run
seeds lie this far apart: two held-out (or two training) streams share no seed within a million
calls, a held-out and a training stream none within 777,000 (the held-out offset 7,777,777)."""


def held_out_seed_base(seed: int) -> int:
    """The first sampling seed of a run's held-out measure. Seed 0 keeps 7,777,777; other run seeds
    are `SEED_STRIDE` apart (they were 1 apart, so the measures of seeds s and s + 1 shared all but
    one sampling seed and were not independent units)."""
    return 7_777_777 + seed * SEED_STRIDE


def held_out_manager(
    cfg: TrainConfig, make_env: Callable[[], Any], agent: Agent, policy: TrainablePolicy
) -> RolloutManager:
    """The manager of the held-out success measure: one episode per task at `trainer.eval_temperature`,
    sampling seeds of its own, the same in every measure (a call counter re-counted from 0, or keyed
    by episode where the run's rollouts are: `TrainConfig.episode_seeds`)."""
    settings = parts.rollout_config(
        cfg.policy,
        cfg.env,
        cfg.agent,
        1,
        cfg.trainer.eval_temperature,
        cfg.trainer.episode_timeout_s,
        cfg.trainer.call_timeout_s,
    )
    base = held_out_seed_base(cfg.seed)
    seeding = EpisodeSeededPolicy(policy, base) if cfg.episode_seeds else SeededPolicy(policy, base)
    manager = RolloutManager(make_env, agent, seeding, settings)
    manager.env_id = cfg.env.id
    return manager


def run(cfg: TrainConfig, report: Report = logger.info, progress: ProgressReporter | None = None) -> dict[str, Any]:
    """`rlgym sft`: warm-up on oracle demonstrations; held-out success before and after it.

    Writes `out_dir/sft_model` and `out_dir/sft_summary.json`; returns the summary.
    """
    parts.cpu_threads(cfg.trainer.threads)  # before the first `import torch`: OpenMP reads its wait policy then
    import torch

    from rlgym_llm.train.loop import evaluate

    if not cfg.env.oracle:
        raise ConfigError([f"rlgym sft needs an oracle for {cfg.env.id}: set env.oracle=module:Class"])
    torch.manual_seed(cfg.seed)
    # model -> agent
    parts.probe_env(cfg.env, cfg.sandbox)
    turns = parts.resolve_turn_limit(cfg.env)
    out = parts.run_folder(cfg, "sft")
    report(f"run folder: {out}")
    report(turns)
    on = parts.compute(cfg.trainer.device, cfg.trainer.dtype)
    model, tokenizer, folder = parts.setup_model(cfg.policy, report, on)
    make_env = parts.env_factory(cfg.env, cfg.sandbox)  # the warm-up's demonstrations: the train pool
    test_env = parts.env_factory(cfg.env, cfg.sandbox, "test")  # before/after: tasks it never trains on
    agent = parts.build_agent(cfg.agent, tokenizer)
    seeds = list(range(cfg.env.test_seed_start, cfg.env.test_seed_start + cfg.trainer.eval_tasks))

    # one engine measures both: it serves the base weights, then takes the warm-up's (a vLLM server
    # syncs them as policy.sync says, adapters aside: the warm-up trains full weights; none starts
    # when there is nothing to measure)
    sync = "auto" if cfg.policy.sync == "lora" else None
    policy = parts.build_trainable_policy(cfg.policy, model, tokenizer, folder, on=on, sync=sync) if seeds else None

    measured: dict[str, float] = {}  # the last held-out measure, for its counts

    def success() -> float | None:  # manager -> one held-out measure
        if policy is None:
            return None
        with held_out_manager(cfg, test_env, agent, policy) as manager:
            measured.update(evaluate(manager, seeds, cfg.trainer.max_failed_share, progress))
        return measured["success"]

    try:
        before = success()
        model, info = warm_up(
            cfg, model, tokenizer, agent, make_env, out, force=True, report=report, progress=progress, on=on
        )
        if policy is not None:
            policy.sync_weights(model)
        after = success()
    finally:
        if policy is not None:
            asyncio.run(policy.close())
    assert info is not None
    result = {**info, "success_before": before, "success_after": after, "model": str(out / "sft_model")}
    # the seeds are episodes; seeds that drew the same task count once among the distinct tasks
    result["held_out_tasks"], result["held_out_episodes"] = int(measured.get("tasks", 0)), len(seeds)
    (out / "sft_summary.json").write_text(json.dumps(result, indent=1))
    return result
