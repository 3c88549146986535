"""Training smoke tests: RL makes the tiny model better at the multi-turn Counter env, for GRPO and
for each turn-level credit method, through `rlgym train` with a fixed seed.

One SFT warm-up (the noisy teacher of the default config: half of its turns idle, so its clone runs
out of Counter's 4 turns on many episodes) is shared by all methods; each method then trains for
the same number of steps and must raise held-out success (96 tasks, the same sampling seeds
before and after) by a clear margin.
"""

import json

import pytest

pytest.importorskip("torch")

from rlgym_llm.cli.main import main

pytestmark = pytest.mark.slow

STEPS = 12
MARGIN = 0.12  # at 96 held-out tasks one standard error of a success rate is at most 0.05
COMMON = [
    "progress=false",
    "trainer.threads=2",
    "trainer.eval_tasks=96",
    "trainer.eval_every=0",
    "trainer.save_every=0",
]


@pytest.fixture(scope="module")
def warm_start(tmp_path_factory):
    out = tmp_path_factory.mktemp("sft")
    assert main(["sft", f"out_dir={out}", *COMMON]) == 0  # the main job's warm-up (configs/train.yaml)
    summary = json.loads((out / "sft_summary.json").read_text())
    # the clone inherits the teacher's habit: it fails often, so RL has room to improve
    assert 0.2 < summary["success_after"] < 0.7, summary
    return out / "sft_model"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("credit", ["grpo", "turn_grpo", "gated", "igpo", "spa", "gigpo"])
def test_rl_raises_held_out_success(warm_start, tmp_path, credit):
    out = tmp_path / credit
    rc = main(
        ["train", f"out_dir={out}", f"credit={credit}", f"sft.init={warm_start}", f"trainer.steps={STEPS}", *COMMON]
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    before, after = summary["before"]["success"], summary["after"]["success"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == STEPS and not any(r["skipped_update"] for r in records[:3])
    assert after - before >= MARGIN, f"{credit}: held-out success {before:.3f} -> {after:.3f}"
    # the policy learned to stop wasting turns: fewer turns per episode at the end than at the start
    assert sum(r["turns"] for r in records[-3:]) < sum(r["turns"] for r in records[:3])
