"""Trainer-side models that two credit methods need: IGPO's answer scoring and SPA's progress estimator.

Both produce the per-trajectory inputs of `rlgym_llm.credit.compute_advantages`:

IGPO (information gain): score the gold answer behind every turn's context with the rollout policy,
teacher-forced, no gradient (one pass per trajectory on a cropped KV cache, or padded micro-batches)::

    tmpl = answer_template_ids(tokenizer, gold_answer)          # prefix / answer / suffix token ids
    probs = igpo_answer_probs(model, trajectories, [tmpl] * len(trajectories))
    result = compute_advantages(trajectories, "igpo", answer_probs=probs)

    `probs[i]` holds p_0..p_{T_i-1} (an empty array for failed trajectories, which credit ignores).
    Pass one template per trajectory: the batch may mix tasks with different gold answers.

SPA (stepwise progress attribution): a small head c_phi over per-turn features, trained so that a
trajectory's contributions sum to its outcome, L = mean_i (sum_t c_{i,t} - R_i)^2::

    estimator = ProgressEstimator(SignalFeatures(("tool_ok",)))                  # or HiddenStateFeatures(model)
    losses = estimator.fit(trajectories, epochs=200)                             # per-epoch training loss
    result = compute_advantages(trajectories, "spa", contributions=estimator.contributions(trajectories))

    `estimator.state_dict()` / `load_state_dict()` hold the head, feature scaling and optimizer for checkpoints.
    Failed trajectories are skipped by `fit`; `contributions` returns zeros for them.

Both only read `Trajectory` token ids and signals; the model is any Hugging Face causal LM (or a
peft-wrapped one) whose forward takes `input_ids` and `attention_mask`; IGPO's default method also
needs its KV cache (`method="padded"` does not).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from rlgym_llm.core.types import Trajectory
from rlgym_llm.credit.info_gain import AnswerProbe, answer_probes
from rlgym_llm.credit.trajectories import outcome_value, turn_channel
from rlgym_llm.rollout.kv_cache import cache_kwarg, cache_of

# The authors' "answer now" probe (IGPO code, Qwen chat format), after the context's generation prompt.
IGPO_TEMPLATE_PREFIX = "<think>\nNow there's enough information to answer\n</think>\n<answer>\n"
IGPO_TEMPLATE_SUFFIX = "\n</answer><|im_end|>"


@dataclass(frozen=True)
class AnswerTemplate:
    """Token ids of the teacher-forced probe around the gold answer: prefix + answer + suffix.

    Only the answer tokens are averaged; the prefix and suffix are fixed text (see `build_answer_probe`).
    """

    answer_ids: tuple[int, ...]
    template_prefix_ids: tuple[int, ...] = ()
    template_suffix_ids: tuple[int, ...] = ()


def answer_template_ids(
    tokenizer: Any, answer: str, *, prefix: str = IGPO_TEMPLATE_PREFIX, suffix: str = IGPO_TEMPLATE_SUFFIX
) -> AnswerTemplate:
    """Tokenise the probe's three parts separately (as the authors slice by lengths), no special tokens added.

    Raises:
        ValueError: the answer tokenises to no tokens.
    """

    def ids(text: str) -> tuple[int, ...]:
        return tuple(tokenizer.encode(text, add_special_tokens=False)) if text else ()

    answer_ids = ids(answer)
    if not answer_ids:
        raise ValueError(f"the gold answer {answer!r} tokenises to no tokens")
    return AnswerTemplate(answer_ids, ids(prefix), ids(suffix))


def _device(model: Any) -> torch.device:
    return next(model.parameters()).device


def _forward_logits(model: Any, ids: torch.Tensor, attn: torch.Tensor, keep: int) -> torch.Tensor:
    """Logits of the last `keep` positions (B, keep, V); asks the model for only those when it can."""
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": attn}
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kwargs["logits_to_keep"] = keep  # spares the (B, L, V) logits of the context
    logits = model(**kwargs).logits
    return logits[:, -keep:]


@torch.no_grad()
def score_answer_probes(
    model: Any, probes: Sequence[AnswerProbe], *, micro_batch_size: int = 8, pad_id: int = 0
) -> np.ndarray:
    """p = exp(mean_j log pi(a*_j | context, a*_<j)) for every probe, teacher-forced and without gradient.

    Probes are sorted by length and right-padded in micro-batches (right padding keeps positions and
    causal attention of the real tokens unchanged). Only the logits from the first answer position on
    are computed when the model supports `logits_to_keep`.

    Args:
        model: a causal LM; it is put in eval mode for the pass and restored afterwards.
        probes: from `credit.answer_probes` / `build_answer_probe`.
        micro_batch_size: probes per forward pass.
        pad_id: the id written on padding (masked out, its value does not matter).

    Returns:
        One probability per probe, float64, in input order.

    Raises:
        ValueError: a probe has no token before its answer (nothing to condition the first answer token on).
    """
    out = np.zeros(len(probes), dtype=np.float64)
    if not probes:
        return out
    if any(p.answer_start < 1 for p in probes):
        raise ValueError("a probe needs at least one token before the answer (the context or the template prefix)")
    was_training = model.training
    model.eval()
    device = _device(model)
    order = sorted(range(len(probes)), key=lambda k: len(probes[k].input_ids))
    try:
        for s in range(0, len(order), micro_batch_size):
            rows = [probes[k] for k in order[s : s + micro_batch_size]]
            width = max(len(p.input_ids) for p in rows)
            ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
            attn = torch.zeros((len(rows), width), dtype=torch.long)
            for b, p in enumerate(rows):
                ids[b, : len(p.input_ids)] = torch.tensor(p.input_ids)
                attn[b, : len(p.input_ids)] = 1
            # logits at position k predict token k+1: the answer needs positions answer_start-1 .. answer_end-2
            keep = width - min(p.answer_start for p in rows) + 1
            logits = _forward_logits(model, ids.to(device), attn.to(device), keep).float()  # (B, keep, V)
            offset = width - keep
            for b, p in enumerate(rows):
                pos = torch.arange(p.answer_start - 1, p.answer_end - 1, device=logits.device) - offset
                targets = ids[b, p.answer_start : p.answer_end].to(logits.device)
                logp = torch.log_softmax(logits[b, pos], dim=-1).gather(-1, targets[:, None]).squeeze(-1)
                out[order[s + b]] = float(torch.exp(logp.double().mean()))
    finally:
        model.train(was_training)
    return out


def _crop(cache: Any, length: int) -> None:
    """Shorten a KV cache to its first `length` positions (a negative count works across transformers versions)."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


@torch.no_grad()
def _cached_trajectory_probs(model: Any, trajectory: Trajectory, template: AnswerTemplate) -> np.ndarray:
    """p_0..p_{T-1} of one trajectory from ONE pass over its context plus a short pass per turn.

    The contexts of a trajectory's probes are prefixes of each other, so the KV cache of the longest
    one serves them all: going from the last turn back to the first, the cache is cropped to the
    turn's context (which also drops the previous probe's tokens) and only the template and answer
    are run on top of it.
    """
    ids = trajectory.token_ids
    starts = [start for start, _ in trajectory.turn_spans]
    if not starts:
        return np.zeros(0)
    if starts[0] < 1:
        raise ValueError("a probe needs at least one token before the answer (the context or the template prefix)")
    device = _device(model)
    kwargs: dict[str, Any] = {"use_cache": True}
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kwargs["logits_to_keep"] = 1  # only the cache is needed from the context pass
    cache = cache_of(model(input_ids=torch.tensor([ids[: starts[-1]]], device=device), **kwargs))
    if cache is None or not hasattr(cache, "crop"):
        raise ValueError("the model returned no croppable KV cache; score with method='padded'")
    n_pre, n_ans = len(template.template_prefix_ids), len(template.answer_ids)
    answer = torch.tensor(template.answer_ids, device=device)
    kv_name = cache_kwarg(model)
    out = np.zeros(len(starts))
    for t in reversed(range(len(starts))):
        _crop(cache, starts[t] - 1)
        # the context's last token is re-run so that its logits predict the first template/answer token;
        # the template suffix comes after the answer and cannot change its log-probs, so it is skipped
        tail = torch.tensor([(ids[starts[t] - 1], *template.template_prefix_ids, *template.answer_ids)], device=device)
        logits = model(input_ids=tail, use_cache=True, **{kv_name: cache}).logits[0].float()  # (1 + pre + ans, V)
        logp = torch.log_softmax(logits[n_pre : n_pre + n_ans], dim=-1).gather(-1, answer[:, None]).squeeze(-1)
        out[t] = float(torch.exp(logp.double().mean()))
    return out


def igpo_answer_probs(
    model: Any,
    trajectories: Sequence[Trajectory],
    templates: Sequence[AnswerTemplate | None],
    *,
    method: Literal["prefix_cache", "padded"] = "prefix_cache",
    micro_batch_size: int = 8,
    pad_id: int = 0,
) -> list[np.ndarray]:
    """Per trajectory, the answer probabilities p_0..p_{T-1} before each turn's completion (IGPO's probes).

    Args:
        model: the rollout-time policy (a causal LM).
        trajectories: the batch.
        templates: per trajectory, its gold answer's `AnswerTemplate` (None: not scored, e.g. a failed one).
        method: `prefix_cache` (default) runs each trajectory's context once and scores every turn's probe
            on its cropped KV cache: about T times less compute than scoring T full probes, the better
            choice on CPU and for long contexts. `padded` scores all probes as full sequences in padded
            micro-batches (`score_answer_probes`): more compute, but wide batches, which can win on a GPU
            with many short trajectories, and it needs no KV cache.
        micro_batch_size, pad_id: for `padded`, see `score_answer_probes`.

    Returns:
        Per trajectory, T_i probabilities (empty for failed or unscored trajectories); pass as
        `compute_advantages(..., "igpo", answer_probs=...)`.
    """
    if len(templates) != len(trajectories):
        raise ValueError(f"{len(templates)} answer templates for {len(trajectories)} trajectories")
    if method == "prefix_cache":
        was_training = model.training
        model.eval()
        try:
            return [
                np.zeros(0) if traj.failed or tmpl is None else _cached_trajectory_probs(model, traj, tmpl)
                for traj, tmpl in zip(trajectories, templates)
            ]
        finally:
            model.train(was_training)
    if method != "padded":
        raise ValueError(f"method must be 'prefix_cache' or 'padded', got {method!r}")
    probes: list[AnswerProbe] = []
    owner: list[int] = []
    for i, (traj, tmpl) in enumerate(zip(trajectories, templates)):
        if traj.failed or tmpl is None:
            continue
        rows = answer_probes(
            traj,
            tmpl.answer_ids,
            template_prefix_ids=tmpl.template_prefix_ids,
            template_suffix_ids=tmpl.template_suffix_ids,
        )
        probes += rows
        owner += [i] * len(rows)
    flat = score_answer_probes(model, probes, micro_batch_size=micro_batch_size, pad_id=pad_id)
    out: list[list[float]] = [[] for _ in trajectories]
    for i, p in zip(owner, flat):
        out[i].append(float(p))
    return [np.asarray(v, dtype=np.float64) for v in out]


# --- SPA progress estimator --------------------------------------------------------------------

Featurizer = Callable[[Sequence[Trajectory]], list[np.ndarray]]
"""Turns trajectories into per-turn feature matrices, one (T_i, D) array per trajectory."""


@dataclass(frozen=True)
class SignalFeatures:
    """Per-turn features from the env's signals: the named channels (see `credit.trajectories.turn_channel`)
    plus, optionally, the turn's index t (not t / T: the estimate of turn t may only use the history up to t).

    Cheap (no model pass) and enough when the env reports what drives success (tool_ok, progress,
    reward components).
    """

    channels: tuple[str, ...] = ("tool_ok",)
    position: bool = True

    @property
    def dim(self) -> int:
        return len(self.channels) + int(self.position)

    def __call__(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        out = []
        for traj in trajectories:
            n = len(traj.turns)
            rows = [[turn_channel(turn, c) for c in self.channels] for turn in traj.turns]
            feats = np.array(rows, dtype=np.float64).reshape(n, len(self.channels))
            if self.position:
                feats = np.concatenate([feats, np.arange(n, dtype=np.float64)[:, None]], axis=1)
            out.append(feats)
        return out


@dataclass
class HiddenStateFeatures:
    """Per-turn features from a frozen causal LM: its last-layer hidden state at each turn's last completion
    token ("last", the SPA authors' choice of position) or averaged over the turn's completion ("mean").

    One no-grad forward pass per trajectory gives every turn's features; causal attention makes turn t's
    feature depend only on the trajectory up to the end of turn t, c_phi(tau_<=t). Features of a model
    that is being trained drift between steps: a frozen model (e.g. the reference policy) keeps a
    fitted head valid.
    """

    model: Any
    pool: Literal["last", "mean"] = "last"
    micro_batch_size: int = 4
    pad_id: int = 0

    @torch.no_grad()
    def __call__(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        model = self.model
        was_training = model.training
        model.eval()
        device = _device(model)
        out: list[np.ndarray] = []
        try:
            for s in range(0, len(trajectories), self.micro_batch_size):
                chunk = trajectories[s : s + self.micro_batch_size]
                seqs = [t.token_ids for t in chunk]
                width = max(max((len(x) for x in seqs), default=1), 1)
                ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
                attn = torch.zeros((len(chunk), width), dtype=torch.long)
                for b, x in enumerate(seqs):
                    ids[b, : len(x)] = torch.tensor(x, dtype=torch.long)
                    attn[b, : len(x)] = 1
                hidden = model(
                    input_ids=ids.to(device), attention_mask=attn.to(device), output_hidden_states=True
                ).hidden_states[-1]  # (B, L, H)
                for b, traj in enumerate(chunk):
                    rows = []
                    for start, end in traj.turn_spans:
                        if end <= start:  # an empty completion: the state where it would have ended
                            rows.append(hidden[b, max(start - 1, 0)])
                        elif self.pool == "last":
                            rows.append(hidden[b, end - 1])
                        else:
                            rows.append(hidden[b, start:end].mean(0))
                    dim = hidden.shape[-1]
                    out.append(torch.stack(rows).double().cpu().numpy() if rows else np.zeros((0, dim)))
        finally:
            model.train(was_training)
        return out


def contribution_loss(contributions: torch.Tensor, segments: torch.Tensor, outcomes: torch.Tensor) -> torch.Tensor:
    """L = mean_i (sum_{t in i} c_t - R_i)^2 over flattened turns (torch twin of `credit.progress_estimator_loss`).

    Args:
        contributions: (N,) c for every turn of the batch, trajectories concatenated.
        segments: (N,) the trajectory index of each turn.
        outcomes: (B,) R_i.
    """
    sums = torch.zeros_like(outcomes).index_add(0, segments, contributions)
    return (sums - outcomes).square().mean()


class ProgressEstimator:
    """SPA's progress estimator: an MLP head c_phi(features of turn t) -> contribution c_t.

    Trained on explored trajectories (successes and failures) so that sum_t c_{i,t} = R_i
    (Wang et al. 2025, SPA-RL). The authors fine-tune the whole SFT model with a linear head on its
    last-token output; here the backbone (if any) is frozen behind `HiddenStateFeatures` and only the
    head is trained (`train.credit_inputs.Contributions` fits it once on warm-up explorations).

    Args:
        featurizer: `SignalFeatures`, `HiddenStateFeatures` or any `Featurizer`.
        hidden: width of the MLP's hidden layer (0: a linear head).
        lr, weight_decay: AdamW settings of the head.
        outcome: which outcome is R_i ("reward" or an outcome component name).
        seed: initialisation seed of the head.
    """

    def __init__(
        self,
        featurizer: Featurizer,
        *,
        hidden: int = 64,
        lr: float = 1e-2,
        weight_decay: float = 0.0,
        outcome: str = "reward",
        seed: int = 0,
    ):
        self.featurizer = featurizer
        self.hidden = hidden
        self.lr = lr
        self.weight_decay = weight_decay
        self.outcome = outcome
        self.seed = seed
        self.head: torch.nn.Module | None = None  # built on the first fit, when the feature width is known
        self.optimizer: torch.optim.Optimizer | None = None
        self.mean: torch.Tensor | None = None  # feature standardisation, fixed at the first fit
        self.std: torch.Tensor | None = None

    def _build(self, dim: int) -> None:
        gen = torch.Generator().manual_seed(self.seed)
        with torch.random.fork_rng():
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
            if self.hidden > 0:
                head: torch.nn.Module = torch.nn.Sequential(
                    torch.nn.Linear(dim, self.hidden), torch.nn.Tanh(), torch.nn.Linear(self.hidden, 1)
                )
            else:
                head = torch.nn.Linear(dim, 1)
        self.head = head.double()
        self.optimizer = torch.optim.AdamW(self.head.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def _flat(self, feats: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = [np.asarray(f, dtype=np.float64) for f in feats]
        dim = next((r.shape[1] for r in rows if r.ndim == 2), 0)
        x = torch.from_numpy(np.concatenate(rows).reshape(-1, dim)) if rows else torch.zeros((0, dim))
        seg = torch.cat([torch.full((len(r),), i, dtype=torch.long) for i, r in enumerate(rows)]) if rows else None
        return x.double(), seg if seg is not None else torch.zeros(0, dtype=torch.long)

    def _predict(self, x: torch.Tensor) -> torch.Tensor:
        assert self.head is not None and self.mean is not None and self.std is not None
        return self.head((x - self.mean) / self.std).squeeze(-1)

    def fit(self, trajectories: Sequence[Trajectory], *, epochs: int = 100, batch_size: int = 0) -> list[float]:
        """Train the head on the non-failed trajectories; returns the loss of each epoch (before its updates).

        Args:
            trajectories: explored trajectories with their outcomes.
            epochs: passes over the data.
            batch_size: trajectories per optimizer step (0: the whole set, one step per epoch).
        """
        trajs = [t for t in trajectories if not t.failed and t.turns]
        if not trajs:
            return []
        feats = self.featurizer(trajs)
        x, seg = self._flat(feats)
        outs = torch.tensor([outcome_value(t, self.outcome) for t in trajs], dtype=torch.float64)
        if self.head is None:
            self.mean = x.mean(0)
            std = x.std(0, correction=0)
            # a feature constant in the first batch keeps unit scale, so later variation stays finite
            self.std = torch.where(std > 1e-6, std, torch.ones_like(std))
            self._build(x.shape[1])
        assert self.head is not None and self.optimizer is not None
        starts = np.cumsum([0] + [len(f) for f in feats])
        bs = batch_size or len(trajs)
        gen = np.random.default_rng(self.seed)
        history = []
        self.head.train()
        for _ in range(epochs):
            with torch.no_grad():
                history.append(float(contribution_loss(self._predict(x), seg, outs)))
            if bs >= len(trajs):
                batches = [(x, seg, outs)]
            else:
                order = gen.permutation(len(trajs))
                batches = []
                for s in range(0, len(trajs), bs):
                    idx = order[s : s + bs]
                    rows = torch.from_numpy(np.concatenate([np.arange(starts[i], starts[i + 1]) for i in idx]))
                    local = torch.from_numpy(np.repeat(np.arange(len(idx)), starts[idx + 1] - starts[idx]))
                    batches.append((x[rows], local, outs[torch.from_numpy(idx)]))
            for xb, segb, outb in batches:
                loss = contribution_loss(self._predict(xb), segb, outb)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
        return history

    @torch.no_grad()
    def contributions(self, trajectories: Sequence[Trajectory]) -> list[np.ndarray]:
        """Per trajectory, c_{i,t} for each turn (zeros for failed ones); the `contributions` of SPA.

        Raises:
            RuntimeError: called before `fit` (on a batch with a trajectory to score).
        """
        live = [i for i, t in enumerate(trajectories) if not t.failed and t.turns]
        out = [np.zeros(len(t.turns)) for t in trajectories]
        if not live:
            return out
        if self.head is None:
            raise RuntimeError(
                "ProgressEstimator.contributions() before fit(): train it on explored trajectories first"
            )
        feats = self.featurizer([trajectories[i] for i in live])
        x, _ = self._flat(feats)
        self.head.eval()
        pred = self._predict(x).numpy()
        for i, chunk in zip(live, np.split(pred, np.cumsum([len(f) for f in feats])[:-1])):
            out[i] = chunk.astype(np.float64)
        return out

    def state_dict(self) -> dict[str, Any]:
        """Head weights, feature scaling and optimizer state (for the trainer's checkpoint)."""
        if self.head is None:
            return {}
        assert self.optimizer is not None
        return {
            "head": self.head.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "mean": self.mean,
            "std": self.std,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what `state_dict` returned (an empty dict: an unfitted estimator)."""
        if not state:
            return
        self.mean, self.std = state["mean"], state["std"]
        assert self.mean is not None
        self._build(int(self.mean.shape[0]))
        assert self.head is not None and self.optimizer is not None
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
