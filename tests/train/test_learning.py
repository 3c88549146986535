"""Every credit method trains end to end through `rlgym train` on the multi-turn Counter env: from one
short SFT warm-up, two RL steps per method, each with at least one update that moves the weights.

Whether RL raises held-out success is a learning question, answered by the benchmark
(`python benchmarks/learning/counter_gain.py`: the default warm-up, 12 steps per method, held-out
success on 96 tasks before and after), not by this test.
"""

import json

import pytest

pytest.importorskip("torch")

from rlgym_llm.cli.main import main

pytestmark = pytest.mark.slow

METHODS = ["grpo", "turn_grpo", "gated", "igpo", "spa", "gigpo"]
STEPS = 2
COMMON = ["progress=false", "trainer.threads=2", "trainer.eval_tasks=0", "trainer.save_every=0"]
# the toy Counter with one-digit starts (50 (start, target) pairs; the main job trains Math-v0)
COMMON += ["env=counter", "env.kwargs.max_start=9", "env.kwargs.max_target=5"]
# Groups of 4 on 2 tasks per step: the warm-up's clone succeeds on about a quarter of its episodes,
# so with seed 0 the steps get groups with both outcomes (GRPO skips a step whose groups all tie).
RL = ["trainer.tasks_per_step=2", "trainer.group_size=4", f"trainer.steps={STEPS}"]


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory):
    """A clone of Counter's oracle after 40 SFT steps: imperfect, so sampled groups get mixed outcomes."""
    out = tmp_path_factory.mktemp("sft")
    sft = ["sft.steps=40", "sft.episodes=64", "sft.batch_size=8", "sft.idle_prob=0", "sft.successful_only=true"]
    assert main(["sft", f"out_dir={out}", *sft, *COMMON]) == 0
    return out / "sft_model"


def _weights(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("credit", METHODS)
def test_each_method_runs_through_the_cli_and_updates_the_weights(warm_start, tmp_path, credit):
    out = tmp_path / credit
    # SPA's estimator: fitted on one task's group of the starting policy, 20 passes (the defaults, 16
    # tasks and 200 passes, cost a minute here)
    extra = ["credit.params.explore_tasks=1", "credit.params.epochs=20"] if credit == "spa" else []
    rc = main(["train", f"out_dir={out}", f"credit={credit}", f"sft.init={warm_start}", *RL, *extra, *COMMON])
    assert rc == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))
    assert not all(r["skipped_update"] for r in records), [r["zero_variance_share"] for r in records]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"]["done"] >= 1, summary["updates"]
    # the exported last step differs from the warm-up it started from
    start, end = _weights(warm_start), _weights(out / "final_model")
    assert start.keys() == end.keys()
    assert any(not start[k].equal(end[k]) for k in start), f"{credit}: the update left the weights unchanged"
