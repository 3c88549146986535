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


    class OwnLimitCounter(CounterEnv):
        '''Counter whose class states its turn limit.'''

        max_turns = 2


    class PlainCounter(CounterEnv):
        '''Counter with no limit of its own.'''


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
    # nothing of the default Counter env section: its max_target kwarg, oracle and turn limit (the
    # env's own limit holds: null)
    assert cfg.env.kwargs == {} and cfg.env.oracle is None and cfg.env.max_turns is None
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


def _limits(env) -> tuple[int, int]:
    """The turn limits the rollouts and the env factory apply."""
    from rlgym_llm.recipes import parts

    rollout = parts.rollout_config(parts.PolicyConfig(), env, parts.AgentConfig(), 2, 1.0).max_turns
    built = parts.env_factory(env)()
    try:
        return rollout, built.max_turns
    finally:
        built.close()


@pytest.mark.parametrize(
    ("overrides", "limit", "source"),
    [
        (["env.module={m}", "env.id=me/BigCounter-v0"], 3, "from the env's registration"),
        (["env.entry_point={m}:BigCounter"], 3, "from the registration of me/BigCounter-v0"),
        (["env.entry_point={m}:OwnLimitCounter"], 2, "from OwnLimitCounter.max_turns"),
        (["env.entry_point={m}:PlainCounter"], 6, "the default: the env sets no limit"),
        (["env.module={m}", "env.id=me/BigCounter-v0", "env.max_turns=5"], 5, "env.max_turns in the config"),
        (["env.entry_point={m}:OwnLimitCounter", "env.max_turns=1"], 1, "env.max_turns in the config"),
    ],
    ids=["registration", "entry-point-registration", "class-attribute", "default", "config", "config-wins"],
)
def test_the_env_own_turn_limit_holds_unless_the_config_sets_one(local_module, overrides, limit, source):
    from rlgym_llm.recipes import parts

    cfg = load_config("train", [o.format(m=local_module) for o in overrides] + ["sft.enabled=false"])
    assert _limits(cfg.env) == (limit, limit)
    assert parts.turn_limit(cfg.env)[0] == limit and source in parts.turn_limit(cfg.env)[1]


def test_shipped_env_configs_keep_their_own_turn_limits():
    from rlgym_llm.recipes import parts

    shipped = {"counter": 4, "math": 3, "search": 4, "gui": 5, "code": 8, "swe": 12, "ladder": 12}
    shipped.update(twentyq=6, bugfix=8)
    for name, limit in shipped.items():
        env = load_config("train", [f"env={name}"]).env
        assert env.max_turns == limit and parts.turn_limit(env) == (limit, "env.max_turns in the config"), name


def test_rlgym_train_prints_the_turn_limit_and_where_it_comes_from(local_module, monkeypatch, capsys, tmp_path):
    from rlgym_llm.recipes import parts

    def no_model(*args, **kwargs):
        raise ConfigError(["stop here: the model is not needed"])

    monkeypatch.setattr(parts, "model_dir", no_model)
    argv = ["train", f"env.module={local_module}", "env.id=me/BigCounter-v0", "sft.enabled=false"]
    assert main([*argv, f"out_dir={tmp_path / 'run'}", "progress=false"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "max_turns=" in line]
    assert lines == ["env me/BigCounter-v0: max_turns=3 (from the env's registration)"], err
    # the run folder's config says the limit the run used
    assert "max_turns: 3" in (tmp_path / "run" / "config.yaml").read_text()
