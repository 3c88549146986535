"""Checkpoints restore weights, optimizer, schedule and RNG states exactly."""

import copy
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from batches import make_batch  # noqa: E402

from rlgym_llm.train import checkpoint  # noqa: E402
from rlgym_llm.train.trainer import OptimConfig, PolicyTrainer  # noqa: E402


def test_resume_gives_the_same_next_update_and_random_draws(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    batch = make_batch(base, n=4)
    optim = OptimConfig(lr=1e-3, warmup_steps=2, schedule="cosine", total_steps=10)

    a = PolicyTrainer(copy.deepcopy(base), optim=optim, micro_batch_size=2)
    a.update(batch)
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    path = checkpoint.save(tmp_path, 1, a.model, a.optimizer, a.scheduler, extra={"cursor": 17})
    metrics_a = a.update(batch)
    draws_a = (random.random(), np.random.rand(), torch.rand(1).item())

    b = PolicyTrainer(copy.deepcopy(base), optim=optim, micro_batch_size=2)  # a fresh process, in effect
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    assert checkpoint.latest(tmp_path) == path
    state = checkpoint.load(path, b.model, b.optimizer, b.scheduler)
    assert state == {"step": 1, "cursor": 17, "torch_extra": {}}
    metrics_b = b.update(batch)
    draws_b = (random.random(), np.random.rand(), torch.rand(1).item())

    assert draws_a == draws_b
    assert metrics_a["loss"] == metrics_b["loss"] and metrics_a["lr"] == metrics_b["lr"]
    assert all(torch.equal(p, q) for p, q in zip(a.model.parameters(), b.model.parameters()))


def test_incomplete_checkpoints_are_ignored_and_old_ones_pruned(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    trainer = PolicyTrainer(AutoModelForCausalLM.from_pretrained(tiny_model_dir))
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, step, trainer.model, trainer.optimizer, trainer.scheduler, keep=2)
    assert sorted(p.name for p in tmp_path.glob("step_*")) == ["step_000002", "step_000003"]
    (tmp_path / "step_000009").mkdir()  # a save killed before state.json: not a checkpoint
    assert checkpoint.latest(tmp_path).name == "step_000003"
    assert checkpoint.latest(tmp_path / "nothing") is None
