"""Failure is not success: a run whose episodes fail stops with exit 1 and the first error, and a run
in which no update happened says so (updates done vs skipped, and why). Progress shows in a log too."""

import json
import textwrap

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.types import Failure, FailureKind, Trajectory
from rlgym_llm.rollout.errors import TooManyFailuresError, check_failures
from rlgym_llm.train.loop import updates_summary

SMALL = [
    "sft.enabled=false",
    "trainer.steps=2",
    "trainer.tasks_per_step=2",
    "trainer.group_size=2",
    "trainer.threads=1",
    "env.max_turns=2",
    "policy.max_context=256",
    "policy.sampling.max_tokens=8",
    "progress=false",
]


def _traj(seed: int, failed: bool) -> Trajectory:
    t = Trajectory(env_id="x/Y-v0", seed=seed, task_id="", group_id="0", sample_index=0)
    if failed:
        t.failures.append(Failure(FailureKind.ENV, "TypeError", "reset() got an unexpected keyword 'level'", 0))
    return t


def test_check_failures_raises_past_the_threshold_with_the_first_error():
    batch = [_traj(0, False), _traj(1, True), _traj(2, True)]
    check_failures(batch, 0.7, "RL step 1", "trainer.max_failed_share")  # 2/3 <= 0.7
    with pytest.raises(TooManyFailuresError) as e:
        check_failures(batch, 0.5, "RL step 1", "trainer.max_failed_share")
    assert str(e.value) == (
        "RL step 1: 2 of 3 episodes failed, more than trainer.max_failed_share=0.5 allows; first error "
        "(env failure, turn 0, seed 1): TypeError: reset() got an unexpected keyword 'level'"
    )
    check_failures(batch, 1.0, "x", "y")  # 1.0: never


def test_updates_summary_counts_skipped_updates_by_reason():
    records = [
        {"step": 1, "skipped_update": True, "skip_reason": "every group tied (equal rewards: no advantage)"},
        {"step": 2, "skipped_update": False, "skip_reason": None},
        {"step": 3, "skipped_update": True, "skip_reason": "every group tied (equal rewards: no advantage)"},
    ]
    assert updates_summary(records) == {
        "done": 1,
        "skipped": 2,
        "skip_reasons": {"every group tied (equal rewards: no advantage)": 2},
    }


def test_an_env_that_raises_in_every_episode_stops_the_run_with_exit_1(tmp_path, monkeypatch, capsys, tiny_model_dir):
    (tmp_path / "brokenenv.py").write_text(
        textwrap.dedent(
            """
            from rlgym_llm.testing.toy import CounterEnv

            class BrokenEnv(CounterEnv):
                def sample_task(self, options):
                    raise TypeError("sample_task() got an unexpected keyword argument 'level'")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    env = ["env=counter", "env.id=test/Broken-v0", "env.entry_point=brokenenv:BrokenEnv", "env.kwargs={}"]
    code = main(["train", f"out_dir={tmp_path / 'run'}", *env, *SMALL, "trainer.eval_tasks=0"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "error: RL step 1: 4 of 4 episodes failed, more than trainer.max_failed_share=0.5 allows" in err
    assert "TypeError: sample_task() got an unexpected keyword argument 'level'" in err
    assert not (tmp_path / "run" / "summary.json").exists()


def test_an_unreachable_endpoint_fails_the_evaluation(tmp_path, capsys, tiny_model_dir):
    argv = ["eval", "env=counter", "policy=openai", "policy.base_url=http://127.0.0.1:9/v1", "tasks=2", "samples=1"]
    assert main([*argv, "ks=[1]", f"out_dir={tmp_path}", "progress=false"]) == 1
    err = capsys.readouterr().err
    assert "error: evaluation of toy/Counter-v0: 2 of 2 episodes failed, more than max_failed_share=0.5" in err
    assert "Cannot connect to host 127.0.0.1:9" in err and not (tmp_path / "eval.json").exists()
    # the streamed trajectories name the env, not its factory ("<lambda>")
    rows = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert [r["env_id"] for r in rows] == ["toy/Counter-v0"] * 2


def test_a_run_without_any_update_says_so(tmp_path, capsys, tiny_model_dir):
    # the untrained tiny model never succeeds: every group's rewards are tied, no update happens
    out = tmp_path / "run"
    assert main(["train", f"out_dir={out}", "env=counter", *SMALL, "trainer.eval_tasks=2"]) == 0
    printed = capsys.readouterr().out
    why = "every group tied (equal rewards: no advantage)"
    assert f"updates: 0 done, 2 skipped ({why}: 2)" in printed
    assert "no update happened" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["updates"] == {"done": 0, "skipped": 2, "skip_reasons": {why: 2}}


def test_every_phase_shows_progress_in_plain_lines_when_not_on_a_terminal(tmp_path, capsys, tiny_model_dir):
    small = [s for s in SMALL if s not in ("sft.enabled=false", "progress=false", "env.max_turns=2")]
    sft = ["sft.episodes=8", "sft.steps=2", "sft.batch_size=4", "sft.idle_prob=0.0", "sft.successful_only=true"]
    sft += ["trainer.eval_tasks=2", "trainer.eval_every=1"]
    assert main(["train", f"out_dir={tmp_path / 'run'}", "env=counter", *small, *sft, "progress=true"]) == 0
    err = capsys.readouterr().err  # captured: not a terminal
    lines = err.splitlines()
    for start in (
        "setup: model tiny loaded from",
        "SFT demonstrations: started (8)",
        "SFT demonstrations: 8/8 (100%)",
        "SFT steps: 2/2 (100%)  loss ",
        "held-out eval: started (2)",
        "RL step 1 rollouts: started (4)",
        "RL step 2 rollouts: 4/4 (100%)",
        "RL steps: 2/2 (100%)  success ",
    ):
        assert any(line.startswith(start) for line in lines), (start, err)
    assert "\x1b[" not in err  # no terminal control codes in a log
    steps = next(line for line in lines if line.startswith("RL steps: 2/2"))
    assert len(steps) > 80 and steps.endswith(" done")  # a whole line, not cut at 80 columns


def test_trainer_episode_timeout_reaches_the_rollouts(tmp_path, capsys, tiny_model_dir):
    # a limit no episode can meet: every episode of the first step times out and the run stops
    out = tmp_path / "run"
    argv = ["train", f"out_dir={out}", "env=counter", *SMALL, "trainer.eval_tasks=0", "trainer.episode_timeout_s=1e-6"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "error: RL step 1: 4 of 4 episodes failed" in err and "episode exceeded 1e-06s" in err
    # control: the default limit lets the same run finish
    assert main([*argv[:-1], f"out_dir={tmp_path / 'control'}"]) == 0


def test_trainer_call_timeout_reaches_the_rollouts_and_names_itself(tmp_path, capsys, tiny_model_dir):
    # no generate call can meet the limit: every episode of the first step fails, saying which limit
    out = tmp_path / "run"
    argv = ["train", f"out_dir={out}", "env=counter", *SMALL, "trainer.eval_tasks=0", "trainer.call_timeout_s=1e-6"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "error: RL step 1: 4 of 4 episodes failed" in err
    assert "TimeoutError: the generate call took longer than call_timeout_s=1e-06s" in err
    # control: the default limit lets the same run finish
    assert main([*argv[:-1], f"out_dir={tmp_path / 'control'}"]) == 0


@pytest.mark.parametrize("key", ["episode_timeout_s", "call_timeout_s"])
def test_trainer_timeouts_must_be_positive(key):
    with pytest.raises(ConfigError, match=f"{key} must be > 0"):
        load_config("train", [f"trainer.{key}=0"])


def test_a_prompt_that_fills_the_context_is_reported(tmp_path, capsys, tiny_model_dir):
    # Counter's prompt is longer than 32 tokens: no episode gets a turn, and the report says why
    out = tmp_path / "run"
    argv = ["train", f"out_dir={out}", "env=counter", *SMALL, "trainer.eval_tasks=0"]
    assert main([*argv, "policy.max_context=32"]) == 0
    text = capsys.readouterr().out
    assert "no update happened" in text
    assert "8 of 8 training episodes had no turn: the prompt alone filled policy.max_context=32" in text
    record = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert record["prompt_fills_context"] == record["context_full"] == 4 and record["turns"] == 0
    # control: at the default context every episode acts, and the line is absent
    assert main([*argv[:1], f"out_dir={tmp_path / 'control'}", *argv[2:]]) == 0
    text = capsys.readouterr().out
    assert "had no turn" not in text
    summary = json.loads((tmp_path / "control" / "summary.json").read_text())
    assert summary["prompt_fills_context"] == {"episodes": 0, "of": 8}
