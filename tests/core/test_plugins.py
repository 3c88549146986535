"""Third-party envs arrive through the `rlgym_llm.envs` entry-point group, as from an installed package.

Each test fakes an installed distribution: a `*.dist-info` folder with METADATA and
entry_points.txt on sys.path, which is all `importlib.metadata` looks for.
"""

import logging
import sys
import textwrap
from pathlib import Path

import gymnasium
import pytest

import rlgym_llm

# load_plugins(force=True) re-runs the built-in hook too, and Gymnasium warns for each id it re-registers.
pytestmark = pytest.mark.filterwarnings("ignore:.*Overriding environment")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plugin_package"

DEMO_PLUGIN = '''
from rlgym_llm import register
from rlgym_llm.testing import GuessNumberEnv


class DemoEnv(GuessNumberEnv):
    """A plugin's env: the toy guessing game under another name."""


def register_envs():
    register("demo/Guess-v0", "demo_plugin:DemoEnv", max_turns=10)
'''


def install_fake_distribution(site: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Write what `pip install` would leave behind: the modules and a dist-info with entry points."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    lines = "\n".join(f"{key} = {value}" for key, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{rlgym_llm.ENTRY_POINT_GROUP}]\n{lines}\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A fresh site-packages on sys.path; ids and modules the plugins add are removed afterwards."""
    before_ids, before_modules = set(gymnasium.registry), set(sys.modules)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for env_id in set(gymnasium.registry) - before_ids:
        gymnasium.registry.pop(env_id)
        rlgym_llm.core.registry._max_turns.pop(env_id, None)
    for module in set(sys.modules) - before_modules:
        if module.startswith(("demo_plugin", "broken_plugin", "rlgym_demo_plugin")):
            del sys.modules[module]


def test_an_installed_plugin_registers_its_envs(site):
    install_fake_distribution(site, "demo_plugin", {"demo": "demo_plugin:register_envs"}, {"demo_plugin": DEMO_PLUGIN})
    assert "demo/Guess-v0" not in rlgym_llm.list_envs()
    rlgym_llm.load_plugins(force=True)
    assert "demo/Guess-v0" in rlgym_llm.list_envs("demo")
    assert "demo_plugin" in sys.modules  # the hook ran; the env class is imported only by make()
    env = rlgym_llm.make("demo/Guess-v0")
    assert type(env.unwrapped).__name__ == "DemoEnv"
    messages, info = env.reset(seed=3)
    assert messages[0]["role"] == "user" and info["task_id"].startswith("guess-")
    assert env.max_turns == 10  # the plugin's registered turn limit is applied


def test_a_broken_plugin_is_logged_and_the_others_still_load(site, caplog):
    install_fake_distribution(
        site,
        "broken_plugin",
        {"broken": "broken_plugin:register_envs", "missing": "broken_plugin:no_such_function"},
        {"broken_plugin": "def register_envs():\n    raise RuntimeError('the plugin has a bug')\n"},
    )
    install_fake_distribution(site, "demo_plugin", {"demo": "demo_plugin:register_envs"}, {"demo_plugin": DEMO_PLUGIN})
    with caplog.at_level(logging.WARNING, logger="rlgym_llm.core.registry"):
        rlgym_llm.load_plugins(force=True)  # must not raise
    messages = [r.getMessage() for r in caplog.records]
    assert any("'broken'" in m and "RuntimeError: the plugin has a bug" in m for m in messages)
    assert any("'missing'" in m and "AttributeError" in m for m in messages)
    assert "demo/Guess-v0" in rlgym_llm.list_envs()


def test_the_example_plugin_package_works_as_declared(site, monkeypatch):
    """examples/plugin_package: its pyproject's entry point, installed, registers an env that passes check_env."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    entry_points = project["project"]["entry-points"][rlgym_llm.ENTRY_POINT_GROUP]
    install_fake_distribution(site, "rlgym_demo_plugin", entry_points, {})
    monkeypatch.syspath_prepend(str(EXAMPLE))  # the package's source, as `pip install -e` would expose it
    rlgym_llm.load_plugins(force=True)
    assert rlgym_llm.list_envs("demo") == ["demo/Reverse-v0"]
    report = rlgym_llm.check_env("demo/Reverse-v0", n_fuzz=100)
    assert report.ok, report.format()
    env = rlgym_llm.make("demo/Reverse-v0")
    env.reset(options={"word": "planet"})
    answer = {"role": "assistant", "tool_calls": [{"id": "1", "name": "submit", "arguments": {"answer": "tenalp"}}]}
    _, reward, terminated, _, info = env.step(answer)
    assert (reward, terminated, info["outcome"]["reward"]) == (1.0, True, 1.0)
