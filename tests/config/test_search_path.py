"""Users' own config folders add options to the shipped tree (`--config-path`, `$RLGYM_CONFIG_PATH`)."""

import pytest

from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError

SHORT = "id: toy/Counter-v0\nentry_point: rlgym_llm.testing.toy:CounterEnv\nmax_turns: 2\n"


@pytest.fixture
def mine(tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "short.yaml").write_text(SHORT)
    return tmp_path


def test_a_folder_of_ones_own_adds_group_options(mine, monkeypatch):
    monkeypatch.delenv("RLGYM_CONFIG_PATH", raising=False)
    assert load_config("train", ["env=short", "sft.enabled=false"], extra=[mine]).env.max_turns == 2
    with pytest.raises(ConfigError, match="unknown option `env=short`"):
        load_config("train", ["env=short"])
    monkeypatch.setenv("RLGYM_CONFIG_PATH", str(mine))
    assert load_config("train", ["env=short", "sft.enabled=false"]).env.max_turns == 2


def test_a_shipped_option_keeps_its_file(mine):
    (mine / "env" / "counter.yaml").write_text(SHORT.replace("max_turns: 2", "max_turns: 7"))
    assert load_config("train", ["env=counter"], extra=[mine]).env.max_turns == 4  # configs/env/counter.yaml
