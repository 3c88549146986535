"""The `rlgym` command, run as a user runs it: in a subprocess, with envs from an installed plugin."""

import os
import shutil
import subprocess
import sys

import pytest

import rlgym_llm

TOY_PLUGIN = """
from rlgym_llm import register
from rlgym_llm.testing import GuessNumberEnv


class LeakyEnv(GuessNumberEnv):
    def opening(self, task):
        return [{"role": "user", "content": f"{task.prompt} It is {task.answer}."}]


def register_envs():
    register("toy/Guess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
    register("toy/Leaky-v0", "toyplug:LeakyEnv")
    register("toy/Missing-v0", "toyplug_missing:Env")
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    """PYTHONPATH for a subprocess that sees a fake installed plugin registering the toy ids."""
    site = tmp_path_factory.mktemp("site")
    info = site / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{rlgym_llm.ENTRY_POINT_GROUP}]\ntoy = toyplug:register_envs\n")
    (site / "toyplug.py").write_text(TOY_PLUGIN)
    return os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])


def rlgym(plugin_path, *args):
    path = os.pathsep.join(p for p in (plugin_path, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "rlgym_llm.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_version(plugin_path):
    out = rlgym(plugin_path, "--version")
    assert (out.returncode, out.stdout.strip()) == (0, f"rlgym-llm {rlgym_llm.__version__}")


def test_envs_lists_built_in_and_plugin_ids_with_entry_points_and_turn_limits(plugin_path):
    out = rlgym(plugin_path, "envs")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines()}
    assert rows["toy/Guess-v0"] == ["rlgym_llm.testing.toy:GuessNumberEnv", "max_turns=10"]
    assert rows["toy/Leaky-v0"] == ["toyplug:LeakyEnv", "max_turns=none"]
    assert rows["rlgym/Math-v0"] == ["rlgym_envs.math.env:MathEnv", "max_turns=6"]
    assert rows["toy/Counter-v0"] == ["rlgym_llm.testing.toy:CounterEnv", "max_turns=4"]  # the default env
    assert list(rows) == sorted(rows)


def test_envs_filters_by_namespace(plugin_path):
    out = rlgym(plugin_path, "envs", "--namespace", "toy")
    ids = ["toy/Counter-v0", "toy/Guess-v0", "toy/Leaky-v0", "toy/Missing-v0"]
    assert [line.split()[0] for line in out.stdout.splitlines()] == ids


def test_check_env_passes_a_good_env(plugin_path):
    out = rlgym(plugin_path, "check-env", "toy/Guess-v0", "--fuzz", "40", "--seed", "7")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("toy/Guess-v0: 5 checks passed")
    assert [line.split()[:2] for line in lines[1:]] == [
        ["ok", name] for name in ("gymnasium", "api", "determinism", "secrets", "fuzz")
    ]
    assert "40 hostile actions" in out.stdout


def test_check_env_fails_a_leaky_env_and_names_the_check(plugin_path):
    out = rlgym(plugin_path, "check-env", "toy/Leaky-v0", "--fuzz", "20")
    assert out.returncode == 1
    assert "FAIL secrets" in " ".join(out.stdout.split())
    assert "contains its ground truth" in out.stdout
    assert out.stderr.strip().endswith("check-env: toy/Leaky-v0 failed secrets")


def test_check_env_fails_an_env_that_cannot_be_built(plugin_path):
    out = rlgym(plugin_path, "check-env", "toy/Missing-v0")
    assert out.returncode == 1
    assert "raised ModuleNotFoundError" in out.stdout and "failed make" in out.stderr


def test_check_env_unknown_id_exits_2_with_suggestions(plugin_path):
    out = rlgym(plugin_path, "check-env", "toy/Gess-v0")
    assert out.returncode == 2
    assert out.stdout == ""
    assert "No environment registered as 'toy/Gess-v0'. Did you mean 'toy/Guess-v0'" in out.stderr


def test_usage_errors_exit_2(plugin_path):
    assert rlgym(plugin_path).returncode == 2
    assert rlgym(plugin_path, "check-env").returncode == 2  # missing ID
    assert rlgym(plugin_path, "check-env", "toy/Guess-v0", "--fuzz", "-1").returncode == 2


@pytest.mark.skipif(shutil.which("rlgym") is None, reason="the `rlgym` script is not installed")
def test_the_installed_script_runs():
    out = subprocess.run(["rlgym", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("rlgym-llm ")
