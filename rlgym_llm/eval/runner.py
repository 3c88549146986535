"""Evaluate a policy on an env's held-out tasks: n sampled episodes per seed, then statistics per task.

    result = evaluate("rlgym/Math-v0", agent, policy, seeds=range(1_000_000, 1_000_032), samples=8)
    print(result.success, result.pass_at_k)       # mean success with its CI; {1: ..., 2: ..., 8: ...}
    print(result.num_tasks, result.episodes)      # distinct tasks (<= 32: seeds may draw the same one), 256

Episodes run through the `RolloutManager` (concurrent, sandboxed where the env runs code, every
failure classified and recorded). A failed episode is data, not a crash: it scores 0 (the reward of
an episode that never finished) and is counted per failure class, so a flaky engine shows up in the
report instead of silently shrinking the sample. An episode whose grade the env voided (it caught
forgery or tampering: `Trajectory.voided`) scores what the env paid (0) and is counted, with its reasons,
so that caught forgery is visible in every report.

The distinct task is the unit. Seeds are not tasks: two seeds may draw the same task (the same content,
`Task.content_key()`, which the rollout manager records hashed, and the same task id: `task_key`), and
their samples are pooled into one task, as pass@k pools n samples of one task. Every statistic first scores each distinct task (its
success rate, mean reward, pass@k) and then aggregates those scores; the confidence intervals resample
distinct tasks (`metrics.unit_interval_estimate`), so 64 episodes of 5 distinct tasks read as 5 units.
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
from rlgym_llm.rollout.manager import SPLIT_KEY, Agent, RolloutConfig, RolloutManager, TaskRef, task_key
from rlgym_llm.rollout.policy import EpisodePolicy, Policy
from rlgym_llm.rollout.store import TrajectoryWriter

DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64, 128)
FEW_TASKS = 10
"""Below this many distinct tasks, summaries warn that the intervals undercover."""


@dataclass(frozen=True)
class TaskResult:
    """One distinct task's episodes: the samples of every seed that drew it, pooled.

    Args:
        seed: the first reset seed that drew the task.
        task_id: the env's id for it.
        rewards: each sample's final reward (0.0 for a failed episode).
        successes: each sample's success (reward >= the threshold, and not failed).
        failures: `kind: error_type` of each failed sample (empty if none failed).
        turns: assistant turns per sample.
        seeds: every reset seed that drew the task, in order (the samples are theirs, seed by seed).
        voided: samples whose grade the env voided (it caught forgery; `Trajectory.voided`).
        key: what makes it one task (`rlgym_llm.rollout.manager.task_key`: `<content hash>/<task id>`,
            else `id:<task id>`, else `seed:<seed>`); empty in results saved before it was recorded.
    """

    seed: int
    task_id: str
    rewards: list[float]
    successes: list[bool]
    failures: list[str] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    key: str = ""
    voided: int = 0

    @property
    def success_rate(self) -> float:
        return float(np.mean(self.successes))

    def pass_at_k(self, k: int) -> float:
        return float(metrics.pass_at_k(len(self.successes), int(sum(self.successes)), k))


@dataclass
class EvalResult:
    """Everything `rlgym eval` reports (JSON-serialisable through `to_dict`).

    Every aggregate weighs each distinct task once and carries a percentile bootstrap CI that resamples
    distinct tasks (`metrics.unit_interval_estimate`).

    Args:
        env_id: the env evaluated.
        policy: a label for the policy (model name or path).
        samples: n, episodes per seed (a task drawn by several seeds has a multiple of n).
        tasks: one result per distinct task, in the order of the first seed that drew it.
        success: mean over distinct tasks of their success rate, with CI.
        reward_mean: mean over distinct tasks of their mean final reward, with CI.
        reward_iqm: interquartile mean of the distinct tasks' mean rewards, with CI.
        success_iqm: IQM of the distinct tasks' success rates, with CI.
        pass_at_k: unbiased pass@k averaged over distinct tasks, for each k <= the fewest samples of one.
        failures: failed episodes per failure kind (policy / env / sandbox / engine).
        truncations: episodes cut off by the rollout's limits (`context`, `max_turns`), not by the env.
        stats: rollout throughput (episodes, turns, tokens/s, wall time).
        config: the settings that produced the result (for the report and reruns).
        pass_at_k_ci: each pass@k with its CI.
        split: the env's content pool the tasks came from (`test`, `val`, `train`), as its reset said;
            empty when the env does not say.
        void_reasons: reason -> episodes the env voided for it (`Trajectory.void_reasons`; an episode
            voided without a reason counts under `NO_VOID_REASON`). The count is `voided_episodes`.
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
    pass_at_k_ci: dict[int, Interval] = field(default_factory=dict)
    split: str = ""
    void_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def num_tasks(self) -> int:
        """Distinct tasks: the unit of every statistic."""
        return len(self.tasks)

    @property
    def num_seeds(self) -> int:
        return sum(len(t.seeds) or 1 for t in self.tasks)

    @property
    def episodes(self) -> int:
        return sum(len(t.rewards) for t in self.tasks)

    @property
    def scope(self) -> str:
        """'5 distinct tasks (test split), 64 episodes': the counts every summary states first."""
        split = f" ({self.split} split)" if self.split else ""
        return f"{_plural(self.num_tasks, 'distinct task')}{split}, {_plural(self.episodes, 'episode')}"

    @property
    def failed_episodes(self) -> int:
        return sum(len(t.failures) for t in self.tasks)

    @property
    def voided_episodes(self) -> int:
        """Episodes whose grade the env voided because it caught forgery (scored as the env paid, 0)."""
        return sum(t.voided for t in self.tasks)

    @property
    def voided_share(self) -> float:
        return self.voided_episodes / max(self.episodes, 1)

    def voided_line(self) -> str:
        """'2 of 64 episodes (3.1%): canaries passed (2)': the voided count, share and reasons (cut short)."""
        line = f"{self.voided_episodes} of {_plural(self.episodes, 'episode')} ({100 * self.voided_share:.1f}%)"
        reasons = sorted(self.void_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        return line + (": " + "; ".join(f"{_brief(r)} ({n})" for r, n in reasons) if reasons else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "env_id": self.env_id,
            "policy": self.policy,
            "samples_per_seed": self.samples,
            "num_tasks": self.num_tasks,
            "num_seeds": self.num_seeds,
            "episodes": self.episodes,
            "split": self.split,
            "failed_episodes": self.failed_episodes,
            "voided_episodes": self.voided_episodes,
            "voided_share": self.voided_share,
            "void_reasons": dict(self.void_reasons),
            "success": self.success.to_dict(),
            "reward_mean": self.reward_mean.to_dict(),
            "reward_iqm": self.reward_iqm.to_dict(),
            "success_iqm": self.success_iqm.to_dict(),
            "pass_at_k": {str(k): v for k, v in self.pass_at_k.items()},
            "pass_at_k_ci": {str(k): v.to_dict() for k, v in self.pass_at_k_ci.items()},
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
        # a result saved before tasks were merged by content has one seed per task and no key
        tasks = [
            TaskResult(
                **{k: t[k] for k in fields},
                seeds=list(t.get("seeds") or [t["seed"]]),
                key=t.get("key", ""),
                voided=int(t.get("voided", 0)),
            )
            for t in d["tasks"]
        ]
        return cls(
            env_id=d["env_id"],
            policy=d["policy"],
            samples=int(d.get("samples_per_seed", d.get("samples_per_task", 0))),  # the older name
            tasks=tasks,
            success=Interval(**d["success"]),
            reward_mean=Interval(**d["reward_mean"]),
            reward_iqm=Interval(**d["reward_iqm"]),
            success_iqm=Interval(**d["success_iqm"]),
            pass_at_k={int(k): float(v) for k, v in d["pass_at_k"].items()},
            failures=dict(d["failures"]),
            truncations=dict(d.get("truncations", {})),
            stats=dict(d.get("stats", {})),
            config=dict(d.get("config", {})),
            pass_at_k_ci={int(k): Interval(**v) for k, v in d.get("pass_at_k_ci", {}).items()},
            split=str(d.get("split", "")),
            void_reasons={str(k): int(v) for k, v in d.get("void_reasons", {}).items()},
        )

    def provenance(self) -> str:
        """How the seeds made the tasks: '16 seeds x 4 samples; seeds that drew the same task are one task'."""
        line = f"{_plural(self.num_seeds, 'seed')} x {_plural(self.samples, 'sample')}"
        if self.num_seeds > self.num_tasks:
            line += "; seeds that drew the same task are one task, their samples pooled"
        return line

    def few_tasks_note(self) -> str | None:
        """The warning a result over few distinct tasks carries (its intervals are optimistic), or None."""
        if self.num_tasks >= FEW_TASKS:
            return None
        return (
            f"only {_plural(self.num_tasks, 'distinct task')}: a bootstrap over so few undercovers (the intervals "
            "are too narrow), and the result says little about other tasks"
        )

    def summary(self) -> str:
        """A few lines for the terminal."""
        ks = ", ".join(f"pass@{k} {v:.3f}" + _ci(self.pass_at_k_ci.get(k)) for k, v in self.pass_at_k.items())
        pct = round(100 * self.success.confidence)
        lines = [
            f"{self.env_id} | {self.policy} | {self.scope} ({self.provenance()})",
            f"success      {self.success}  ({pct}% CI, bootstrap over the {_plural(self.num_tasks, 'distinct task')})",
            f"reward mean  {self.reward_mean}",
            f"reward IQM   {self.reward_iqm}",
            ks,
        ]
        if (note := self.few_tasks_note()) is not None:
            lines.append(note)
        if any(self.truncations.values()):
            cut = ", ".join(f"{k} {v}" for k, v in sorted(self.truncations.items()))
            lines.append(f"episodes cut off by the rollout's limits: {cut}")
        if self.failed_episodes:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.failures.items()) if v)
            lines.append(f"failed episodes: {self.failed_episodes} ({kinds}); scored 0")
        lines.append(f"voided by the env (caught forgery): {self.voided_line()}")
        return "\n".join(lines)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


NO_VOID_REASON = "no reason given"
VOID_REASON_CHARS = 120
"""Reports cut a void reason to this many characters (`eval.json` keeps it whole)."""


def _brief(reason: str) -> str:
    one_line = " ".join(reason.split())
    return one_line if len(one_line) <= VOID_REASON_CHARS else one_line[: VOID_REASON_CHARS - 3] + "..."


def _ci(interval: Interval | None) -> str:
    return "" if interval is None else f" [{interval.low:.3f}, {interval.high:.3f}]"


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
    """Turn the trajectories of an evaluation (seed-major, `samples` per seed) into an `EvalResult`.

    The samples of seeds that drew the same task (`task_key`) are pooled into one `TaskResult`; every
    statistic weighs a distinct task once, and its CI resamples distinct tasks.

    Args:
        trajectories: `len(seeds) * samples` trajectories, grouped by seed as `RolloutManager.run`
            returns them.
        samples: n, trajectories per seed.
        ks: the k of pass@k; those above the fewest samples of a task are skipped.
        success_threshold: an episode succeeds when its final reward is at least this.
        reps, confidence, seed: of the bootstrap confidence intervals.
    """
    if samples < 1 or not trajectories or len(trajectories) % samples:
        raise ValueError(f"need a non-empty multiple of samples={samples} trajectories, got {len(trajectories)}")
    merged: dict[str, list[Sequence[Trajectory]]] = {}  # task key -> its seeds' groups, in seed order
    for start in range(0, len(trajectories), samples):
        group = trajectories[start : start + samples]
        keys = [task_key(t) for t in group]  # a sample whose reset failed has only its seed
        merged.setdefault(next((k for k in keys if not k.startswith("seed:")), keys[0]), []).append(group)
    tasks = [_task_result(key, groups, success_threshold) for key, groups in merged.items()]
    rate = np.array([np.mean(t.successes) for t in tasks])  # (tasks,): each distinct task's success rate
    reward = np.array([np.mean(t.rewards) for t in tasks])  # (tasks,): each distinct task's mean reward
    n = np.array([len(t.successes) for t in tasks])
    c = np.array([sum(t.successes) for t in tasks])
    boot: dict[str, Any] = {"reps": reps, "confidence": confidence, "seed": seed}
    pass_at_k = metrics.pass_at_k_curve(n, c, sorted(set(ks)))
    failures = Counter(f.kind.value for t in trajectories if t.failed for f in t.failures[:1])
    splits = sorted({str(t.metadata[SPLIT_KEY]) for t in trajectories if t.metadata.get(SPLIT_KEY)})
    void_reasons = Counter(r for t in trajectories if t.voided for r in (t.void_reasons or [NO_VOID_REASON]))
    return EvalResult(
        env_id=env_id or trajectories[0].env_id,
        policy=policy,
        samples=samples,
        tasks=tasks,
        success=metrics.unit_interval_estimate(rate, metrics.mean, **boot),
        reward_mean=metrics.unit_interval_estimate(reward, metrics.mean, **boot),
        reward_iqm=metrics.unit_interval_estimate(reward, metrics.iqm, **boot),
        success_iqm=metrics.unit_interval_estimate(rate, metrics.iqm, **boot),
        pass_at_k=pass_at_k,
        pass_at_k_ci={
            k: metrics.unit_interval_estimate(np.atleast_1d(metrics.pass_at_k(n, c, k)), metrics.mean, **boot)
            for k in pass_at_k
        },
        failures={k: failures.get(k, 0) for k in ("policy", "env", "sandbox", "engine")},
        truncations=dict(
            Counter(str(t.metadata["truncated_by"]) for t in trajectories if t.metadata.get("truncated_by"))
        ),
        config={"success_threshold": success_threshold, "bootstrap": {**boot, "unit": "distinct task"}},
        split="+".join(splits),
        void_reasons=dict(void_reasons),
    )


def _task_result(key: str, groups: Sequence[Sequence[Trajectory]], success_threshold: float) -> TaskResult:
    """One distinct task from the sample groups of the seeds that drew it."""
    episodes = [t for group in groups for t in group]
    rewards = [0.0 if t.failed else _finite(t.reward) for t in episodes]
    return TaskResult(
        seed=int(groups[0][0].seed or 0),
        task_id=next((t.task_id for t in episodes if t.task_id), ""),
        rewards=rewards,
        successes=[not t.failed and r >= success_threshold for t, r in zip(episodes, rewards)],
        failures=[f"{t.failures[0].kind.value}: {t.failures[0].error_type}" for t in episodes if t.failed],
        turns=[len(t.turns) for t in episodes],
        seeds=[int(group[0].seed or 0) for group in groups],
        key=key,
        voided=sum(t.voided for t in episodes),
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
        seeds: the held-out tasks, as reset seeds (disjoint from the training seeds); seeds that draw
            the same task count as one task, their samples pooled.
        samples: n, episodes per seed; they differ only by the policy's sampling.
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
