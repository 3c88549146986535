"""The credit-method registry: every method declared once, in its module; the docs table, the config's
options and validation come from it; a new method is one file (docs/adding_a_credit_method.md)."""

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from rlgym_llm.credit import METHODS
from rlgym_llm.credit.registry import markdown_table

ROOT = Path(__file__).resolve().parents[2]
CREDIT_DOC = ROOT / "docs" / "credit.md"
GUIDE = ROOT / "docs" / "adding_a_credit_method.md"


def test_the_docs_table_is_the_registry():
    text = CREDIT_DOC.read_text()
    found = re.search(r"<!-- methods table:.*?-->\n(.*?)\n<!-- end of methods table -->", text, re.DOTALL)
    assert found, "docs/credit.md lost its generated methods table markers"
    assert found.group(1) == markdown_table(), f"regenerate the table in docs/credit.md:\n{markdown_table()}"


def test_the_shipped_methods_are_registered_with_their_own_parameters():
    assert set(METHODS) == {"grpo", "drgrpo", "rloo", "turn_grpo", "gated", "dra", "igpo", "spa", "gigpo"}
    for name, method in METHODS.items():
        assert method.name == name and dataclasses.is_dataclass(method.params)
        params = method.params()  # every parameter has a default (the authors' value where published)
        assert params.outcome == "reward"
        fields = {f.name for f in dataclasses.fields(method.params)}
        assert not fields & set(method.inputs), "a per-step input is not a setting"
        assert method.params.__doc__ and all(f in method.params.__doc__ for f in fields if f not in ("ddof", "eps"))


def test_choice_parameters_are_literals():
    # `Literal` fields are what the generic validator checks (with a suggestion for a near miss)
    literal = {
        (name, f.name)
        for name, m in METHODS.items()
        for f in dataclasses.fields(m.params)
        if typing.get_origin(typing.get_type_hints(m.params)[f.name]) is typing.Literal
    }
    assert {
        ("turn_grpo", "norm"),
        ("gated", "level"),
        ("igpo", "kind"),
        ("igpo", "norm"),
        ("gigpo", "scale"),
    } <= literal


def test_every_per_step_input_has_a_trainer_side_builder():
    pytest.importorskip("torch")
    from rlgym_llm.train.credit_inputs import INPUTS

    assert {i for m in METHODS.values() for i in m.inputs} <= set(INPUTS)


@pytest.mark.timeout(300)
def test_a_new_method_is_one_file(tmp_path):
    """The guide's example module, written into (a copy of) the package, is a config option, validated, trained
    with, and in the docs table; nothing else is edited."""
    pytest.importorskip("torch")
    code = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert code, "the guide lost its example module"
    script = """
import json, sys
from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit.registry import markdown_table

cfg = load_config("train", ["credit=rank", "credit.params.scale=2.0"])
assert cfg.credit.params == {"outcome": "reward", "scale": 2.0, "ties": "average"}, cfg.credit.params
problems = []
for overrides in (["credit=rnak"], ["credit=rank", "credit.params.scael=2"], ["credit=rank", "credit.params.scale=-1"]):
    try:
        load_config("train", overrides)
    except ConfigError as e:
        problems += e.problems
assert "| `rank` | centred ranks (fitness shaping) |" in markdown_table()
out = sys.argv[1]
import rlgym_llm.credit
assert rlgym_llm.credit.__file__.startswith(sys.argv[2]), rlgym_llm.credit.__file__
args = ["train", f"out_dir={out}", "credit=rank", "sft.enabled=false", "progress=false", "trainer.steps=1",
        "trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0", "trainer.threads=1"]
assert main(args) == 0
print(json.dumps(problems))
"""
    # A copy of the package takes the new file, so that tests running beside this one (pytest -n 2)
    # never see a method that only this test adds.
    package = tmp_path / "pkg"
    shutil.copytree(ROOT / "rlgym_llm", package / "rlgym_llm", ignore=shutil.ignore_patterns("__pycache__"))
    module = package / "rlgym_llm" / "credit" / "zz_guide_example_rank.py"
    assert not module.exists()
    module.write_text(code.group(1))
    env = {**os.environ, "PYTHONPATH": str(package), "RLGYM_CONFIG_DIR": str(ROOT / "configs")}
    run = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "run"), str(package)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=tmp_path,  # not the checkout: `python -c` puts the cwd first on sys.path
    )
    assert run.returncode == 0, run.stderr[-3000:]
    problems = run.stdout.strip().splitlines()[-1]
    assert "did you mean `credit=rank`?" in problems
    assert "did you mean `credit.params.scale`?" in problems
    assert "credit.params.scale must be > 0, got -1" in problems
