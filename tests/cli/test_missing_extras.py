"""A missing optional package is named in the error, with the extra that installs it: `rlgym train`
without transformers says transformers (not torch), without torch says torch, and never prints a
traceback."""

import subprocess
import sys

import pytest

from rlgym_llm.core.errors import MissingDependencyError

pytest.importorskip("torch", reason="needs the train extra")

# `sys.modules[name] = None` makes every later `import name` fail as if it were not installed
HIDE_AND_RUN = "import sys; sys.modules[{name!r}] = None; from rlgym_llm.cli.main import main; sys.exit(main({argv!r}))"


@pytest.mark.parametrize("missing", ["transformers", "torch"])
def test_rlgym_train_names_the_missing_package_and_its_extra(tmp_path, tiny_model_dir, missing):
    argv = ["train", f"out_dir={tmp_path / 'run'}", "sft.enabled=false", "trainer.steps=1", "progress=false"]
    run = subprocess.run(
        [sys.executable, "-c", HIDE_AND_RUN.format(name=missing, argv=argv)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert "Traceback" not in run.stderr, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, run.stderr[-2000:]
    assert f"`{missing}`" in errors[0] and "pip install 'rlgym-llm[train]'" in errors[0], errors[0]
    if missing == "transformers":
        assert "`torch`" not in errors[0]


def test_the_tiny_model_names_the_module_that_failed(monkeypatch, tmp_path):
    from rlgym_llm.rollout.tiny_model import build_tiny_model

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingDependencyError) as e:
        build_tiny_model(tmp_path / "tiny")
    assert "needs `transformers`" in str(e.value) and "rlgym-llm[train]" in str(e.value)
    assert "`torch`" not in str(e.value)


def test_loading_a_model_folder_names_transformers(monkeypatch, tiny_model_dir):
    from rlgym_llm.recipes import parts

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingDependencyError, match=r"needs `transformers`.*pip install 'rlgym-llm\[train\]'"):
        parts.load_model(tiny_model_dir)


def test_the_error_takes_the_top_level_module_of_the_import_error():
    try:
        import rlgym_no_such_package.sub  # noqa: F401
    except ImportError as e:
        error = MissingDependencyError.of(e, "a feature", extra="train")
    assert "a feature needs `rlgym_no_such_package`" in str(error) and "rlgym-llm[train]" in str(error)
    assert error.name == "rlgym_no_such_package"
    # an installed package that lacks a name (too old) is said so, not "not installed"
    old = ImportError("cannot import name 'Qwen2Config' from 'transformers'", name="transformers")
    assert "cannot import name 'Qwen2Config'" in str(MissingDependencyError.of(old, "the tiny model"))
    assert "rlgym-llm[train]" in str(MissingDependencyError.of(old, "the tiny model"))  # the extra, from the module
