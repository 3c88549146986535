"""Evaluate a policy on an env's held-out tasks: n sampled episodes per task, then statistics.

    result = evaluate("rlgym/Math-v0", agent, policy, seeds=range(1_000_000, 1_000_032), samples=8)
    print(result.success, result.pass_at_k)       # mean success with its CI; {1: ..., 2: ..., 8: ...}

Episodes run through the `RolloutManager` (concurrent, sandboxed where the env runs code, every
failure classified and recorded). A failed episode is data, not a crash: it scores 0 (the reward of
an episode that never finished) and is counted per failure class, so a flaky engine shows up in the
report instead of silently shrinking the sample.

The score matrix is `(samples, tasks)`: sample i of every task is one "run" in the sense of Agarwal
et al. 2021, and the stratified bootstrap resamples samples within each task.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from rlgym_llm.core.types import Trajectory
from rlgym_llm.eval import metrics
from rlgym_llm.eval.metrics import Interval
from rlgym_llm.rollout.errors import check_failures
from rlgym_llm.rollout.manager import Agent, RolloutConfig, RolloutManager, TaskRef
from rlgym_llm.rollout.policy import EpisodePolicy, Policy
from rlgym_llm.rollout.store import TrajectoryWriter

DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class TaskResult:
    """One task's n episodes.

    Args:
        seed: the reset seed that selects the task.
        task_id: the env's id for it.
        rewards: each sample's final reward (0.0 for a failed episode).
        successes: each sample's success (reward >= the threshold, and not failed).
        failures: `kind: error_type` of each failed sample (empty if none failed).
        turns: assistant turns per sample.
    """

    seed: int
    task_id: str
    rewards: list[float]
    successes: list[bool]
    failures: list[str] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.successes))

    def pass_at_k(self, k: int) -> float:
        return float(metrics.pass_at_k(len(self.successes), int(sum(self.successes)), k))


@dataclass
class EvalResult:
    """Everything `rlgym eval` reports (JSON-serialisable through `to_dict`).

    Args:
        env_id: the env evaluated.
        policy: a label for the policy (model name or path).
        samples: n, episodes per task.
        tasks: per-task results, in seed order.
        success: mean success over all episodes, with a stratified-bootstrap CI.
        reward_mean: mean final reward, with CI.
        reward_iqm: interquartile mean of final rewards, with CI.
        success_iqm: IQM of per-sample success (rliable's aggregate on the 0/1 matrix), with CI.
        pass_at_k: unbiased pass@k averaged over tasks, for each k <= n.
        failures: failed episodes per failure kind (policy / env / sandbox / engine).
        truncations: episodes cut off by the rollout's limits (`context`, `max_turns`), not by the env.
        stats: rollout throughput (episodes, turns, tokens/s, wall time).
        config: the settings that produced the result (for the report and reruns).
    """

    env_id: str
    policy: str
    samples: int
    tasks: list[TaskResult]
    success: Interval
    reward_mean: Interval
    reward_iqm: Interval
    success_iqm: Interval
    pass_at_k: dict[int, float]
    failures: dict[str, int]
    truncations: dict[str, int] = field(default_factory=dict)
    stats: dict[str, float] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def episodes(self) -> int:
        return self.samples * len(self.tasks)

    @property
    def failed_episodes(self) -> int:
        return sum(len(t.failures) for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "policy": self.policy,
            "samples_per_task": self.samples,
            "num_tasks": len(self.tasks),
            "episodes": self.episodes,
            "failed_episodes": self.failed_episodes,
            "success": self.success.to_dict(),
            "reward_mean": self.reward_mean.to_dict(),
            "reward_iqm": self.reward_iqm.to_dict(),
            "success_iqm": self.success_iqm.to_dict(),
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "failures": dict(self.failures),
            "truncations": dict(self.truncations),
            "stats": dict(self.stats),
            "config": dict(self.config),
            "tasks": [
                {
                    **asdict(t),
                    "success_rate": t.success_rate,
                    "pass_at_k": {str(k): t.pass_at_k(k) for k in self.pass_at_k},
                }
                for t in self.tasks
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EvalResult:
        """Read back `to_dict()` (e.g. an `eval.json`), to re-plot or compare saved evaluations."""
        fields = ("seed", "task_id", "rewards", "successes", "failures", "turns")
        return cls(
            env_id=d["env_id"],
            policy=d["policy"],
            samples=int(d["samples_per_task"]),
            tasks=[TaskResult(**{k: t[k] for k in fields}) for t in d["tasks"]],
            success=Interval(**d["success"]),
            reward_mean=Interval(**d["reward_mean"]),
            reward_iqm=Interval(**d["reward_iqm"]),
            success_iqm=Interval(**d["success_iqm"]),
            pass_at_k={int(k): float(v) for k, v in d["pass_at_k"].items()},
            failures=dict(d["failures"]),
            truncations=dict(d.get("truncations", {})),
            stats=dict(d.get("stats", {})),
            config=dict(d.get("config", {})),
        )

    def summary(self) -> str:
        """A few lines for the terminal."""
        ks = ", ".join(f"pass@{k} {v:.3f}" for k, v in self.pass_at_k.items())
        pct = round(100 * self.success.confidence)
        lines = [
            f"{self.env_id} | {self.policy} | {len(self.tasks)} tasks x {self.samples} samples = {self.episodes} episodes",
            f"success      {self.success}  ({pct}% CI, stratified bootstrap)",
            f"reward mean  {self.reward_mean}",
            f"reward IQM   {self.reward_iqm}",
            ks,
        ]
        if any(self.truncations.values()):
            cut = ", ".join(f"{k} {v}" for k, v in sorted(self.truncations.items()))
            lines.append(f"episodes cut off by the rollout's limits: {cut}")
        if self.failed_episodes:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()) if v)
            lines.append(f"failed episodes: {self.failed_episodes} ({kinds}); scored 0")
        return "\n".join(lines)


def summarize(
    trajectories: Sequence[Trajectory],
    samples: int,
    *,
    env_id: str = "",
    policy: str = "",
    ks: Iterable[int] = DEFAULT_KS,
    success_threshold: float = 1.0,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> EvalResult:
    """Turn the trajectories of an evaluation (task-major, `samples` per task) into an `EvalResult`.

    Args:
        trajectories: `len(tasks) * samples` trajectories, grouped by task as `RolloutManager.run`
            returns them.
        samples: n, trajectories per task.
        ks: the k of pass@k; those above n are skipped.
        success_threshold: an episode succeeds when its final reward is at least this.
        reps, confidence, seed: of the bootstrap confidence intervals.
    """
    if samples < 1 or not trajectories or len(trajectories) % samples:
        raise ValueError(f"need a non-empty multiple of samples={samples} trajectories, got {len(trajectories)}")
    tasks = []
    for start in range(0, len(trajectories), samples):
        group = trajectories[start : start + samples]
        rewards = [0.0 if t.failed else _finite(t.reward) for t in group]
        tasks.append(
            TaskResult(
                seed=int(group[0].seed or 0),
                task_id=next((t.task_id for t in group if t.task_id), ""),
                rewards=rewards,
                successes=[not t.failed and r >= success_threshold for t, r in zip(group, rewards)],
                failures=[f"{t.failures[0].kind.value}: {t.failures[0].error_type}" for t in group if t.failed],
                turns=[len(t.turns) for t in group],
            )
        )
    reward = np.array([t.rewards for t in tasks], dtype=np.float64).T  # (samples, tasks)
    success = np.array([t.successes for t in tasks], dtype=np.float64).T  # (samples, tasks)
    n = np.full(len(tasks), samples)
    c = success.sum(axis=0).astype(int)
    boot: dict[str, Any] = {"reps": reps, "confidence": confidence, "seed": seed}
    failures = Counter(f.kind.value for t in trajectories if t.failed for f in t.failures[:1])
    return EvalResult(
        env_id=env_id or trajectories[0].env_id,
        policy=policy,
        samples=samples,
        tasks=tasks,
        success=metrics.interval_estimate(success, metrics.mean, **boot),
        reward_mean=metrics.interval_estimate(reward, metrics.mean, **boot),
        reward_iqm=metrics.interval_estimate(reward, metrics.iqm, **boot),
        success_iqm=metrics.interval_estimate(success, metrics.iqm, **boot),
        pass_at_k=metrics.pass_at_k_curve(n, c, sorted(set(ks))),
        failures={k: failures.get(k, 0) for k in ("policy", "env", "sandbox", "engine")},
        truncations=dict(
            Counter(str(t.metadata["truncated_by"]) for t in trajectories if t.metadata.get("truncated_by"))
        ),
        config={"success_threshold": success_threshold, "bootstrap": boot},
    )


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def evaluate(*args: Any, **kwargs: Any) -> EvalResult:
    """`aevaluate` from synchronous code (runs its own event loop)."""
    return asyncio.run(aevaluate(*args, **kwargs))


async def aevaluate(
    env: str | Callable[[], Any],
    agent: Agent,
    policy: Policy | EpisodePolicy,
    *,
    seeds: Iterable[int],
    samples: int,
    rollout: RolloutConfig | None = None,
    env_kwargs: dict[str, Any] | None = None,
    env_id: str | None = None,
    policy_name: str = "",
    ks: Iterable[int] = DEFAULT_KS,
    success_threshold: float = 1.0,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
    writer: TrajectoryWriter | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
    max_failed_share: float = 1.0,
) -> EvalResult:
    """Roll out `samples` episodes of each task and summarize them (see `summarize`).

    Args:
        env: a registered env id or a zero-argument env factory.
        agent: renders and parses (e.g. `rlgym_agents.tool_calling.ToolCallingAgent`).
        policy: generates (an `EpisodePolicy`, e.g. episode-keyed sampling seeds, is started per episode).
        seeds: the held-out tasks, as reset seeds (disjoint from the training seeds).
        samples: n, episodes per task; they differ only by the policy's sampling.
        rollout: limits and sampling; its `group_size` is replaced by `samples`.
        env_kwargs: constructor arguments of a registered env.
        env_id: the env's name in the result (default: `env` when it is an id).
        writer: optional JSONL sink for the trajectories.
        on_episode: optional callback per finished episode (a progress bar).
        max_failed_share: raise `TooManyFailuresError` (with the first error) when more than this
            share of the episodes failed, instead of reporting them.
    """
    base = rollout or RolloutConfig()
    config = RolloutConfig(**{**base.__dict__, "group_size": samples})
    with RolloutManager(
        env, agent, policy, config, env_kwargs=env_kwargs, writer=writer, on_episode=on_episode
    ) as manager:
        if env_id:
            manager.env_id = env_id  # the trajectories record the env's id, not its factory's name
        trajectories = await manager.run([TaskRef(seed=int(s)) for s in seeds])
    check_failures(trajectories, max_failed_share, f"evaluation of {env_id or manager.env_id}", "max_failed_share")
    result = summarize(
        trajectories,
        samples,
        env_id=env_id or manager.env_id,
        policy=policy_name,
        ks=ks,
        success_threshold=success_threshold,
        reps=reps,
        confidence=confidence,
        seed=seed,
    )
    result.stats = manager.stats.to_dict()
    s = config.sampling
    result.config.update(
        {"temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens, "max_turns": config.max_turns}
    )
    return result
