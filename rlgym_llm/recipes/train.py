"""`rlgym train`: SFT warm-up (optional), then the RL loop. Read top to bottom:
model -> agent -> policy -> managers -> trainer -> loop.

    summary = run(load_config("train", ["credit=gated", "trainer.steps=5"]))

A run folder (`out_dir`, new for every run) gets: config.yaml (the composed config, every credit
parameter and the env's turn limit included), sft_model/ (the warm-up weights, and warm_up.json: what
the warm-up did), metrics.jsonl (one record per RL step), checkpoints/ (exact resume:
`rlgym train resume=<run folder>` reads config.yaml, see `recipes.resume`; Ctrl-C saves one first),
curve.png and summary.json (the whole run, however many times it was resumed).

With `trainer.nproc` > 1 every process torchrun started runs this recipe (docs/distributed.md):
rank 0 makes the run folder and the warm-up, the others load its weights; each builds its own
engine and rollout manager; rank 0 alone measures held-out success and writes the outputs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlgym_llm.config import TrainConfig
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import parts
from rlgym_llm.recipes.sft import SEED_STRIDE, Report, held_out_manager, warm_up
from rlgym_llm.rollout.manager import RolloutManager
from rlgym_llm.rollout.policy import EpisodeSeededPolicy, SeededPolicy
from rlgym_llm.rollout.progress import ProgressReporter

logger = logging.getLogger(__name__)


def run(
    cfg: TrainConfig,
    report: Report = logger.info,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    progress: ProgressReporter | None = None,
) -> dict[str, Any]:
    """Train as `cfg` says; returns the summary written to `out_dir/summary.json`.

    Args:
        cfg: a validated config (`load_config("train", overrides)`).
        report: receives progress lines (setup, SFT, resume).
        on_step: receives each RL step's metrics record.
        progress: shows every phase (SFT, RL steps and their rollouts, held-out evaluations).
    """
    parts.cpu_threads(cfg.trainer.threads)  # before the first `import torch`: OpenMP reads its wait policy then
    import torch

    from rlgym_llm.train.distributed import Distributed

    start = time.perf_counter()
    torch.manual_seed(cfg.seed)

    parts.probe_env(cfg.env, cfg.sandbox)  # the env's own argument checks, before anything heavy
    t = cfg.trainer
    on = parts.compute(t.device, t.dtype)
    dist = Distributed.start(t.nproc, on.device.type)  # one process: rank 0 of 1
    try:
        summary = _run(cfg, dist, on, start, report if dist.main else _quiet, on_step, progress)
    except BaseException:
        dist.close(failed=True)
        raise
    dist.close()
    return summary


def _quiet(line: str) -> None:
    """The report of ranks other than 0: rank 0 reports for the run."""


def _run(
    cfg: TrainConfig,
    dist: Any,
    on: Any,
    start: float,
    report: Report,
    on_step: Callable[[dict[str, Any]], None] | None,
    progress: ProgressReporter | None,
) -> dict[str, Any]:
    """`run` in one process of `dist`."""
    import torch

    from rlgym_llm.rollout import hf_process
    from rlgym_llm.rollout.hf_policy import TransformersPolicy
    from rlgym_llm.train import checkpoint
    from rlgym_llm.train.credit_inputs import CreditAssigner
    from rlgym_llm.train.loop import RunParts, train
    from rlgym_llm.train.plots import learning_curve
    from rlgym_llm.train.strategy import make_strategy
    from rlgym_llm.train.trainer import PolicyTrainer

    # the env's own turn limit unless the config sets one; config.yaml records the one used
    turns = parts.resolve_turn_limit(cfg.env)
    # a new folder, or the run `resume=` names with the same config; made by rank 0, whose path
    # (its timestamp) or problems every rank then takes
    made: Path | ConfigError | None = None
    if dist.main:
        try:
            made = parts.run_folder(cfg)
        except ConfigError as e:
            made = e
    made = dist.broadcast(made)
    if isinstance(made, ConfigError):
        raise made
    out = Path(str(made))
    cfg.out_dir = str(out)
    report(f"run folder: {out}" + (" (resuming)" if cfg.resume else ""))
    report(turns)
    if (note := parts.split_note(cfg.env)) is not None:
        report(note)

    # 1. model (warmed up on oracle demonstrations) on its device, and the env it acts in
    progress = progress if progress is not None and dist.main else ProgressReporter(enabled=False)
    t = cfg.trainer
    model, tokenizer, folder = parts.setup_model(cfg.policy, report, on)
    make_env = parts.env_factory(cfg.env, cfg.sandbox)
    # 2. agent: messages <-> tokens, model text -> actions
    agent = parts.build_agent(cfg.agent, tokenizer)
    sft_info = None
    if cfg.sft.enabled or cfg.sft.init:
        # rank 0 warms up and saves out/sft_model; the other ranks then load it (DDP would also copy
        # rank 0's weights, but the reference model and a vLLM server start from the folder)
        if dist.main:
            model, sft_info = warm_up(
                cfg, model, tokenizer, agent, make_env, out, report=report, progress=progress, on=on
            )
        dist.barrier()
        if not dist.main:
            model, _ = warm_up(cfg, model, tokenizer, agent, make_env, out, report=report, progress=progress, on=on)
        sft_info = warm_up_info(out, sft_info) if dist.main else None
    start_from = warm_start(cfg, out, folder)  # the weights RL starts from, in a folder
    if t.lora.enabled:
        model = parts.add_lora(model, t.lora)
    # how the update is spread over the ranks; generation and the credit models read `rollout_model`:
    # the trained model itself, or (fsdp) a full copy that the trainer refreshes after every update
    strategy = make_strategy(t.strategy_kind, dist, t.activation_checkpointing, on)
    rollout_model = strategy.rollout_model(model)

    # 3. policy: the engine that samples, and takes the trainer's weights after every update; a
    # server starts on the warm-up's weights, not the base model's
    lora_rank = t.lora.r if t.lora.enabled else None
    if cfg.policy.backend == "vllm" and dist.enabled:
        policy = node_server(cfg, dist, rollout_model, tokenizer, start_from, lora_rank, on)
    else:
        policy = parts.build_trainable_policy(cfg.policy, rollout_model, tokenizer, start_from, lora_rank, on=on)
    # sampling ahead (off_policy_steps > 0), the training rollouts come from a copy of the weights
    # that takes a snapshot between updates; the held-out measure keeps the trainer's own weights
    # (in a child process with trainer.off_policy_threads > 0 on the CPU: see rollout/hf_process.py)
    engine = policy
    if t.off_policy_steps and isinstance(policy, TransformersPolicy):
        in_child = on.device.type == "cpu" and on.dtype == torch.float32
        if t.off_policy_threads and not in_child:
            logger.warning(
                "trainer.off_policy_threads=%d: a sampling process runs on the CPU in float32 "
                "only; sampling ahead in a thread on %s",
                t.off_policy_threads,
                on.device,
            )
        engine = hf_process.detached(policy, threads=t.off_policy_threads if in_child else 0)
    managers: list[RolloutManager] = []  # each keeps its envs for reuse until closed
    try:
        # 4. managers: G samples per training task; one per held-out task for the success measure
        settings = parts.rollout_config(
            cfg.policy,
            cfg.env,
            cfg.agent,
            t.group_size,
            cfg.policy.sampling.temperature,
            t.episode_timeout_s,
            t.call_timeout_s,
        )
        base = cfg.seed * SEED_STRIDE
        # episode-keyed seeds sample the same tokens however the tasks are split over processes and
        # whatever order a server answers in
        seeding = EpisodeSeededPolicy(engine, base) if cfg.episode_seeds else SeededPolicy(engine, base)
        rollouts = RolloutManager(make_env, agent, seeding, settings)
        rollouts.env_id = cfg.env.id
        managers.append(rollouts)
        # rank 0 evaluates: before/after on the test pool, the curve on the val pool (DESIGN.md, Splits)
        held_out: RolloutManager | None = None
        curve: RolloutManager | None = None
        if dist.main:
            held_out = held_out_manager(cfg, parts.env_factory(cfg.env, cfg.sandbox, "test"), agent, policy)
            managers.append(held_out)
            if t.eval_every:
                curve = held_out_manager(cfg, parts.env_factory(cfg.env, cfg.sandbox, "val"), agent, policy)
                managers.append(curve)

        # 5. trainer: the clipped policy loss, the optimizer, and the credit method's per-step inputs
        ref_model = None
        if t.loss.kl_coef > 0:  # the policy RL starts from
            ref_model, _ = parts.load_model(start_from, on)
        loss = dataclasses.replace(
            t.loss,
            # an engine in another program samples with weights the trainer cannot see: recompute pi_old
            # so do rollouts sampled ahead: pi_old is the current policy, the behaviour enters the IS weight
            recompute_old_logp=t.loss.recompute_old_logp or cfg.policy.backend != "hf" or t.off_policy_steps > 0,
            norm_const=t.loss.norm_const or float(cfg.policy.sampling.max_tokens * parts.turn_limit(cfg.env)[0]),
        )
        optim = dataclasses.replace(t.optim, total_steps=t.optim.total_steps or t.steps)
        trainer = PolicyTrainer(
            model,
            loss,
            optim,
            micro_batch_size=t.micro_batch_size,
            mini_batches=t.mini_batches,
            ref_model=ref_model,
            compute=on,
            strategy=strategy,
        )
        # RL's tasks follow the warm-up's demonstrations (seeds train_seed_start .. + sft.episodes - 1):
        # RL on the questions the warm-up saw answered would reward recalling them, not the skill
        first_tasks = cfg.env.train_seed_start + (cfg.sft.episodes if cfg.sft.enabled or cfg.sft.init else 0)
        credit = CreditAssigner.build(
            cfg.credit.method,
            cfg.credit.params,
            model=rollout_model,
            tokenizer=tokenizer,
            make_env=make_env,
            seed=cfg.seed,
            # SPA's offline estimator: warm-up explorations of the starting policy on training tasks
            explore=lambda n: rollouts.run_sync(list(range(first_tasks, first_tasks + n))),
        )

        # 6. loop: collect -> credit -> update -> sync, checkpointed; resumes from out_dir/checkpoints
        run_parts = RunParts(
            rollouts,
            trainer,
            engine,
            credit,
            pad_id=tokenizer.pad_token_id or 0,
            eval_rollouts=held_out,
            curve_rollouts=curve,
            train_seed_start=first_tasks,
            test_seed_start=cfg.env.test_seed_start,
            progress=progress,
            dist=dist,
        )
        found = checkpoint.latest(out / "checkpoints") if cfg.resume else None
        if found is not None:
            report(f"resuming from {found}")
        summary = train(
            run_parts,
            t,
            out,
            resume=cfg.resume is not None,
            on_step=on_step,
            log=metrics_log(cfg, out) if dist.main else None,
        )
    finally:
        for manager in managers:
            manager.close()
        asyncio.run(policy.close())
        if engine is not policy:
            asyncio.run(engine.close())
    if not dist.main:
        return summary  # rank 0 writes the outputs

    # the export below loads the weights afresh: the run's own copies (and everything that holds them)
    # go first, or both sit in memory at once, the main job's peak (docs/math_env.md)
    del run_parts, trainer, credit, held_out, curve, seeding, strategy
    rollouts = None  # type: ignore[assignment]  # a closure cell (the credit's `explore`): emptied, not deleted
    del model, rollout_model, ref_model, policy, engine, manager  # `manager`: the loop variable above
    managers.clear()
    parts.release_memory()
    if cfg.final_model and summary["steps"] == t.steps:  # the run is complete: its last checkpoint
        from rlgym_llm.recipes.export import export

        summary["final_model"] = str(export(out, out / "final_model"))
    records = summary.pop("records")
    title = f"{cfg.env.id} · {cfg.credit.method} · {cfg.policy.model} model · {t.group_size} samples/task"
    before = (summary["before"] or {}).get("success")
    after = (summary["after"] or {}).get("success")
    warmed_up = cfg.sft.enabled or cfg.sft.init is not None
    plot = learning_curve(records, out / "curve.png", title, before, after, after_sft=warmed_up) if records else None
    summary.update(sft=sft_info, total_wall_s=time.perf_counter() - start, out_dir=str(out))
    import resource  # Unix only, like the sandboxes

    # wall time depends on what else runs; CPU time does not. Children that have ended count too
    # (the sampling process of trainer.off_policy_threads, local sandboxes)
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    summary["cpu_s"] = sum(u.ru_utime + u.ru_stime for u in usage)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    summary["curve"] = str(plot) if plot else None
    return summary


def node_server(
    cfg: TrainConfig, dist: Any, model: Any, tokenizer: Any, start_from: Path, lora_rank: int | None, on: Any
) -> Any:
    """One vLLM server per machine for a data-parallel run: local rank 0 starts it (on
    `policy.server_gpus` on a GPU machine) and syncs it; the machine's other ranks are its clients."""
    from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy
    from rlgym_llm.train.distributed import NodeServer

    owner = None
    if dist.local_rank == 0:
        owner = parts.build_trainable_policy(cfg.policy, model, tokenizer, start_from, lora_rank, on=on)

    def client(url: str, name: str, max_context: int | None) -> OpenAICompatiblePolicy:
        return OpenAICompatiblePolicy(url, model=name, max_context=max_context)

    return NodeServer(dist, owner, client)


def warm_up_info(out: Path, info: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the run's warm-up did: `info` when it ran now (kept beside its weights, in
    `out/sft_model/warm_up.json`), else what a resumed run's warm-up did when the run started."""
    saved = out / "sft_model" / "warm_up.json"
    if info is not None:
        saved.write_text(json.dumps(info, indent=1))
        return info
    return json.loads(saved.read_text()) if saved.exists() else None


def warm_start(cfg: TrainConfig, out: Path, model_dir: Path) -> Path:
    """The folder of the weights RL starts from: `sft.init` when it holds a model (the warm-up
    then loads it), else the warm-up's `out/sft_model`; the model's own folder without a warm-up."""
    if not (cfg.sft.enabled or cfg.sft.init):
        return model_dir
    if cfg.sft.init and (Path(cfg.sft.init) / "config.json").exists():
        return Path(cfg.sft.init)
    return out / "sft_model"


def metrics_log(cfg: TrainConfig, out: Path) -> Any:
    """`metrics.jsonl`, with TensorBoard and W&B as `cfg.log` says (W&B gets the whole config)."""
    import yaml

    from rlgym_llm.train.metrics import MetricsLog

    wandb = None
    if cfg.log.wandb:
        config = yaml.safe_load(parts.config_yaml(cfg))
        wandb = {"project": cfg.log.wandb_project, "name": cfg.log.wandb_name, "config": config}
    return MetricsLog(out, tensorboard=cfg.log.tensorboard, wandb=wandb)
