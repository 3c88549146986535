"""The cheap policy of the credit suite, trained with the project's own credit and loss code.

The policy is a linear softmax over the task's categorical features: a decision with feature ids
f_1..f_k among n actions has logits sum_j W[f_j, :n] (a one-layer network on one-hot features; W starts
at 0, the uniform policy: nobody engineered the start). One training step does what `rlgym train` does
with one optimizer step per batch:

1. roll out `tasks_per_step` train-split contents, `group_size` episodes each (temperature 1);
2. turn the episodes into `rlgym_llm.core.Trajectory` records (per-turn `tool_ok`, `state_key`,
   `outcome_level`, step rewards, the outcome) and call `rlgym_llm.credit.compute_advantages` with the
   method and its default parameters, plus its per-step inputs: IGPO's `answer_probs` (the policy's own
   probability of the secret before each turn, the trainer's scoring pass in small), SPA's
   `contributions` (`rlgym_llm.train.credit_inputs.Contributions` around the library's
   `ProgressEstimator`, fitted once on exploration episodes of the starting policy, then frozen);
3. drop the groups whose advantages are all zero (`filter_zero_variance`, the trainer's default), give
   every decision of a turn its turn's advantage (a turn's tokens), and take one AdamW step on
   `rlgym_llm.train.losses.policy_loss` (the trainer's clip range and aggregation; Dr. GRPO's
   `seq-mean-token-sum-norm` where the method's registry record sets it), gradient norm clipped at 1.

What it cannot show that an LLM can (docs/credit.md): no shared representation across turns beyond the
features, no language prior (the start is uniform, not a pretrained model), no length or format effects
of generated text, no off-policy drift from a rollout engine, and exact features instead of hidden
states for SPA's estimator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tasks import Episode, Task

from rlgym_llm.core.types import AssistantTurn, Trajectory, Turn
from rlgym_llm.credit import METHODS, compute_advantages, resolve_params
from rlgym_llm.train.credit_inputs import Contributions
from rlgym_llm.train.credit_models import ProgressEstimator
from rlgym_llm.train.losses import BatchTotals, policy_loss

VERSION = 1
"""Bump with any change to what a run does (stored suite runs of another version are not reused)."""

LOSS_DEFAULTS = {"clip_low": 0.2, "clip_high": 0.28, "agg": "token-mean"}  # rlgym_llm.train.config.LossConfig


@dataclass(frozen=True)
class Budget:
    """One run's budget: every method gets the same on a task."""

    steps: int = 40
    tasks_per_step: int = 4
    group_size: int = 8
    lr: float = 0.05
    eval_every: int = 5
    eval_episodes: int = 64
    explore_tasks: int = 16  # SPA's exploration (the method's default): tasks x group_size episodes


class Policy:
    """The linear softmax policy; `act` samples from a numpy copy of the weights (refreshed after each update)."""

    def __init__(self, n_features: int, n_actions: int, rng: np.random.Generator):
        # the extra last row is the padding feature, kept at 0
        self.weight = torch.zeros(n_features + 1, n_actions, dtype=torch.float64, requires_grad=True)
        self.pad = n_features
        self.rng = rng
        self.table = self.weight.detach().numpy().copy()

    def refresh(self) -> None:
        with torch.no_grad():
            self.weight[self.pad].zero_()
        self.table = self.weight.detach().numpy().copy()

    def probs(self, features: Sequence[int], n: int) -> np.ndarray:
        logits = self.table[list(features), :n].sum(0)
        logits = logits - logits.max()
        p = np.exp(logits)
        return p / p.sum()

    def act(self, features: Sequence[int], n: int) -> int:
        p = self.probs(features, n)
        return int(min(np.searchsorted(np.cumsum(p), self.rng.random() * p.sum(), side="right"), n - 1))

    def answer_prob(self, task: Any, bits: Sequence[int], status: Sequence[int]) -> float:
        """P(the whole secret) under the answer decisions, given what is known (IGPO's probe)."""
        return float(
            math.prod(self.probs(task.answer_features(j, s), 2)[b] for j, (b, s) in enumerate(zip(bits, status)))
        )


def to_trajectory(ep: Episode, group: str, sample: int, n_features: int, n_actions: int) -> Trajectory:
    """The episode as the rollout manager records one: turns with signals, the outcome, the opening state key."""
    turns = []
    for t, s in enumerate(ep.steps):
        signals: dict[str, Any] = {"tool_ok": s.tool_ok, "state_key": s.state_key}
        if s.level is not None:
            signals["outcome_level"] = s.level
        turns.append(
            Turn(
                index=t,
                action=AssistantTurn(content=" ".join(str(d.action) for d in s.decisions)),
                observation=[],
                reward=s.reward,
                terminated=s.done,
                truncated=False,
                signals=signals,
            )
        )
    return Trajectory(
        env_id=f"credit_suite/{ep.task}",
        seed=None,
        task_id=str(ep.content),
        group_id=group,
        sample_index=sample,
        turns=turns,
        outcome={"reward": ep.reward},
        metadata={"state_key": ep.opening_key, "episode": ep, "n_features": n_features, "n_actions": n_actions},
    )


def turn_features(trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
    """SPA's estimator features: per turn, the one-hot (feature, action) pairs of its decisions, plus the
    turn's index (what an LLM's hidden state at the turn's end encodes, exactly)."""
    out = []
    for traj in trajectories:
        ep: Episode = traj.metadata["episode"]
        nf, na = traj.metadata["n_features"], traj.metadata["n_actions"]
        rows = np.zeros((len(ep.steps), nf * na + 1))
        for t, s in enumerate(ep.steps):
            for d in s.decisions:
                for f in d.features:
                    rows[t, f * na + d.action] += 1.0
            rows[t, -1] = t
        out.append(rows)
    return out


@dataclass
class RunResult:
    method: str
    task: str
    knob: int
    seed: int
    train_success: list[float] = field(default_factory=list)  # per step
    eval_steps: list[int] = field(default_factory=list)
    test_success: list[float] = field(default_factory=list)  # at eval_steps
    skipped_updates: int = 0


class Runner:
    """One (task, method, seed) run."""

    def __init__(self, task: Task, method: str, seed: int, budget: Budget):
        self.task, self.method, self.seed, self.budget = task, method, seed, budget
        self.m = METHODS[method]
        self.params = resolve_params(method, {})
        # the same seed gives every method the same task stream and evaluation draws
        self.task_rng = np.random.default_rng([seed, 1])
        self.policy = Policy(task.n_features, task.n_actions, np.random.default_rng([seed, 2]))
        loss = {**LOSS_DEFAULTS, **dict(self.m.trainer.get("loss", {}))}
        self.agg = loss["agg"]
        self.clip_low, self.clip_high = loss["clip_low"], loss["clip_high"]
        self.optim = torch.optim.AdamW([self.policy.weight], lr=budget.lr, weight_decay=0.0)
        self.contributions: Contributions | None = None
        if "contributions" in self.m.inputs:
            estimator = ProgressEstimator(turn_features, hidden=self.params.head_hidden, seed=seed)
            self.contributions = Contributions(estimator, epochs=self.params.epochs, explore=self._explore)

    def _probe(self) -> Any:
        return self.policy.answer_prob if hasattr(self.task, "answer_features") else None

    def _explore(self) -> list[Trajectory]:
        rng = np.random.default_rng([self.seed, 3])
        pool = self.task.pool("train")
        out = []
        for g in range(self.budget.explore_tasks):
            content = pool[int(rng.integers(len(pool)))]
            for i in range(self.budget.group_size):
                ep = self.task.play(content, self.policy.act, rng, self._probe())
                out.append(to_trajectory(ep, f"explore{g}", i, self.task.n_features, self.task.n_actions))
        return out

    def evaluate(self) -> float:
        """Test-split success at temperature 1: the same contents and sampling seeds at every measure."""
        rng = np.random.default_rng([self.seed, 4])
        pool = self.task.pool("test")
        picks = rng.choice(len(pool), size=self.budget.eval_episodes, replace=len(pool) < self.budget.eval_episodes)
        saved = self.policy.rng
        self.policy.rng = np.random.default_rng([self.seed, 5])
        wins = [self.task.play(pool[int(i)], self.policy.act, rng).reward > 0 for i in picks]
        self.policy.rng = saved
        return float(np.mean(wins))

    def batch(self, step: int) -> list[Trajectory]:
        pool = self.task.pool("train")
        trajs = []
        for g in range(self.budget.tasks_per_step):
            content = pool[int(self.task_rng.integers(len(pool)))]
            for i in range(self.budget.group_size):
                ep = self.task.play(content, self.policy.act, self.task_rng, self._probe())
                trajs.append(to_trajectory(ep, f"{step}:{g}", i, self.task.n_features, self.task.n_actions))
        return trajs

    def inputs(self, trajs: list[Trajectory]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if "answer_probs" in self.m.inputs:
            # tasks with no answer to probe: p_t constant, so every information gain is 0
            out["answer_probs"] = [
                [s.probe if s.probe is not None else 0.5 for s in t.metadata["episode"].steps] for t in trajs
            ]
        if self.contributions is not None:
            out["contributions"] = self.contributions(trajs)
        return out

    def update(self, trajs: list[Trajectory]) -> bool:
        credit = compute_advantages(trajs, self.method, **self.inputs(trajs))
        chosen = [(t, a) for t, a, k in zip(trajs, credit.turn_advantages, credit.keep) if k]
        if not chosen:
            return False
        seqs = [
            [(d, float(a)) for s, a in zip(t.metadata["episode"].steps, adv) for d in s.decisions] for t, adv in chosen
        ]
        width = max(len(s) for s in seqs)
        nfeat = max(len(d.features) for s in seqs for d, _ in s)
        n_act = self.task.n_actions
        feats_np = np.full((len(seqs), width, nfeat), self.policy.pad, dtype=np.int64)
        choices = np.zeros((len(seqs), width), dtype=np.int64)
        actions_np = np.zeros((len(seqs), width), dtype=np.int64)
        advs_np = np.zeros((len(seqs), width))
        mask_np = np.zeros((len(seqs), width))
        for b, toks in enumerate(seqs):
            for k, (d, a) in enumerate(toks):
                feats_np[b, k, : len(d.features)] = d.features
                choices[b, k], actions_np[b, k], advs_np[b, k], mask_np[b, k] = d.n_choices, d.action, a, 1.0
        feats, actions = torch.from_numpy(feats_np), torch.from_numpy(actions_np)
        advs, mask = torch.from_numpy(advs_np), torch.from_numpy(mask_np)
        # padded tokens keep one choice, so their log-softmax stays finite (their loss is masked out)
        choice_mask = torch.arange(n_act)[None, None, :] < torch.from_numpy(np.maximum(choices, 1))[..., None]
        logits = self.policy.weight[feats].sum(2).masked_fill(~choice_mask, -math.inf)
        logp = torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)
        logp = torch.where(mask > 0, logp, torch.zeros_like(logp))
        max_decisions = max(len(s.decisions) for t in trajs for s in t.metadata["episode"].steps) * max(
            len(t.turns) for t in trajs
        )
        totals = BatchTotals.of(mask, norm_const=float(max_decisions))
        out = policy_loss(
            logp, logp.detach(), advs, mask, totals, clip_low=self.clip_low, clip_high=self.clip_high, agg=self.agg
        )
        self.optim.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_([self.policy.weight], 1.0)
        self.optim.step()
        self.policy.refresh()
        return True

    def run(self) -> RunResult:
        res = RunResult(self.method, self.task.name, self.task.knob, self.seed)
        for step in range(self.budget.steps + 1):
            if step % self.budget.eval_every == 0:
                res.eval_steps.append(step)
                res.test_success.append(self.evaluate())
            if step == self.budget.steps:
                break
            trajs = self.batch(step)
            res.train_success.append(float(np.mean([t.reward > 0 for t in trajs])))
            if not self.update(trajs):
                res.skipped_updates += 1
        return res
