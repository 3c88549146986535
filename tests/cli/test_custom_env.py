"""Your own env through the CLI: a module path (`env.entry_point=my_envs:Cls`), a module that
registers its envs (`env.module=`), `rlgym check-env` on a local module, and `env.kwargs` replaced,
not merged with the demo's, when another env is named."""

import sys
import textwrap

import pytest

from rlgym_llm.cli.main import main
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError

MODULE = textwrap.dedent(
    """
    import rlgym_llm
    from rlgym_llm.testing.toy import CounterEnv


    class BigCounter(CounterEnv):
        '''Counter with its own module.'''


    rlgym_llm.register("me/BigCounter-v0", "{name}:BigCounter", max_turns=3)
    """
)


@pytest.fixture
def local_module(tmp_path, monkeypatch, request):
    name = f"my_envs_{request.node.name.split('[')[0][-20:]}"
    (tmp_path / f"{name}.py").write_text(MODULE.format(name=name))
    monkeypatch.chdir(tmp_path)  # a module in the working directory, as a user writes one
    yield name
    sys.modules.pop(name, None)
    if str(tmp_path) in sys.path:
        sys.path.remove(str(tmp_path))


def test_a_module_path_names_an_env_and_the_demo_kwargs_are_not_merged(local_module):
    cfg = load_config("train", [f"env.entry_point={local_module}:BigCounter", "sft.enabled=false"])
    assert cfg.env.id == "custom/BigCounter-v0"
    # nothing of the default Counter env section: its max_target kwarg, oracle and turn limit
    assert cfg.env.kwargs == {} and cfg.env.oracle is None and cfg.env.max_turns == 6
    cfg = load_config("eval", [f"env.entry_point={local_module}:BigCounter", "env.kwargs.max_target=9"])
    assert cfg.env.kwargs == {"max_target": 9}
    with pytest.raises(ConfigError, match="SFT warm-up needs an oracle for custom/BigCounter-v0"):
        load_config("train", [f"env.entry_point={local_module}:BigCounter"])


def test_a_module_that_registers_its_envs(local_module):
    cfg = load_config("train", [f"env.module={local_module}", "env.id=me/BigCounter-v0", "sft.enabled=false"])
    assert cfg.env.id == "me/BigCounter-v0" and cfg.env.kwargs == {}
    with pytest.raises(ConfigError, match=r"did you mean `env.kwargs.max_target`\?"):
        load_config("train", [f"env.module={local_module}", "env.id=me/BigCounter-v0", "env.kwargs.max_targt=2"])


def test_choosing_a_shipped_env_replaces_the_kwargs_of_the_default_one():
    assert load_config("train", ["env=math"]).env.kwargs == {
        "difficulty": 0,
        "kinds": ["arithmetic"],
        "prompt": "short",
    }
    # Counter's `max_target` is gone: only the chosen env's own tier remains
    assert load_config("train", ["env=gui"]).env.kwargs == {"task_apps": ["settings"], "max_subgoals": 1}


def test_check_env_on_a_local_module(local_module, capsys):
    assert main(["check-env", f"{local_module}:BigCounter", "--fuzz", "20"]) == 0
    assert capsys.readouterr().out.startswith("custom/BigCounter-v0: 5 checks passed")
    assert main(["check-env", "me/BigCounter-v0", "--module", local_module, "--fuzz", "20"]) == 0
    assert capsys.readouterr().out.startswith("me/BigCounter-v0: 5 checks passed")
    assert main(["check-env", f"{local_module}:NoSuchEnv"]) == 2
    assert "AttributeError" in capsys.readouterr().err
