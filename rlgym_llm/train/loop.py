"""The RL training loop, one step at a time: collect -> assign credit -> update -> sync.

    run = RunParts(rollouts, trainer, policy, CreditAssigner("turn_grpo", {}), pad_id, eval_rollouts=held_out)
    summary = train(run, TrainerConfig(steps=20, tasks_per_step=8), out_dir)

Each step rolls out `tasks_per_step` tasks `group_size` times (the manager's config; every sample of
a task resets with the task's seed, so a group starts identically), computes per-turn advantages with
the configured credit method, broadcasts them to the completion tokens, applies one clipped
policy-gradient update, and pushes the new weights to the engine that samples. Failed trajectories
(infrastructure errors recorded by the manager) get no advantage, stay out of the loss and are counted;
when more than `trainer.max_failed_share` of a batch fails, the run stops with the first error.
Trajectories whose grade the env voided (it caught forgery: `Trajectory.voided`) are no failures: they
keep the reward the env paid (0), stay in the loss, and are counted (`voided`).

Everything that draws randomness is keyed by the step (task seeds) or checkpointed (sampling-seed
counter, optimizer, RNGs), so a run killed and resumed from its last checkpoint continues exactly
as the uninterrupted run would.

With several processes (`run.dist`, `trainer.nproc`) every rank runs this loop: it rolls out its
share of the step's tasks (`collect.Sharded`), rank 0 assigns credit on the whole batch and sends
it to the others, each rank trains on its own trajectories (the gradients averaged by the trainer's
strategy: DDP or FSDP), and rank 0 alone evaluates and logs while the others wait at the next
step's gather; every rank takes part in a checkpoint (FSDP writes each rank's shards).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.memory import trim_heap
from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit import CreditResult
from rlgym_llm.credit.trajectories import group_key
from rlgym_llm.rollout.errors import check_failures
from rlgym_llm.rollout.manager import RolloutManager, task_key
from rlgym_llm.rollout.policy import EpisodeSeededPolicy, SeededPolicy, TrainablePolicy
from rlgym_llm.rollout.progress import ProgressReporter
from rlgym_llm.train import checkpoint
from rlgym_llm.train.collect import RANK_KEY, VERSION_KEY, Ahead, Sharded, Synchronous, run_shown
from rlgym_llm.train.config import TrainerConfig
from rlgym_llm.train.credit_inputs import CreditAssigner
from rlgym_llm.train.distributed import Distributed
from rlgym_llm.train.interrupt import Interrupts, Mark
from rlgym_llm.train.metrics import MetricsLog
from rlgym_llm.train.trainer import PolicyTrainer, TrainBatch

logger = logging.getLogger(__name__)


@dataclass
class RunParts:
    """The objects the loop drives, built by a recipe (`rlgym_llm.recipes.train`).

    Args:
        rollouts: the training rollout manager (its config sets group size, turns, sampling); its
            policy should be a `SeededPolicy` over `policy` for exact resumes.
        trainer: applies the updates to the policy's model.
        policy: the engine the managers sample from; it gets the new weights after each update.
        credit: the credit method with its parameters and per-step inputs.
        pad_id: the tokenizer's padding id.
        eval_rollouts: samples held-out tasks (group size 1) for the before/after success (the `test`
            pool); its policy is re-seeded before each evaluation so both see the same sampling seeds.
        curve_rollouts: samples the held-out curve every `eval_every` steps (the `val` pool, so that the
            choices made by watching the curve never touch `test`); None: `eval_rollouts`.
        train_seed_start: step k trains on task seeds train_seed_start + k * tasks_per_step + i.
        test_seed_start: first seed of the held-out tasks of `evaluate`.
        progress: shows the RL steps, each step's rollouts and the held-out evaluations.
        dist: the data-parallel ranks (default: one process); `trainer` must have been built with it.
    """

    rollouts: RolloutManager
    trainer: PolicyTrainer
    policy: TrainablePolicy
    credit: CreditAssigner
    pad_id: int
    eval_rollouts: RolloutManager | None = None
    curve_rollouts: RolloutManager | None = None
    train_seed_start: int = 0
    test_seed_start: int = 1_000_000
    progress: ProgressReporter = field(default_factory=lambda: ProgressReporter(enabled=False))
    dist: Distributed = field(default_factory=Distributed)


def task_seeds(start: int, tasks_per_step: int, step: int) -> list[int]:
    """The task seeds of `step` (a pure function of the step: the data cursor is the step)."""
    first = start + step * tasks_per_step
    return list(range(first, first + tasks_per_step))


REFILL_OFFSET = 50_000_000
"""Refill draws take their tasks from seeds train_seed_start + REFILL_OFFSET upward, away from the
step's own tasks (train_seed_start + step * tasks_per_step) and from the held-out seeds."""


def refill_seeds(start: int, tasks_per_step: int, max_draws: int, step: int, draw: int, n: int) -> list[int]:
    """The task seeds of refill draw `draw` (1 .. max_draws - 1) of `step`: a pure function of (step,
    draw), so a resumed run draws the same tasks; `n` <= tasks_per_step of them."""
    first = start + REFILL_OFFSET + (step * max(max_draws - 1, 1) + draw - 1) * tasks_per_step
    return list(range(first, first + n))


def _kept_groups(trajectories: Sequence[Trajectory], keep: np.ndarray) -> int:
    """How many groups of one draw (group ids are per draw) have a kept trajectory."""
    return len({group_key(t) for t, k in zip(trajectories, keep) if k})


def evaluate(
    manager: RolloutManager,
    seeds: Sequence[int],
    max_failed_share: float = 1.0,
    progress: ProgressReporter | None = None,
) -> dict[str, Any]:
    """Mean success and reward of one sampled episode per held-out seed, with the distinct tasks
    (`tasks`: seeds that draw the same task count once) and `episodes` they are measured on (those
    that did not fail; `failed` counts the others), `voided`, the episodes whose grade the env voided,
    and `outcomes`: each distinct task's successes (1/0 per episode, in seed order), so that an
    interval can take the task as its unit (`benchmarks/learning/paired_report.py`).

    Raises:
        TooManyFailuresError: more than `max_failed_share` of the episodes failed.
    """
    if isinstance(manager.policy, SeededPolicy):
        manager.policy.calls = 0  # the same sampling seeds before and after training
    trajs = run_shown(manager, list(seeds), progress, "held-out eval")
    check_failures(trajs, max_failed_share, "held-out evaluation", "trainer.max_failed_share")
    ok = [t for t in trajs if not t.failed]
    outcomes: dict[str, list[int]] = {}
    for t in ok:
        outcomes.setdefault(task_key(t), []).append(int(t.reward > 0))
    return {
        "success": float(np.mean([t.reward > 0 for t in ok])) if ok else 0.0,
        "reward": float(np.mean([t.reward for t in ok])) if ok else 0.0,
        "failed": float(len(trajs) - len(ok)),
        "tasks": len({task_key(t) for t in ok}),
        "episodes": len(ok),
        "voided": sum(t.voided for t in trajs),
        "outcomes": outcomes,
    }


def episode_metrics(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """The step record's fields that describe a batch of episodes (`step_once`: its first draw).

    `reward`, `success` and `turns` are means over the episodes that did not fail; `voided` counts the
    episodes whose grade the env voided because it caught forgery (failed or not): they are no failures,
    keep the reward the env paid and stay in the loss, so this count is what makes them visible.
    """
    ok = [t for t in trajectories if not t.failed]
    return {
        "reward": float(np.mean([t.reward for t in ok])) if ok else 0.0,
        "success": float(np.mean([t.reward > 0 for t in ok])) if ok else 0.0,
        "turns": float(np.mean([len(t.turns) for t in ok])) if ok else 0.0,
        # episodes that ended because their context was full; those with no turn had no room to act at all
        "context_full": sum(t.metadata.get("truncated_by") == "context" for t in ok),
        "prompt_fills_context": sum(t.metadata.get("truncated_by") == "context" and not t.turns for t in ok),
        "trajectories": len(trajectories),
        "voided": sum(t.voided for t in trajectories),
    }


Source = Synchronous | Ahead | Sharded


def step_once(
    run: RunParts,
    cfg: TrainerConfig,
    step: int,
    source: Source | None = None,
    on_update: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """One training step; returns its metrics record.

    With `filter_zero_variance`, groups whose advantages are all 0 are dropped, and while fewer than
    `tasks_per_step` groups are kept, up to `max_draws - 1` more draws of the missing number of tasks
    refill the batch (DAPO's dynamic sampling). The success, reward and credit statistics of the
    record describe the first draw (an unbiased sample of the policy's tasks); `draws` and
    `refill_groups` count the refill.

    Args:
        source: where the rollouts come from (default `Synchronous`: sampled now, then the update,
            then the weight sync); an `Ahead` samples the next steps' rollouts during the update;
            with several processes a `Sharded` one gives every rank the whole draw.
        on_update: called when the update starts, after which the step is no longer undone by
            stopping (`train` holds Ctrl-C from there: `interrupt.Interrupts.hold`).
    """
    source = source or (Sharded(Synchronous(run), run.dist) if run.dist.enabled else Synchronous(run))
    # 1. collect: G samples per task, identical seeds within a group
    first, waited = source.first(step, task_seeds(run.train_seed_start, cfg.tasks_per_step, step))
    trajs = first.trajectories
    check_failures(trajs, cfg.max_failed_share, f"RL step {step + 1}", "trainer.max_failed_share")
    tokens, failures = first.tokens, first.failures
    t1 = time.perf_counter()

    # 2. assign credit: per-step inputs (IGPO, SPA), per-turn advantages, broadcast to completion tokens
    credit = _credit(run, trajs)
    usable = np.array([not t.failed and len(t.turns) > 0 for t in trajs], dtype=bool)
    chosen, token_adv, keep = _select(trajs, credit, cfg.filter_zero_variance)
    # 2b. dynamic sampling: refill the dropped groups with new tasks, within the draw budget
    kept = _kept_groups(trajs, keep)
    draws, refill_groups, drawn, t_refill = 1, 0, len(trajs), 0.0
    while cfg.filter_zero_variance and kept < cfg.tasks_per_step and draws < cfg.max_draws:
        missing = cfg.tasks_per_step - kept
        refill = source.refill(
            step, refill_seeds(run.train_seed_start, cfg.tasks_per_step, cfg.max_draws, step, draws, missing)
        )
        extra = refill.trajectories
        tokens += refill.tokens
        failures.update(refill.failures)
        t_refill += refill.wall_s
        draws += 1
        drawn += len(extra)
        more, more_adv, more_keep = _select(extra, _credit(run, extra), True)
        new = _kept_groups(extra, more_keep)
        refill_groups += new
        kept += new
        chosen += more
        token_adv += more_adv
    t2 = time.perf_counter()

    # 3. update: one optimizer step over the kept trajectories (micro-batched); with `Ahead`, the
    # next steps' rollouts start first, from a snapshot of the weights before this update
    if on_update is not None:
        on_update()
    source.before_update(step)
    t_ahead = time.perf_counter() - t2
    t2, c2 = t2 + t_ahead, time.process_time()
    update: dict[str, float] = {}
    if chosen:  # every rank knows the whole batch: all update, or none
        # each rank trains on the trajectories it sampled; the loss is normalised over all of them
        mine = [(t, a) for t, a in zip(chosen, token_adv) if t.metadata.get(RANK_KEY, 0) == run.dist.rank]
        batch = TrainBatch.from_trajectories([t for t, _ in mine], [a for _, a in mine], run.pad_id) if mine else None
        # the KV kept for episodes' next turns (TransformersPolicy), left by episodes that ended. Not
        # while sampling ahead: those episodes are still running, and a next turn without its kept KV
        # prefills afresh, equal only to rounding, at a moment that depends on thread timing
        release = None if cfg.off_policy_steps else getattr(run.policy, "release_cache", None)
        if release is not None:
            release()
        on_cpu = run.trainer.compute.device.type == "cpu"
        if on_cpu:  # the rollouts' KV caches, freed: out of the resident set before the activations come
            trim_heap()
        update = run.trainer.update(batch)
        if on_cpu:  # and the update's activations before the next rollouts (core/memory.py)
            trim_heap()
    t3, c3 = time.perf_counter(), time.process_time()

    # 4. sync: the engine samples the next batch from the new weights (with `Ahead`: the next snapshot)
    source.after_update(bool(chosen))
    t4 = time.perf_counter()

    lags = [step - t.metadata.get(VERSION_KEY, step) for t in chosen] or [step - first.version]
    s = credit.stats
    record: dict[str, Any] = {
        "step": step + 1,
        **episode_metrics(trajs),
        "failed": s.n_failed,
        "trained_on": len(chosen),
        # dynamic sampling: rollout draws this step (1: no refill), groups the refills added, all episodes
        "draws": draws,
        "refill_groups": refill_groups,
        "trajectories_drawn": drawn,
        "zero_variance_share": s.n_zero_variance_groups / max(s.n_groups, 1),
        "zero_advantage_share": s.n_zero_advantage_groups / max(s.n_groups, 1),
        # 1.0 on every step: the method gave exactly GRPO's advantages (the learning report checks it)
        "grpo_equal_share": s.n_grpo_equal_groups / max(s.n_groups, 1),
        "adv_std": s.adv_std,
        "kl": update.get("kl", 0.0),
        "approx_kl": update.get("approx_kl", 0.0),
        "entropy": update.get("entropy", 0.0),
        "clip_frac": update.get("clip_frac", 0.0),
        "loss": update.get("loss", 0.0),
        "grad_norm": update.get("grad_norm", 0.0),
        "lr": update.get("lr", 0.0),
        "skipped_update": not chosen,
        "skip_reason": _skip_reason(usable, credit.keep) if not chosen else None,
        # off-policy lag of the trained trajectories: loop steps between the weights that sampled
        # them and the weights this update starts from (0 when synchronous; <= trainer.off_policy_steps)
        "staleness": float(np.mean(lags)),
        "staleness_max": int(max(lags)),
        # mean truncated importance weight min(pi_old / pi_behaviour, is_cap) (1.0 without recompute_old_logp)
        "is_weight": update.get("is_weight", 1.0),
        "rollout_tokens_per_s": tokens / max(first.wall_s + t_refill, 1e-9),
        "update_tokens_per_s": update.get("tokens", 0.0) / max(t3 - t2, 1e-9),
        "time_rollout_s": first.wall_s + t_refill,
        # how long the step waited for its first draw: time_rollout_s when synchronous, less when sampled ahead
        "time_rollout_wait_s": waited,
        "time_credit_s": t2 - t1 - t_refill - t_ahead,
        "time_update_s": t3 - t2,
        # handing the weights to the engine: the sync after the update, or the snapshot before it
        "time_sync_s": t4 - t3 + t_ahead,
        # CPU seconds of this process: unlike wall time, they do not grow when other programs compete
        # (sampled ahead, the rollout's span also holds the concurrent update's)
        "cpu_rollout_s": first.cpu_s,
        "cpu_update_s": c3 - c2,
    }
    for kind, count in failures.items():
        record[f"failures/{kind.value}"] = count
    return record


def _credit(run: RunParts, trajectories: Sequence[Trajectory]) -> CreditResult:
    """The credit of a whole draw: computed by rank 0 (the credit method's state lives there, as in
    one process) and sent to the other ranks."""
    if not run.dist.enabled:
        return run.credit(trajectories)
    return run.dist.broadcast(run.credit(trajectories) if run.dist.main else None)


def _step_status(r: dict[str, Any]) -> str:
    held_out = f" held-out {r['eval_success']:.2f}" if "eval_success" in r else ""
    voided = f" voided {r['voided']}" if r.get("voided") else ""  # the env caught forgery
    return (
        f"success {r['success']:.2f} reward {r['reward']:.2f}{held_out}{voided} zero-var {r['zero_variance_share']:.2f}"
        f" | rollout {r['time_rollout_s']:.0f}s update {r['time_update_s']:.0f}s"
    )


def _select(
    trajectories: Sequence[Trajectory], credit: CreditResult, filter_zero: bool
) -> tuple[list[Trajectory], list[np.ndarray], np.ndarray]:
    """The trajectories that enter the loss, their token advantages, and the keep mask: usable ones
    (not failed, at least one turn), and with `filter_zero` only groups with a nonzero advantage."""
    usable = np.array([not t.failed and len(t.turns) > 0 for t in trajectories], dtype=bool)
    keep = credit.keep & usable if filter_zero else usable
    chosen = [t for t, k in zip(trajectories, keep) if k]
    token_adv = [a for a, k in zip(credit.token_advantages(trajectories), keep) if k]
    return chosen, token_adv, keep


def _skip_reason(usable: np.ndarray, keep: np.ndarray) -> str:
    """Why a step left every trajectory out of the loss."""
    if not usable.any():
        return "every episode failed or had no turn"
    if not (keep & usable).any():
        return "every group tied (equal rewards: no advantage)"
    return "nothing to train on"


def updates_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How many steps updated the weights, how many skipped their update, and why."""
    reasons: dict[str, int] = {}
    for r in records:
        if r.get("skipped_update"):
            reason = r.get("skip_reason") or "nothing to train on"
            reasons[reason] = reasons.get(reason, 0) + 1
    skipped = sum(reasons.values())
    return {"done": len(records) - skipped, "skipped": skipped, "skip_reasons": reasons}


def train(
    run: RunParts,
    cfg: TrainerConfig,
    out_dir: str | Path,
    resume: bool = True,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    stop_after: int | None = None,
    log: MetricsLog | None = None,
) -> dict[str, Any]:
    """Run the loop to `cfg.steps`, resuming from the newest checkpoint in `out_dir/checkpoints`.

    Args:
        run: the objects to drive.
        cfg: the loop settings (steps, tasks per step, evaluation and checkpoint cadence).
        out_dir: metrics.jsonl and checkpoints/ go here.
        resume: continue from the newest checkpoint when there is one.
        on_step: called with each step's metrics record (e.g. a progress bar).
        stop_after: end after this many steps of this call (tests of interrupted runs).
        log: where the step records go (default: `metrics.jsonl` in `out_dir`, and TensorBoard when installed).

    Ctrl-C (SIGINT, in the main thread) stops the run: in one synchronous process (no
    `off_policy_steps`, no other ranks) the state it stopped in is checkpointed first, the start of
    the step it interrupted (or, during an update, which finishes first, its end), so a resume
    continues exactly; the `KeyboardInterrupt` then propagates (`rlgym_llm.train.interrupt`).

    Returns:
        A summary of the whole run, the steps before a resume included: steps, held-out success
        before (measured when the run started) and after, updates done and skipped (with why),
        first/last training success, the step it resumed from (`resumed_from`, None), wall time.
    """
    out = Path(out_dir)
    ckpt_dir = out / "checkpoints"
    main, dist = run.dist.main, run.dist
    logged: MetricsLog | None = (log or MetricsLog(out)) if main else None  # rank 0 writes the records
    model, trainer = run.trainer.model, run.trainer
    seeded = run.rollouts.policy if isinstance(run.rollouts.policy, SeededPolicy) else None
    seeding = "episode" if isinstance(run.rollouts.policy, EpisodeSeededPolicy) else "calls"
    state: dict[str, Any] = {"step": 0, "before": None}
    last_outcomes: dict[str, list[int]] | None = None  # the per-task outcomes of this call's latest curve point
    # every rank loads the checkpoint rank 0 found (the run folder is on storage they share)
    found = dist.broadcast(checkpoint.latest(ckpt_dir) if resume and main else None)
    resumed_from = None
    if found is not None:
        state = checkpoint.load(found, model, trainer.optimizer, trainer.scheduler, trainer.strategy)
        saved_seeding = state.get("sampling_seeds", "calls")
        if saved_seeding != seeding:
            raise ConfigError(
                [
                    f"{found} was sampled with trainer.sampling_seeds={saved_seeding}; resume it with "
                    f"trainer.sampling_seeds={saved_seeding} (auto means episode with several processes or a server backend)"
                ]
            )
        trainer.step = state["step"]
        if seeded is not None:
            seeded.calls = state["sampling_calls"]
        run.credit.load_state_dict(state.get("torch_extra", {}).get("credit", {}))
        run.policy.sync_weights(trainer.weights())
        if logged is not None:
            logged.truncate(state["step"])
        logger.info("resumed from %s (step %d)", found, state["step"])
        resumed_from = state["step"]
    elif logged is not None:
        logged.truncate(0)
    test_seeds = list(range(run.test_seed_start, run.test_seed_start + cfg.eval_tasks))
    evaluating = main and run.eval_rollouts is not None and cfg.eval_tasks > 0
    curve = run.curve_rollouts or run.eval_rollouts
    done = state["step"]

    def save(step: int, ahead: dict[int, Any] | None = None) -> Path:
        return checkpoint.save(
            ckpt_dir,
            step,
            model,
            trainer.optimizer,
            trainer.scheduler,
            extra={
                "before": state["before"],
                "sampling_calls": seeded.calls if seeded else 0,
                "sampling_seeds": seeding,
                "nproc": dist.world,
            },
            keep=cfg.keep_checkpoints,
            torch_extra={"credit": run.credit.state_dict(), **({"ahead": ahead} if ahead else {})},
            strategy=trainer.strategy,
        )

    # Ctrl-C: the state to checkpoint (`mark`), and a finished step's record not yet written
    stop, mark, unsaved = Interrupts(), None, None
    saving = main and not dist.enabled and not cfg.off_policy_steps  # one synchronous process
    try:
        with stop:
            if state["before"] is None and evaluating and run.eval_rollouts is not None:
                state["before"] = evaluate(run.eval_rollouts, test_seeds, cfg.max_failed_share, run.progress)
            start_wall = time.perf_counter()
            source: Source = Synchronous(run)
            if cfg.off_policy_steps:
                seeds_of = functools.partial(task_seeds, run.train_seed_start, cfg.tasks_per_step)
                source = Ahead(run, cfg.off_policy_steps, cfg.steps, seeds_of)
            elif dist.enabled:
                source = Sharded(Synchronous(run), dist)
            source.restore(state.get("torch_extra", {}).get("ahead", {}))
            with source, run.progress.phase("RL steps", cfg.steps) as steps_phase:
                steps_phase.done = done  # a resumed run starts at its checkpoint's step
                mark = Mark.take(done, seeded, run.credit) if saving else None
                for done_here, step in enumerate(range(state["step"], cfg.steps), start=1):
                    record = step_once(run, cfg, step, source, on_update=stop.hold)  # holds Ctrl-C from the update
                    done = step + 1
                    mark, unsaved = (Mark.take(done, seeded, run.credit) if saving else None), record
                    stop.release()
                    if cfg.eval_every and evaluating and curve is not None and done % cfg.eval_every == 0:
                        held_out = evaluate(curve, test_seeds, cfg.max_failed_share, run.progress)
                        # the step record keeps the curve's numbers; per-task outcomes only in summary.json
                        last_outcomes = held_out.pop("outcomes")
                        record.update({f"eval_{k}": v for k, v in held_out.items()})
                    stop.hold()  # a record and a checkpoint are written whole
                    if logged is not None:
                        logged.write(record)
                        steps_phase.advance(status=_step_status(record))
                        if on_step is not None:
                            on_step(record)
                    unsaved = None
                    if (cfg.save_every and done % cfg.save_every == 0) or done == cfg.steps:
                        # the batches sampled ahead are saved with it (their sampling seeds are spent): a
                        # resumed run trains on them as the uninterrupted run does
                        save(done, source.settle())
                    mark = Mark.take(done, seeded, run.credit) if saving else None  # where the next step starts
                    stop.release()
                    if stop_after is not None and done_here >= stop_after:
                        break
    except KeyboardInterrupt:
        if mark is not None and not stop.forced:
            if unsaved is not None and logged is not None:
                logged.write(unsaved)  # its step is done; only its held-out measure was cut short
            mark.restore(seeded, run.credit)
            saved = checkpoint.latest(ckpt_dir)
            if saved is None or saved.name != f"step_{mark.step:06d}":
                saved = save(mark.step)
            logger.info("interrupted: the state after %d steps is in %s", mark.step, saved)
        raise
    if logged is None:  # the other ranks: rank 0 holds the records and the evaluations
        return {"steps": done, "before": None, "after": None, "records": [], "rank": dist.rank}
    logged.close()
    records = logged.read()
    finished = done >= cfg.steps
    after = None
    if finished and evaluating and run.eval_rollouts is not None:
        last = records[-1] if records else {}
        # the last step's periodic evaluation is the same measurement (same seeds, same weights, same pool)
        if "eval_success" in last and last["step"] == cfg.steps and curve is run.eval_rollouts:
            keys = ("success", "reward", "failed", "tasks", "episodes", "voided")
            after = {k: last[f"eval_{k}"] for k in keys if f"eval_{k}" in last}
            if last_outcomes is not None:  # measured in this call (a resumed run's last record has none)
                after["outcomes"] = last_outcomes
        else:
            after = evaluate(run.eval_rollouts, test_seeds, cfg.max_failed_share, run.progress)
    return {
        "steps": len(records),
        "before": state["before"],
        "after": after,
        "updates": updates_summary(records),
        # training episodes whose prompt alone filled policy.max_context (the policy never acted), of all
        "prompt_fills_context": {
            "episodes": sum(r.get("prompt_fills_context", 0) for r in records),
            "of": sum(r["trajectories"] for r in records),
        },
        "train_success_first": records[0]["success"] if records else None,
        "train_success_last": float(np.mean([r["success"] for r in records[-3:]])) if records else None,
        "resumed_from": resumed_from,
        "wall_s": time.perf_counter() - start_wall,
        "records": records,
    }
