"""One process of the data-parallel tests (`test_distributed.py`): run directly it is 1 process,
under `torchrun --nproc_per_node 2` it is one of 2 (gloo, CPU).

    python ddp_worker.py trainer OUT            # PolicyTrainer.update on fixed batches split over the ranks
    python ddp_worker.py loop OUT STEPS         # the RL loop (train) on the tiny model, checkpoints in OUT

`trainer` writes OUT/trainer.pt: per case, the weights after one update of the whole batch.
`loop` trains on the toy Counter env with a scripted engine whose answers depend on the episode's
sampling seed (`EpisodeSeededPolicy`), so groups hold right and wrong answers (nonzero advantages)
and the draw is the same however the tasks are split; it resumes from OUT's newest checkpoint.
"""

import copy
import re
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rlgym_llm  # noqa: E402
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager  # noqa: E402
from rlgym_llm.rollout.policy import EpisodeSeededPolicy, SamplingParams  # noqa: E402
from rlgym_llm.rollout.tiny_model import build_tiny_model  # noqa: E402
from rlgym_llm.testing.policies import ScriptedPolicy  # noqa: E402
from rlgym_llm.train.config import LossConfig, OptimConfig, TrainerConfig  # noqa: E402
from rlgym_llm.train.credit_inputs import CreditAssigner  # noqa: E402
from rlgym_llm.train.distributed import Distributed  # noqa: E402
from rlgym_llm.train.loop import RunParts, train  # noqa: E402
from rlgym_llm.train.trainer import PolicyTrainer, TrainBatch  # noqa: E402

ENV = "test/DDPCounter-v0"
CASES = [
    # (aggregation, micro-batch size, rows of rank 0 out of 8: rank 1 gets the rest, none for 8)
    ("token-mean", 3, 5),
    ("seq-mean-token-mean", 2, 3),
    ("seq-mean-token-sum-norm", 4, 4),
    ("token-mean", 3, 8),
]


def _model():
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(build_tiny_model(), dtype=torch.float32)


def run_trainer(dist: Distributed, out: Path) -> None:
    """Each case: one update of the 8-row batch, rows [0, k) on rank 0 and [k, 8) on rank 1."""
    from batches import make_trajectories

    base = _model()
    trajs, advs = make_trajectories(base, n=8, seed=0, with_advantages=True)
    results = {}
    for i, (agg, micro, k) in enumerate(CASES):
        model = copy.deepcopy(base)
        loss = LossConfig(agg=agg, norm_const=64.0, entropy_coef=0.01)
        # lr is the default's: Adam's step of an entry whose gradient is ~0 (|g| ~ eps) amplifies fp32
        # rounding of the summation order by ~lr / eps (at lr=1e-3: up to 1.1e-5 seen between 1 and 2 ranks)
        trainer = PolicyTrainer(model, loss, OptimConfig(lr=1e-4), micro_batch_size=micro, dist=dist)
        lo, hi = ((0, k), (k, 8))[dist.rank] if dist.enabled else (0, 8)
        batch = TrainBatch.from_trajectories(trajs[lo:hi], advs[lo:hi], pad_id=0) if hi > lo else None
        metrics = trainer.update(batch)
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}  # after clipping
        results[i] = {
            "state": {k: v.clone() for k, v in model.state_dict().items()},
            "grads": grads,
            "metrics": metrics,
        }
    if dist.main:
        torch.save(results, out / "trainer.pt")


class SeedScripted(ScriptedPolicy):
    """Plays Counter right when the call's sampling seed is even, submits 0 at once when it is odd."""

    def __init__(self, tokenizer):
        super().__init__(tokenizer, self._respond)
        self._seed = 0

    async def generate(self, prompt_token_ids, sampling):
        self._seed = sampling.seed  # read by `_respond`, which runs before any await
        return await super().generate(prompt_token_ids, sampling)

    def _respond(self, prompt: str) -> str:
        target = int(re.findall(r"to exactly (\d+)", prompt)[0])
        done = "counter = " in prompt.rsplit("<|im_start|>user", 1)[-1]
        if self._seed % 2 or done:
            return '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
        return '<tool_call>{"name": "add", "arguments": {"amount": ' + str(target) + "}}</tool_call>"

    def sync_weights(self, model):
        """The scripted answers do not depend on the weights."""

    async def close(self):
        pass


def run_loop(dist: Distributed, out: Path, steps: int) -> None:
    """`steps` RL steps (resuming from `out`), 4 tasks of 3 samples, micro-batches of 2."""
    from rlgym_agents.tool_calling import ToolCallingAgent

    if ENV not in rlgym_llm.list_envs():
        rlgym_llm.register(ENV, "rlgym_llm.testing.toy:CounterEnv", max_turns=2)
    model = _model()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model())
    engine = SeedScripted(tokenizer)
    config = RolloutConfig(
        group_size=3,
        max_turns=2,
        max_context=512,
        sampling=SamplingParams(max_tokens=24),
        token_check="off",
        env_in_thread=False,
    )
    rollouts = RolloutManager(
        ENV, ToolCallingAgent(tokenizer), EpisodeSeededPolicy(engine, 5), config, {"max_target": 3}
    )
    loss = LossConfig(recompute_old_logp=True, entropy_coef=0.01)
    trainer = PolicyTrainer(model, loss, OptimConfig(lr=1e-4), micro_batch_size=2, dist=dist)
    run = RunParts(rollouts, trainer, engine, CreditAssigner("grpo", {}), pad_id=tokenizer.pad_token_id, dist=dist)
    # dynamic sampling: a tied group is dropped and refilled from new tasks, split over the ranks too
    cfg = TrainerConfig(
        steps=steps, tasks_per_step=4, group_size=3, max_draws=3, eval_tasks=0, save_every=1, keep_checkpoints=10
    )
    train(run, cfg, out, resume=True)
    rollouts.close()


def main() -> None:
    what, out = sys.argv[1], Path(sys.argv[2])
    torch.set_num_threads(1)
    import os

    dist = Distributed.start(int(os.environ.get("WORLD_SIZE", "1")))
    try:
        if what == "trainer":
            run_trainer(dist, out)
        else:
            run_loop(dist, out, int(sys.argv[3]))
    except BaseException:
        dist.close(failed=True)
        raise
    dist.close()


if __name__ == "__main__":
    main()
