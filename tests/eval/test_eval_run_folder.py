"""`rlgym eval` keeps `rlgym train`'s rule for run folders: a new timestamped folder by default, and an
`out_dir` that already holds files (an earlier report) is refused before anything loads, never
overwritten."""

import re

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.recipes import eval as evaluation
from rlgym_llm.recipes import parts


def test_the_default_eval_folder_is_new_and_timestamped():
    out = load_config("eval").out_dir
    assert re.fullmatch(r"runs/eval/\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", out), out


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(parts, "model_dir", refuse)


def test_an_out_dir_holding_a_report_is_refused_before_loading_the_model(no_model, tmp_path, capsys):
    (tmp_path / "report.md").write_text("an earlier evaluation\n")
    assert main(["eval", f"out_dir={tmp_path}", "progress=false"]) == 2
    err = capsys.readouterr().err
    assert f"`out_dir={tmp_path}` already holds files" in err and "choose a new out_dir" in err
    assert "resume=" not in err  # only `rlgym train` resumes
    assert (tmp_path / "report.md").read_text() == "an earlier evaluation\n"  # untouched


def test_the_library_call_refuses_too(no_model, tmp_path):
    (tmp_path / "eval.json").write_text("{}")
    with pytest.raises(ConfigError, match="already holds files"):
        evaluation.run(load_config("eval", [f"out_dir={tmp_path}"]))


def test_a_new_or_empty_out_dir_is_fine(tmp_path):
    assert parts.run_folder(load_config("eval", [f"out_dir={tmp_path}"]), "eval", create=False) == tmp_path
    new = tmp_path / "a" / "b"
    assert parts.run_folder(load_config("eval", [f"out_dir={new}"]), "eval", create=False) == new
