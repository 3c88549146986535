"""One process of the strategy tests (`test_fsdp.py`): run directly it is 1 process, under torchrun
one of N (gloo, CPU).

    python fsdp_worker.py train OUT STRATEGY STEPS [lora] [ac] [kl] [mini] [smollm2]   # STEPS updates
    python fsdp_worker.py save OUT STRATEGY                                  # 2 updates, checkpoint, 2 more
    python fsdp_worker.py resume OUT STRATEGY                                # load OUT's checkpoint, 2 more

Every step trains on the same global batch of 8 rows whatever the process count: with 2 ranks,
rank 0 takes rows [0, 5) and rank 1 [5, 8), so with micro-batches of 2 rank 0 runs 3 passes and
rank 1 2 (FSDP pads rank 1 with a zero-gradient pass). Rank 0 writes OUT/<mode>.pt: the loss and
grad norm of every step and the final full weights. `smollm2` trains SmolLM2-135M on 4 rows a
step (3 on rank 0) instead of the tiny model on 8.
"""

import copy
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rlgym_llm.rollout.tiny_model import build_tiny_model  # noqa: E402
from rlgym_llm.train import checkpoint  # noqa: E402
from rlgym_llm.train.config import LossConfig, OptimConfig  # noqa: E402
from rlgym_llm.train.distributed import Distributed  # noqa: E402
from rlgym_llm.train.strategy import make_strategy  # noqa: E402
from rlgym_llm.train.trainer import PolicyTrainer, TrainBatch  # noqa: E402

ROWS = 8
SPLIT = 5  # rank 0's rows of 8 with 2 processes


def _model(lora: bool, smollm2: bool = False):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    if smollm2:
        from rlgym_llm.rollout.smollm2 import build_smollm2

        folder = build_smollm2()
    else:
        folder = build_tiny_model()
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if lora:
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(1)
        # init_lora_weights=False: B is random too, so the adapters change the output from step 1
        config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
        model = get_peft_model(model, config)
    return model


def _batches(model, steps: int, dist: Distributed, rows: int = ROWS, split: int = SPLIT) -> list[TrainBatch | None]:
    """This rank's part of each step's rows (the same rows for every process count)."""
    from batches import make_trajectories

    out = []
    for step in range(steps):
        trajs, advs = make_trajectories(model, n=rows, seed=step, with_advantages=True)
        lo, hi = ((0, split), (split, rows))[dist.rank] if dist.world == 2 else (0, rows)
        out.append(TrainBatch.from_trajectories(trajs[lo:hi], advs[lo:hi], pad_id=0))
    return out


def _trainer(model, dist: Distributed, kind: str, flags: set[str]) -> PolicyTrainer:
    strategy = make_strategy(kind, dist, activation_checkpointing="ac" in flags)
    loss = LossConfig(entropy_coef=0.01, kl_coef=0.05 if "kl" in flags else 0.0, recompute_old_logp="mini" in flags)
    ref = copy.deepcopy(model).eval() if "kl" in flags else None
    return PolicyTrainer(
        model,
        loss,
        OptimConfig(lr=1e-4),
        micro_batch_size=2,
        mini_batches=2 if "mini" in flags else 1,
        ref_model=ref,
        strategy=strategy,
    )


def run_train(dist: Distributed, out: Path, kind: str, steps: int, flags: set[str]) -> None:
    model = _model("lora" in flags, "smollm2" in flags)
    batches = _batches(model, steps, dist, *((4, 3) if "smollm2" in flags else (ROWS, SPLIT)))
    trainer = _trainer(model, dist, kind, flags)
    metrics = [trainer.update(b) for b in batches]
    state = trainer.full_state_dict()
    engine = trainer.weights()  # what generation reads: full weights, equal to the shards
    same = all(torch.equal(v, engine.state_dict()[k]) for k, v in state.items())
    if dist.main:
        torch.save({"metrics": metrics, "state": state, "engine_equal": same}, out / "train.pt")


def run_save(dist: Distributed, out: Path, kind: str) -> None:
    """2 updates, a checkpoint, 2 more: the reference a resume must reproduce."""
    model = _model(False)
    batches = _batches(model, 4, dist)
    trainer = _trainer(model, dist, kind, set())
    for b in batches[:2]:
        trainer.update(b)
    state2 = trainer.full_state_dict()
    checkpoint.save(out / "ckpt", 2, model, trainer.optimizer, trainer.scheduler, strategy=trainer.strategy)
    metrics = [trainer.update(b) for b in batches[2:]]
    state = trainer.full_state_dict()
    if dist.main:
        torch.save({"metrics": metrics, "state": state, "state2": state2}, out / "save.pt")


def run_resume(dist: Distributed, out: Path, kind: str) -> None:
    model = _model(False)
    batches = _batches(model, 4, dist)
    trainer = _trainer(model, dist, kind, set())
    found = checkpoint.latest(out / "ckpt")
    assert found is not None
    checkpoint.load(found, model, trainer.optimizer, trainer.scheduler, trainer.strategy)
    metrics = [trainer.update(b) for b in batches[2:]]
    state = trainer.full_state_dict()
    if dist.main:
        torch.save({"metrics": metrics, "state": state}, out / f"resume_{kind}_{dist.world}.pt")


def main() -> None:
    what, out, kind = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    dist = Distributed.start(int(os.environ.get("WORLD_SIZE", "1")))
    try:
        if what == "train":
            run_train(dist, out, kind, int(sys.argv[4]), set(sys.argv[5:]))
        elif what == "save":
            run_save(dist, out, kind)
        else:
            run_resume(dist, out, kind)
    except BaseException:
        dist.close(failed=True)
        raise
    dist.close()


if __name__ == "__main__":
    main()
