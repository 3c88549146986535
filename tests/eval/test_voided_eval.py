"""Caught forgery is visible in evaluations (issue 32): `eval.json`, `report.md` and the summary count
the episodes whose grade the env voided (count, share, reasons, per task), 0 when none."""

import json

import gymnasium
import pytest

import rlgym_llm
from rlgym_llm.core.types import Trajectory
from rlgym_llm.eval.report import render_markdown, write_report
from rlgym_llm.eval.runner import NO_VOID_REASON, EvalResult, evaluate, summarize
from rlgym_llm.rollout.manager import RolloutConfig
from rlgym_llm.testing.policies import ScriptedPolicy
from tests.rollout.test_voided_rollout import VOID_REASON, ForgeryEnv, player

FORGERY = "test/EvalForgery-v0"


@pytest.fixture(scope="module", autouse=True)
def _registered():
    rlgym_llm.register(FORGERY, ForgeryEnv, max_turns=4)
    yield
    gymnasium.registry.pop(FORGERY, None)


def _evaluate(tokenizer, respond) -> EvalResult:
    from rlgym_agents.tool_calling import ToolCallingAgent

    return evaluate(
        FORGERY,
        ToolCallingAgent(tokenizer),
        ScriptedPolicy(tokenizer, respond),
        seeds=range(4),
        samples=2,
        rollout=RolloutConfig(max_turns=4, token_check="off", env_in_thread=False),
        ks=[1, 2],
        reps=100,
    )


def test_the_report_counts_voided_episodes_with_share_and_reason(tiny_tokenizer, tmp_path):
    result = _evaluate(tiny_tokenizer, player(forge_on=("alpha",)))  # forges on the alpha tasks only
    forged = sum(len(t.rewards) for t in result.tasks if t.task_id == "word-alpha")
    assert 0 < forged < result.episodes == 8  # the seeds draw both words
    assert result.voided_episodes == forged and result.failed_episodes == 0
    assert result.voided_share == pytest.approx(forged / 8)
    assert result.void_reasons == {VOID_REASON: forged}
    assert {t.task_id: t.voided for t in result.tasks if t.voided} == {"word-alpha": forged}
    # voided grades score as the env paid them: the honest tasks succeed, the forged ones do not
    assert result.success.point == pytest.approx(1 / 2)

    files = write_report(result, tmp_path / "report", plots=False)
    data = json.loads(files["json"].read_text())
    assert data["voided_episodes"] == forged and data["voided_share"] == pytest.approx(forged / 8)
    assert data["void_reasons"] == {VOID_REASON: forged}
    assert EvalResult.from_dict(data).to_dict() == data
    md = files["markdown"].read_text()
    share = f"{100 * forged / 8:.1f}%"
    assert f"Voided by the env (caught forgery): {forged} ({share})." in md
    assert f"{forged} of 8 episodes ({share}): {VOID_REASON} ({forged})." in md
    assert md.count(f" | {forged} |\n") == 1  # the alpha task's row, voided column
    assert f"voided by the env (caught forgery): {forged} of 8 episodes ({share})" in result.summary()


def test_control_the_report_says_0_when_nothing_was_voided(tiny_tokenizer, tmp_path):
    result = _evaluate(tiny_tokenizer, player(forge_on=()))
    assert result.voided_episodes == 0 and result.void_reasons == {} and result.success.point == 1.0
    files = write_report(result, tmp_path / "report", plots=False)
    data = json.loads(files["json"].read_text())
    assert (data["voided_episodes"], data["voided_share"], data["void_reasons"]) == (0, 0.0, {})
    assert all(t["voided"] == 0 for t in data["tasks"])
    md = files["markdown"].read_text()
    assert "Voided by the env (caught forgery): 0 (0.0%)." in md and "0 of 8 episodes (0.0%)." in md
    assert "voided by the env (caught forgery): 0 of 8 episodes (0.0%)" in result.summary()


def test_a_void_without_reason_is_counted_and_old_results_read_back_with_none():
    silent = Trajectory(env_id="x/Y-v0", seed=1, task_id="t1", outcome={"reward": 0.0}, voided=True)
    long = Trajectory(env_id="x/Y-v0", seed=1, task_id="t1", outcome={"reward": 0.0})
    long.record_void({"voided": True, "void_reason": "x" * 500})
    result = summarize([silent, long], 2, reps=50)
    assert result.voided_episodes == 2 and result.void_reasons == {NO_VOID_REASON: 1, "x" * 500: 1}
    md = render_markdown(result, plots=False)
    assert f"{NO_VOID_REASON} (1)" in md and "x" * 500 not in md and "x" * 117 + "..." in md  # cut short
    data = result.to_dict()
    for k in ("voided_episodes", "voided_share", "void_reasons"):
        del data[k]
    for t in data["tasks"]:
        del t["voided"]
    old = EvalResult.from_dict(data)  # an eval.json written before voids were counted
    assert old.voided_episodes == 0 and "Voided by the env (caught forgery): 0 (0.0%)." in render_markdown(old)
