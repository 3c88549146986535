"""The peer benchmark's Math-v0 actions are graded as intended (else its timings compare nothing)."""

import json
import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parents[2] / "benchmarks" / "peers"
sys.path.insert(0, str(PEERS))

import env_worker  # noqa: E402
import gsm8k_like  # noqa: E402


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = gsm8k_like.write(tmp_path_factory.mktemp("peers") / "rows.jsonl", n=16)
    return path, [json.loads(line) for line in path.read_text().splitlines()]


def test_rows_are_gsm8k_like(data):
    _, rows = data
    assert len(rows) == 16
    for row in rows:
        assert int(row["answer"]) > 0 and row["answer"] in row["cot"]  # the reasoning reaches the answer
        assert 300 <= len(row["cot"]) <= 470 and row["cot"].endswith(".")


@pytest.mark.parametrize("system", ["ours-light", "ours-light-reuse", "ours-full", "ours-full-reuse"])
def test_ours_grades_correct_and_wrong_actions(data, system):
    path, rows = data
    bench = env_worker.build(system, rows, str(path))
    result = env_worker.single(bench, system, calls=20, budget_s=5.0)
    assert result["step_correct"]["mean_reward"] == 1.0
    assert result["step_wrong"]["mean_reward"] == 0.0
    assert result["reset"]["n"] == 20 and result["reset"]["p50_us"] > 0


def test_batched_episodes_run_in_threads(data):
    path, rows = data
    bench = env_worker.build("ours-light", rows, str(path))
    envs = [bench.make() for _ in range(env_worker.N_ENVS)]
    out = env_worker.batched(bench, envs, "ours-light", rounds=1, mode="threads", wrong=False, budget_s=5.0)
    assert out["mean_reward"] == 1.0 and out["rounds"] == 1 and out["env_steps_per_s"] > 0
