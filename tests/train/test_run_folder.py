"""Run folders: a new run gets a new folder, an existing one is never reused silently, and resuming
refuses a config that differs in anything but the step budget, listing the differences.
`rlgym train resume=RUN` reads the run's saved config: nothing retyped, an override that contradicts
it refused in one line naming the key, the saved and the given value."""

import re
from pathlib import Path

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import parts, resume


def test_the_default_run_folder_is_new_and_timestamped():
    out = load_config("train").out_dir
    assert re.fullmatch(r"runs/train/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", out), out
    assert re.fullmatch(r"runs/math_grpo/\S+", load_config("train", ["+experiment=math_grpo"]).out_dir)


def test_a_new_run_refuses_a_folder_that_holds_files(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = load_config("train", [f"out_dir={empty}"])
    assert parts.run_folder(cfg) == empty and (empty / "config.yaml").exists()  # an empty folder is fine
    with pytest.raises(ConfigError, match=f"pass resume={empty} to continue that run"):
        parts.run_folder(load_config("train", [f"out_dir={empty}"]))


def _saved_run(tmp_path: Path, *overrides: str) -> Path:
    out = tmp_path / "run"
    parts.run_folder(load_config("train", [f"out_dir={out}", *overrides]))
    return out


def test_resume_accepts_a_longer_step_budget_only(tmp_path):
    out = _saved_run(tmp_path, "env=math", "credit=grpo", "sft.enabled=false", "trainer.steps=3")
    cfg = load_config("train", [f"resume={out}", "env=math", "credit=grpo", "sft.enabled=false", "trainer.steps=9"])
    assert parts.run_folder(cfg) == out and cfg.out_dir == str(out)  # out_dir follows resume=
    assert "steps: 9" in (out / "config.yaml").read_text()

    other = load_config("train", [f"resume={out}", "env=counter", "credit=gated", "sft.enabled=false"])
    with pytest.raises(ConfigError) as e:
        parts.run_folder(other)
    problems = e.value.problems
    assert problems[0].startswith(f"`resume={out}`: this config differs from the run's in ")
    assert "credit.method: 'grpo' -> 'gated'" in problems
    assert "env.id: 'rlgym/Math-v0' -> 'toy/Counter-v0'" in problems
    assert not any(p.startswith("trainer.steps") for p in problems)


def test_a_setting_added_after_the_run_was_saved_is_no_difference_at_its_default(tmp_path):
    out = _saved_run(tmp_path, "sft.enabled=false")
    saved = (out / "config.yaml").read_text()
    assert "off_policy_threads: 0" in saved
    # The run was saved by a version without this setting: it behaved as the default there.
    (out / "config.yaml").write_text(saved.replace("  off_policy_threads: 0\n", ""))
    assert parts.run_folder(load_config("train", [f"resume={out}", "sft.enabled=false"])) == out

    (out / "config.yaml").write_text(saved.replace("  off_policy_threads: 0\n", ""))
    with pytest.raises(ConfigError) as e:  # control: a non-default value is a difference
        parts.run_folder(load_config("train", [f"resume={out}", "sft.enabled=false", "trainer.off_policy_threads=1"]))
    assert "trainer.off_policy_threads: '(absent)' -> 1" in e.value.problems


def test_resume_needs_a_run_folder(tmp_path):
    with pytest.raises(ConfigError, match="no run there"):
        parts.run_folder(load_config("train", [f"resume={tmp_path}"]))


def test_the_cli_refuses_before_loading_the_model(monkeypatch, capsys, tmp_path):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(parts, "model_dir", no_model)
    (tmp_path / "metrics.jsonl").write_text("{}\n")
    assert main(["train", f"out_dir={tmp_path}"]) == 2
    assert "already holds files" in capsys.readouterr().err
    assert main(["train", f"resume={tmp_path}"]) == 2
    assert "no run there" in capsys.readouterr().err


def _no_model(monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(parts, "model_dir", no_model)


RUN = ("env=math", "credit=grpo", "sft.enabled=false", "trainer.steps=3", "env.max_turns=2", "trainer.optim.lr=3e-4")


def test_resume_reads_the_run_config_from_its_folder(tmp_path):
    out = _saved_run(tmp_path, *RUN)
    cfg = resume.load("train", [f"resume={out}"])  # nothing retyped
    assert (cfg.env.id, cfg.credit.method, cfg.env.max_turns) == ("rlgym/Math-v0", "grpo", 2)
    assert cfg.trainer.optim.lr == 3e-4
    assert cfg.sft.enabled is False and cfg.trainer.steps == 3
    assert cfg.resume == str(out) and cfg.out_dir == str(out)
    assert parts.run_folder(cfg) == out
    # overrides equal to the saved values are fine (the original command again), and the step budget may grow
    same = resume.load(
        "train", [f"resume={out}", "env.max_turns=2", *RUN[:-2], "trainer.optim.lr=0.0003", "trainer.steps=9"]
    )
    assert same.trainer.steps == 9 and same.env.max_turns == 2 and same.trainer.optim.lr == 3e-4
    assert parts.run_folder(same) == out and "steps: 9" in (out / "config.yaml").read_text()
    # a group option sets every key of its file: repeated without the run's override of one of them, it differs
    with pytest.raises(ConfigError, match=r"env.max_turns is 2 in the run's saved config, `env=math` gives 3"):
        resume.load("train", [f"resume={out}", "env=math"])


def test_resume_refuses_a_conflicting_override_in_one_line(tmp_path, monkeypatch, capsys):
    _no_model(monkeypatch)
    out = _saved_run(tmp_path, *RUN)
    assert main(["train", f"resume={out}", "trainer.optim.lr=1e-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "trainer.optim.lr" in err and "0.0003" in err and "0.001" in err, err

    assert main(["train", f"resume={out}", "credit=gated"]) == 2  # a group option that differs
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "credit.method" in err and "'grpo'" in err and "'gated'" in err, err


def test_resume_refuses_fewer_steps_than_the_run_has_done(tmp_path, monkeypatch, capsys):
    _no_model(monkeypatch)
    out = _saved_run(tmp_path, *RUN)
    (out / "checkpoints" / "step_000002").mkdir(parents=True)
    (out / "checkpoints" / "step_000002" / "state.json").write_text('{"step": 2}')
    assert main(["train", f"resume={out}", "trainer.steps=1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "trainer.steps=1" in err and "2 steps" in err, err
    assert resume.load("train", [f"resume={out}", "trainer.steps=2"]).trainer.steps == 2


def test_print_config_of_a_resumed_run_shows_its_saved_config(tmp_path, capsys):
    out = _saved_run(tmp_path, *RUN)
    assert main(["train", "--print-config", f"resume={out}"]) == 0
    printed = capsys.readouterr().out
    assert "id: rlgym/Math-v0" in printed and "method: grpo" in printed and "max_turns: 2" in printed
