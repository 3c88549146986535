"""Supervised warm-up on oracle trajectories: loss on the assistant tokens only.

An oracle (a scripted expert) plays episodes through the same `RolloutManager` that rolls out the
model: `OraclePolicy` writes each of its turns as the text the model should produce (content, then
Hermes `<tool_call>{...}</tool_call>` blocks), and the manager renders, parses, steps and records it
exactly as a model's turn: the same prompt, the same continuation tokens, the same loss mask. So
the model learns the format it is later sampled in.

    trajs = oracle_trajectories(env_factory, agent, tokenizer, make_oracle, seeds=range(256), max_turns=6)
    history = sft(model, trajs, pad_id=tokenizer.pad_token_id, steps=60)
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from rlgym_llm.core.types import AssistantTurn, Messages, Trajectory
from rlgym_llm.rollout.device import Compute
from rlgym_llm.rollout.errors import check_failures
from rlgym_llm.rollout.manager import Agent, RolloutConfig, RolloutManager
from rlgym_llm.rollout.policy import Completion, Episode, EpisodePolicy, SamplingParams
from rlgym_llm.train.forward import masked_logprobs
from rlgym_llm.train.trainer import TrainBatch

logger = logging.getLogger(__name__)

Oracle = Callable[[Messages], Any]
"""Given the env's latest messages (the opening first), the next action (`AssistantTurn` or message)."""


def hermes_text(action: AssistantTurn) -> str:
    """The text a model writes for `action`: its content, then one `<tool_call>` block per call."""
    calls = "".join(
        "<tool_call>" + json.dumps({"name": c.name, "arguments": dict(c.arguments)}) + "</tool_call>"
        for c in action.tool_calls
    )
    return action.content + calls


IDLE_TEXT = "Let me think about the next step."
"""What a noisy teacher writes on an idle turn: text and no tool call (the env answers with a nudge)."""


class OraclePolicy(EpisodePolicy):
    """A scripted expert as a policy: its turns are the text a model should write, EOS-terminated.

    Args:
        tokenizer: the policy's tokenizer (the text's ids; its EOS closes each turn).
        make_oracle: builds the oracle for an env after its reset (it may read `env.unwrapped.task`).
        idle_prob: a noisy teacher: each turn is, with this chance, an idle text turn (`IDLE_TEXT`)
            instead of the oracle's action, so its episodes can run out of turns. The draws are a
            function of the task's seed. The oracle is not called on idle turns; it sees their
            observations with its next call.

    The oracle's completions are what the model is trained to write, not samples: their logprobs
    are 0 and the sampling settings (max_tokens included) do not apply.
    """

    def __init__(self, tokenizer: Any, make_oracle: Callable[[Any], Oracle], idle_prob: float = 0.0):
        self.tokenizer, self.make_oracle, self.idle_prob = tokenizer, make_oracle, idle_prob

    def start(self, episode: Episode) -> _OracleEpisode:
        return _OracleEpisode(self, episode)


class _OracleEpisode:
    def __init__(self, teacher: OraclePolicy, episode: Episode):
        self.teacher, self.episode = teacher, episode
        self.act = teacher.make_oracle(episode.env)
        self.rng = random.Random(f"idle-{episode.seed}")
        self.seen = 0  # the env's messages the oracle has been shown

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        t = self.teacher
        if t.idle_prob > 0 and self.rng.random() < t.idle_prob:
            text = IDLE_TEXT
        else:
            new, self.seen = self.episode.messages[self.seen :], len(self.episode.messages)
            text = hermes_text(AssistantTurn.coerce(self.act(new)))
        ids = (*t.tokenizer.encode(text, add_special_tokens=False), t.tokenizer.eos_token_id)
        return Completion(token_ids=ids, logprobs=(0.0,) * len(ids), text=text, finish_reason="stop")


def oracle_trajectories(
    env_factory: Callable[[], Any],
    agent: Agent,
    tokenizer: Any,
    make_oracle: Callable[[Any], Oracle],
    seeds: Iterable[int],
    max_turns: int,
    idle_prob: float = 0.0,
    successful_only: bool = True,
    env_in_thread: bool = False,
    max_failed_share: float = 1.0,
    on_episode: Callable[[Trajectory], None] | None = None,
    episode_timeout_s: float = 600.0,
) -> list[Trajectory]:
    """Oracle episodes over `seeds`, played by `OraclePolicy` through a `RolloutManager`.

    Args:
        env_factory: a zero-argument factory of fresh envs.
        agent: renders and parses, as for the model's rollouts.
        tokenizer, make_oracle, idle_prob: see `OraclePolicy`.
        seeds: one episode per seed, in this order.
        max_turns: the most assistant turns.
        successful_only: keep only episodes with outcome reward > 0. With a noisy teacher, False
            clones its behaviour as it is, failures included.
        env_in_thread: step the envs in worker threads (envs that run code).
        max_failed_share: raise `TooManyFailuresError` (with the first error) when more than this
            share of the episodes failed.
        on_episode: called with each finished episode (a progress bar).
        episode_timeout_s: limit for one episode; past it the episode is recorded as failed.

    Episodes that failed (the env or the oracle raised) are left out and logged; demonstrations
    have no context limit (the model's `max_context` only bounds its own rollouts).
    """
    config = RolloutConfig(
        group_size=1,
        max_turns=max_turns,
        max_context=sys.maxsize,
        token_check="off",
        env_in_thread=env_in_thread,
        episode_timeout_s=episode_timeout_s,
    )
    with RolloutManager(
        env_factory, agent, OraclePolicy(tokenizer, make_oracle, idle_prob), config, on_episode=on_episode
    ) as manager:
        trajs = manager.run_sync([int(s) for s in seeds])
    check_failures(trajs, max_failed_share, "SFT demonstrations", "trainer.max_failed_share")
    failed = [t for t in trajs if t.failed]
    if failed:
        logger.warning("sft: %d of %d oracle episodes failed and are left out", len(failed), len(trajs))
    return [t for t in trajs if not t.failed and (not successful_only or t.reward > 0)]


def sft_loss(
    model: Any, batch: TrainBatch, compute: Compute | None = None, tokens: float | None = None
) -> torch.Tensor:
    """Token-mean negative log-likelihood of the loss-masked (assistant) tokens.

    `tokens`: the divisor, when `batch` is one micro-batch of a larger batch (that batch's loss-masked
    token count, so that the micro-batches' losses sum to the whole batch's token mean); default
    this batch's own count."""
    compute = compute or Compute.of(model)
    batch = batch.to(compute.device)
    # log p(token_t | tokens_<t) of the assistant tokens, with the LM head over those positions only
    with compute.autocast():
        logp = masked_logprobs(model, batch.input_ids, batch.attention_mask, batch.loss_mask).logp
    divisor = batch.loss_mask.sum().clamp(min=1) if tokens is None else max(tokens, 1.0)
    return -(logp * batch.loss_mask).sum() / divisor


def sft(
    model: Any,
    trajectories: Sequence[Trajectory],
    pad_id: int,
    steps: int,
    batch_size: int = 16,
    lr: float = 1e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    compute: Compute | None = None,
    lr_schedule: str = "constant",
    micro_batch_size: int | None = None,
) -> list[float]:
    """Fine-tune `model` on `trajectories` (AdamW, gradient clipping at 1.0).

    `lr_schedule`: `constant`, or `cosine` (step i of n at lr * (1 + cos(pi * i / n)) / 2).

    `micro_batch_size`: trajectories per forward/backward pass; their gradients accumulate into the
    step of `batch_size` (the same token-mean loss and step, at the activation memory of a
    micro-batch). None: the whole batch in one pass.

    `compute` is the device and compute dtype (default: float32 where `model`'s weights are).

    Returns:
        The loss of every step.
    """
    if micro_batch_size is not None and micro_batch_size < 1:
        raise ValueError(f"micro_batch_size must be >= 1 (or None), got {micro_batch_size}")
    micro = micro_batch_size or batch_size
    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    if lr_schedule not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule must be constant or cosine, got {lr_schedule!r}")
    factor = (lambda i: 0.5 * (1 + math.cos(math.pi * i / steps))) if lr_schedule == "cosine" else (lambda i: 1.0)
    order: list[int] = []
    losses = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:  # reshuffle per epoch
            order += rng.sample(range(len(trajectories)), len(trajectories))
        idx, order = order[:batch_size], order[batch_size:]
        chosen = [trajectories[i] for i in idx]
        masks = [np.asarray(t.loss_mask, dtype=np.float32) for t in chosen]
        tokens = float(sum(m.sum() for m in masks))
        for group in optimizer.param_groups:
            group["lr"] = lr * factor(step)
        optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for a in range(0, len(chosen), micro):
            part = TrainBatch.from_trajectories(chosen[a : a + micro], masks[a : a + micro], pad_id)
            part_loss = sft_loss(model, part, compute, tokens=tokens)
            part_loss.backward()
            loss += float(part_loss.detach())
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(loss)
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    logger.info("sft: %d steps, loss %.3f -> %.3f", steps, losses[0], losses[-1])
    return losses
