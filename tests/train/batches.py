"""Helpers for the trainer tests: batches of random trajectories scored by the model itself."""

import numpy as np

from rlgym_llm.core.types import AssistantTurn, Trajectory, Turn


def make_batch(model, n=8, seed=0):
    """n trajectories of random tokens: a prompt, then two turns (env tokens, completion tokens)."""
    trajs, advs = make_trajectories(model, n, seed, with_advantages=True)
    from rlgym_llm.train.trainer import TrainBatch

    return TrainBatch.from_trajectories(trajs, advs, pad_id=0)


def make_trajectories(model, n=8, seed=0, with_advantages=False):
    """The trajectories of `make_batch` (and their per-token advantages when `with_advantages`)."""
    import torch

    rng = np.random.default_rng(seed)
    vocab = model.config.vocab_size
    trajs, advs = [], []
    for i in range(n):
        traj = Trajectory(
            env_id="x/Y-v0", seed=i, task_id="t", prompt_token_ids=tuple(rng.integers(0, vocab, 5).tolist())
        )
        for k in range(2):
            obs = tuple(rng.integers(0, vocab, int(rng.integers(0, 4))).tolist()) if k else ()
            comp = tuple(rng.integers(0, vocab, int(rng.integers(2, 8))).tolist())
            traj.turns.append(
                Turn(k, AssistantTurn(), [], 0.0, False, False, obs_token_ids=obs, completion_token_ids=comp)
            )
        with torch.no_grad():
            ids = torch.tensor([traj.token_ids])
            lp = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(1, ids[0, 1:, None])[:, 0]
        logps = [0.0, *lp.tolist()]
        spans = traj.turn_spans
        traj.turns = [
            Turn(
                t.index,
                t.action,
                [],
                0.0,
                False,
                False,
                obs_token_ids=t.obs_token_ids,
                completion_token_ids=t.completion_token_ids,
                completion_logprobs=tuple(logps[s:e]),
            )
            for t, (s, e) in zip(traj.turns, spans)
        ]
        a = float(rng.normal())
        advs.append(np.array(traj.loss_mask, dtype=np.float32) * a)
        trajs.append(traj)
    return (trajs, advs) if with_advantages else trajs
