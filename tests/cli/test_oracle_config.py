"""`env.oracle` of your own env: a class in a module of the working directory (as `env.module=` finds
one), checked with the config, so a typo is reported before the model loads; and an env without an
oracle cannot be warmed up (one line naming both fixes)."""

import sys

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError

ORACLE = """
class EchoOracle:
    def act(self, messages):
        return {"role": "assistant", "content": "", "tool_calls": []}
"""


@pytest.fixture
def oracle_module(tmp_path, monkeypatch):
    name = "my_oracles_for_test_oracle_config"
    (tmp_path / f"{name}.py").write_text(ORACLE)
    monkeypatch.chdir(tmp_path)  # a module in the working directory, as a user writes one
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield name
    sys.modules.pop(name, None)


def test_an_oracle_in_the_working_directory_is_found(oracle_module):
    from rlgym_llm.recipes import parts

    cfg = load_config("train", ["env=counter", f"env.oracle={oracle_module}:EchoOracle"])
    assert callable(parts.oracle_factory(cfg.env.oracle))  # what the warm-up builds its oracle with


def test_an_oracle_that_cannot_be_imported_is_a_config_error(oracle_module, capsys):
    with pytest.raises(ConfigError, match=rf"`env.oracle={oracle_module}:EchoOracel` cannot be imported: Attr"):
        load_config("train", ["env=counter", f"env.oracle={oracle_module}:EchoOracel"])
    with pytest.raises(ConfigError, match=r"`env.oracle=no_such_module:Oracle` cannot be imported: ModuleNotFound"):
        load_config("train", ["env=counter", "env.oracle=no_such_module:Oracle"])
    with pytest.raises(ConfigError, match=r"`env.oracle=EchoOracle` must be module:Class"):
        load_config("train", ["env=counter", "env.oracle=EchoOracle"])
    assert main(["train", "env=counter", f"env.oracle={oracle_module}:EchoOracel"]) == 2  # before any model loads
    assert "cannot be imported" in capsys.readouterr().err


def test_a_warm_up_without_an_oracle_says_both_fixes(capsys):
    assert main(["train", "env.entry_point=rlgym_llm.testing.toy:CounterEnv"]) == 2
    err = capsys.readouterr().err
    assert (
        "SFT warm-up needs an oracle for custom/CounterEnv-v0: set env.oracle=module:Class, or sft.enabled=false" in err
    )
