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


def test_a_typo_in_a_group_option_is_reported_with_every_other_problem(capsys):
    assert main(["train", "credit=grop", "trainer.stepz=3", "env=math", "env.kwargs.difficulty=banana"]) == 2
    err = capsys.readouterr().err
    assert "3 problem(s)" in err
    assert "unknown option `credit=grop` (did you mean `credit=grpo`?)" in err
    assert "did you mean `trainer.steps`?" in err and "`env.kwargs.difficulty='banana'`" in err


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_print_config_of_an_invalid_config_exits_2_and_prints_no_config(capsys, command):
    assert main([command, "--print-config", "env.kwargs.bogus=1", "seed=x"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "unknown key `env.kwargs.bogus`" in err and "`seed` must be int" in err


def test_eval_prints_its_config(capsys):
    assert main(["eval", "--print-config", "env=counter", "tasks=3"]) == 0
    out = capsys.readouterr().out
    assert "id: toy/Counter-v0" in out and "tasks: 3" in out


def test_env_kwargs_are_checked_against_the_env_constructor_at_config_time(capsys):
    overrides = ["env=math", "env.kwargs.difficulty=banana", "env.kwargs.bogus=1", "out_dir=/proc/x"]
    assert main(["train", "--print-config", *overrides]) == 2
    err = capsys.readouterr().err
    # the value as a whole, not letter by letter ("difficulty 'b' is not one of ...")
    assert "`env.kwargs.difficulty='banana'` must be int | Sequence[int], got str" in err
    assert "'b'" not in err
    assert (
        "unknown key `env.kwargs.bogus`; rlgym_envs.math.env:MathEnv takes: difficulty, kinds, prompt, dataset" in err
    )
    assert "`out_dir=/proc/x`: cannot create folders in /proc" in err
    assert main(["train", "--print-config", "env=math", "env.kwargs.difficulty=[1,3]", "env.kwargs.dificulty=2"]) == 2
    assert "did you mean `env.kwargs.difficulty`?" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "sft", "eval"])
def test_the_env_constructor_own_checks_run_before_the_model_loads(monkeypatch, capsys, tmp_path, command):
    from rlgym_llm.recipes import parts

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded before the env's arguments were checked")

    monkeypatch.setattr(parts, "model_dir", no_model)
    argv = [command, "env=math", "env.kwargs.difficulty=9", f"out_dir={tmp_path / 'run'}"]
    assert main(argv) == 2
    kwargs = "{'difficulty': 9, 'kinds': ['arithmetic'], 'prompt': 'short'}"
    assert f"rlgym/Math-v0 with env.kwargs={kwargs}: difficulty 9 is not one of [0, 1, 2, 3]" in (
        capsys.readouterr().err
    )


def test_policy_vllm_without_its_venv_fails_at_config_time(monkeypatch, capsys):
    monkeypatch.setenv("RLGYM_VLLM_PYTHON", "/nonexistent/bin/python")
    assert main(["train", "--print-config", "policy=vllm"]) == 2
    assert "`policy=vllm`: the vLLM server needs the project's vLLM virtual environment" in capsys.readouterr().err
