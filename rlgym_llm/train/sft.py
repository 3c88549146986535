"""Supervised warm-up on oracle trajectories: loss on the assistant tokens only.

An oracle (a scripted expert) plays episodes; each of its turns is written as the text the model
should produce (content, then Hermes `<tool_call>{...}</tool_call>` blocks) and rendered with the
agent's chat template exactly as the rollout manager renders model turns: the same prompt, the same
continuation tokens, the same loss mask. So the model learns the format it is later sampled in.

    trajs = oracle_trajectories(env_factory, agent, tokenizer, make_oracle, seeds=range(256), max_turns=6)
    history = sft(model, trajs, pad_id=tokenizer.pad_token_id, steps=60)
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from rlgym_llm.core.types import AssistantTurn, Messages, Trajectory, Turn
from rlgym_llm.rollout.policy import Completion
from rlgym_llm.train.losses import token_logprobs
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


def oracle_trajectory(
    env: Any,
    agent: Any,
    tokenizer: Any,
    make_oracle: Callable[[Any], Oracle],
    seed: int,
    max_turns: int,
    idle_prob: float = 0.0,
) -> Trajectory:
    """Play one episode with the oracle and record it as the rollout manager would record a model's.

    Args:
        env: a fresh env (closed by the caller).
        agent: renders and parses (the rollout manager's `Agent`).
        tokenizer: the policy's tokenizer (its EOS closes each assistant turn).
        make_oracle: builds the oracle for the env after its reset (it may read `env.unwrapped.task`).
        seed: the task's seed.
        max_turns: the most assistant turns.
        idle_prob: chance that a turn is an idle text turn (`IDLE_TEXT`) instead of the oracle's
            action: a noisy teacher that wastes turns, so its episodes can run out of turns. The
            oracle is not called on idle turns; it sees their observations with its next call.
    """
    rng = random.Random(f"idle-{seed}")
    opening, info = env.reset(seed=seed)
    tools = info.get("tools")
    oracle = make_oracle(env)
    traj = Trajectory(env_id="oracle", seed=seed, task_id=str(info.get("task_id", "")), opening=list(opening))
    history = agent.prepare(opening)
    traj.prompt_token_ids = tuple(agent.render_prompt(history, tools))
    observation: Messages = list(opening)
    pending: list[int] = []
    for t in range(max_turns):
        idle = idle_prob > 0 and rng.random() < idle_prob
        text = IDLE_TEXT if idle else hermes_text(AssistantTurn.coerce(oracle(observation)))
        ids = (*tokenizer.encode(text, add_special_tokens=False), tokenizer.eos_token_id)
        completion = Completion(token_ids=ids, logprobs=(0.0,) * len(ids), text=text, finish_reason="stop")
        # Parse the text back, as a model's would be: the oracle acts through the same channel.
        obs, reward, terminated, truncated, step_info = env.step(agent.parse(text))
        traj.turns.append(
            Turn(
                index=t,
                action=agent.parse(text),
                observation=list(obs),
                reward=float(reward),
                terminated=bool(terminated),
                truncated=bool(truncated),
                signals=step_info.get("signals", {}),
                obs_token_ids=tuple(pending),
                completion_token_ids=ids,
                completion_logprobs=completion.logprobs,
                finish_reason="stop",
            )
        )
        history.append(agent.assistant_message(completion))
        if terminated or truncated:
            traj.outcome = step_info.get("outcome") or {"reward": float(reward)}
            break
        pending = agent.render_continuation(history, list(obs), tools, completion)
        history.extend(obs)
        observation = [*observation, *obs] if idle else list(obs)
    return traj


def oracle_trajectories(
    env_factory: Callable[[], Any],
    agent: Any,
    tokenizer: Any,
    make_oracle: Callable[[Any], Oracle],
    seeds: Iterable[int],
    max_turns: int,
    idle_prob: float = 0.0,
    successful_only: bool = True,
) -> list[Trajectory]:
    """Oracle episodes over `seeds` (see `oracle_trajectory`).

    Args:
        idle_prob: the noisy teacher's idle-turn probability (0: the oracle itself).
        successful_only: keep only episodes with outcome reward > 0. With a noisy teacher, False
            clones its behaviour as it is, failures included.
    """
    out: list[Trajectory] = []
    for seed in seeds:
        env = env_factory()
        try:
            traj = oracle_trajectory(env, agent, tokenizer, make_oracle, int(seed), max_turns, idle_prob)
        finally:
            env.close()
        if not successful_only or (traj.outcome and traj.reward > 0):
            out.append(traj)
    if not any(t.reward > 0 for t in out):
        raise ValueError("the oracle solved none of the SFT episodes; check env.oracle and env.max_turns")
    return out


def sft_loss(model: Any, batch: TrainBatch) -> torch.Tensor:
    """Token-mean negative log-likelihood of the loss-masked (assistant) tokens."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    logp = token_logprobs(logits, batch.input_ids)  # (B, T): log p(token_t | tokens_<t)
    return -(logp * batch.loss_mask).sum() / batch.loss_mask.sum().clamp(min=1)


def sft(
    model: Any,
    trajectories: Sequence[Trajectory],
    pad_id: int,
    steps: int,
    batch_size: int = 16,
    lr: float = 1e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Fine-tune `model` on `trajectories` (AdamW, constant LR, gradient clipping at 1.0).

    Returns:
        The loss of every step.
    """
    rng = random.Random(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr)
    order: list[int] = []
    losses = []
    model.train()
    for step in range(steps):
        if len(order) < batch_size:  # reshuffle per epoch
            order += rng.sample(range(len(trajectories)), len(trajectories))
        idx, order = order[:batch_size], order[batch_size:]
        chosen = [trajectories[i] for i in idx]
        masks = [np.asarray(t.loss_mask, dtype=np.float32) for t in chosen]
        batch = TrainBatch.from_trajectories(chosen, masks, pad_id)
        optimizer.zero_grad(set_to_none=True)
        loss = sft_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    logger.info("sft: %d steps, loss %.3f -> %.3f", steps, losses[0], losses[-1])
    return losses
