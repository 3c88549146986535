"""`rlgym train` / `rlgym sft` at the shell boundary: bad configs exit 2 listing every problem, the
composed config can be printed, and an env without an oracle cannot be warmed up."""

import pytest

from rlgym_llm.cli.main import main


def test_a_bad_config_exits_2_and_lists_every_problem(capsys):
    assert main(["train", "trainer.stepz=3", "trainer.lora.rr=2"]) == 2
    err = capsys.readouterr().err
    assert "2 problem(s)" in err and "did you mean `trainer.steps`?" in err and "`trainer.lora.r`" in err


def test_credit_parameters_are_checked_with_the_config(capsys):
    assert main(["train", "credit=gated", "credit.params.tau_typo=0.5", "trainer.group_size=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown key `credit.params.tau_typo`: did you mean `credit.params.tau`?" in err
    assert "trainer.group_size=1: group-relative credit needs >= 2" in err


def test_print_config_shows_the_composed_run(capsys):
    assert main(["train", "--print-config", "credit=gigpo", "env=gui"]) == 0
    out = capsys.readouterr().out
    assert "method: gigpo" in out and "id: rlgym/GUI-v0" in out


def test_sft_needs_an_oracle(capsys):
    assert main(["sft", "env=swe", "env.oracle=null", "sft.enabled=false"]) == 2
    assert "needs an oracle" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_an_engine_failure_exits_1_with_its_message(monkeypatch, capsys, command):
    from rlgym_llm.core.errors import RlgymError
    from rlgym_llm.recipes import eval as evaluation
    from rlgym_llm.recipes import sft, train
    from rlgym_llm.rollout.errors import EngineError

    assert issubclass(EngineError, RlgymError)  # one handler catches every project error

    def broken(*args, **kwargs):
        raise EngineError("POST /v1/load_lora_adapter -> HTTP 500: out of memory", transient=False)

    recipe = {"train": train, "sft": sft, "eval": evaluation}[command]
    monkeypatch.setattr(recipe, "run", broken)
    assert main([command]) == 1
    assert "error: POST /v1/load_lora_adapter -> HTTP 500: out of memory" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_spa_trains_with_the_papers_protocol(tmp_path):
    # SPA's default: warm-up explorations of the starting policy, the estimator fitted on them over a
    # frozen copy of its hidden states, then frozen; the loop trains with it and checkpoints it
    import json

    import torch

    out = tmp_path / "spa"
    overrides = ["trainer.steps=2", "trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0"]
    overrides += ["sft.enabled=false", "progress=false", "credit.params.explore_tasks=2", "credit.params.epochs=20"]
    assert main(["train", "credit=spa", f"out_dir={out}", *overrides]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["trajectories"] == 4 for r in records)
    ckpt = sorted((out / "checkpoints").glob("step_*"))[-1]
    state = torch.load(ckpt / "trainer.pt", weights_only=False)["extra"]["credit"]["contributions"]
    assert state["fitted"] is True and state["estimator"]["head"]  # the frozen estimator is in the checkpoint
