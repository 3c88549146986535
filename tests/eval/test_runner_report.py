"""The evaluation runner and its report: hand-computed summaries, failures as data, files with the numbers."""

import json

import gymnasium
import pytest

import rlgym_llm
from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm.core.types import Failure, FailureKind, Trajectory
from rlgym_llm.eval.report import render_markdown, write_report
from rlgym_llm.eval.runner import EvalResult, evaluate, summarize
from rlgym_llm.rollout.errors import EngineError
from rlgym_llm.rollout.manager import RolloutConfig
from rlgym_llm.testing.policies import FaultyPolicy, ScriptedPolicy
from rlgym_llm.testing.toy import GuessNumberEnv, bisect_completion

GUESS = "test/EvalGuess-v0"


def _traj(seed, reward, failed=False):
    t = Trajectory(env_id="x/Y-v0", seed=seed, task_id=f"task-{seed}", outcome={"reward": reward})
    if failed:
        t.failures.append(Failure(FailureKind.ENGINE, "EngineError", "boom"))
    return t


def test_summarize_hand_computed():
    # Task 7: rewards 1, 0, 0, 1. Task 8: 0, 0, 0 and a failed episode whose outcome said 1.
    trajs = [_traj(7, r) for r in (1.0, 0.0, 0.0, 1.0)] + [_traj(8, 0.0)] * 3 + [_traj(8, 1.0, failed=True)]
    res = summarize(trajs, samples=4, ks=[1, 2, 4, 8], reps=500)
    assert [t.seed for t in res.tasks] == [7, 8]
    assert res.tasks[1].rewards == [0.0, 0.0, 0.0, 0.0]  # the failed episode scores 0
    assert res.tasks[1].failures == ["engine: EngineError"]
    assert res.failures == {"policy": 0, "env": 0, "sandbox": 0, "engine": 1}
    assert res.success.point == pytest.approx(2 / 8)
    # pass@1 = mean(2/4, 0); pass@2 = mean(1 - C(2,2)/C(4,2), 0) = mean(5/6, 0); pass@4 = mean(1, 0); k=8 > n skipped.
    assert res.pass_at_k == pytest.approx({1: 0.25, 2: 5 / 12, 4: 0.5})
    # The task is the unit: IQM of the 2 tasks' mean rewards (0.5, 0), too few to trim, is their mean.
    assert res.reward_iqm.point == 0.25
    assert res.success.low <= res.success.point <= res.success.high


def test_summarize_threshold_and_shape_checks():
    trajs = [_traj(1, 0.6), _traj(1, 0.4)]
    assert summarize(trajs, 2, success_threshold=0.5, reps=100).tasks[0].successes == [True, False]
    with pytest.raises(ValueError, match="multiple"):
        summarize(trajs, 3)


@pytest.fixture(scope="module", autouse=True)
def _registered():
    rlgym_llm.register(GUESS, GuessNumberEnv, max_turns=12)
    yield
    gymnasium.registry.pop(GUESS, None)


def test_evaluate_runs_episodes_records_failures_and_writes_the_report(tiny_tokenizer, tmp_path):
    # Call 0 fails for good (a non-transient engine error): that episode is recorded, the rest go on.
    policy = FaultyPolicy(
        ScriptedPolicy(tiny_tokenizer, bisect_completion), {0: EngineError("bad request", transient=False)}
    )
    result = evaluate(
        GUESS,
        ToolCallingAgent(tiny_tokenizer),
        policy,
        seeds=range(100, 103),
        samples=2,
        rollout=RolloutConfig(max_turns=12, concurrency=1, retry_backoff_s=0.0),
        policy_name="bisector",
        ks=[1, 2],
        reps=300,
    )
    assert result.episodes == 6 and result.failed_episodes == 1
    assert result.failures["engine"] == 1
    assert result.success.point == pytest.approx(5 / 6)  # bisection always finds the number
    assert result.pass_at_k == pytest.approx({1: 5 / 6, 2: 1.0})
    assert result.stats["episodes"] == 6 and result.stats["turns"] > 6

    files = write_report(result, tmp_path / "report", command="rlgym eval env=guess")
    data = json.loads(files["json"].read_text())
    assert data["success"]["point"] == pytest.approx(5 / 6)
    assert data["pass_at_k"] == {"1": pytest.approx(5 / 6), "2": 1.0}
    assert data["failed_episodes"] == 1 and data["command"] == "rlgym eval env=guess"
    assert len(data["tasks"]) == 3 and data["tasks"][0]["task_id"].startswith("guess-")
    again = EvalResult.from_dict(data)  # the JSON holds everything needed to re-plot or compare
    assert again.to_dict() == {k: v for k, v in data.items() if k != "command"}
    md = files["markdown"].read_text()
    assert "rlgym eval env=guess" in md and f"| success (mean) | {5 / 6:.3f} |" in md
    assert "| 0.833 | 1.000 |" in md  # the pass@k row
    assert "engine: EngineError" in md  # the failed task's row says why
    for key in ("pass_at_k", "scores"):
        assert files[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert files[key].stat().st_size > 10_000


def test_markdown_without_plots_links_no_images():
    result = summarize([_traj(1, 1.0), _traj(1, 0.0)], 2, reps=100)
    assert "![" not in render_markdown(result, plots=False)


def test_truncations_by_the_rollout_limits_are_counted_and_reported():
    cut = _traj(3, 0.0)
    cut.metadata["truncated_by"] = "context"
    result = summarize([cut, _traj(3, 1.0)], 2, reps=100)
    assert result.truncations == {"context": 1}
    assert "context: 1" in render_markdown(result, plots=False)
    assert "cut off by the rollout's limits: context 1" in result.summary()
