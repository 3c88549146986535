"""The built wheel works without the checkout (slow): it ships the configs/ tree, so an installed
`rlgym train` prints its config and trains one step from another folder, and users' own config
folders add options (`--config-path`, `$RLGYM_CONFIG_PATH`)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv (system site-packages for torch & co.) with the project installed from its wheel."""
    pytest.importorskip("build")  # the dev extra has it: CI runs this test
    tmp = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("rlgym_llm-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(tmp / "venv")], check=True)
    pip = [
        str(tmp / "venv" / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        "-q",
        str(wheel),
    ]
    subprocess.run(pip, check=True, timeout=300)
    return tmp / "venv"


def _run(venv, args, cwd, **env):
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RLGYM_CONFIG_DIR", "RLGYM_CONFIG_PATH")}
    return subprocess.run(
        [str(venv / "bin" / "rlgym"), *args], cwd=cwd, capture_output=True, text=True, timeout=400, env={**clean, **env}
    )


def test_the_installed_package_comes_from_the_wheel_and_finds_its_configs(venv, tmp_path):
    code = "import rlgym_llm.config as c; print(c.__file__); print(c.default_config_dir())"
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    module, configs = out.stdout.split()
    assert module.startswith(str(venv)) and configs.startswith(str(venv)) and configs.endswith("_configs")
    assert (Path(configs) / "env" / "counter.yaml").exists()


def test_print_config_and_one_training_step_outside_the_checkout(venv, tmp_path):
    shown = _run(venv, ["train", "--print-config"], tmp_path)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "rlgym/Math-v0" in shown.stdout  # the main job's env
    args = ["train", f"out_dir={tmp_path / 'run'}", "sft.enabled=false", "progress=false", "trainer.steps=1"]
    args += ["trainer.tasks_per_step=2", "trainer.group_size=2", "trainer.eval_tasks=0", "trainer.threads=1"]
    trained = _run(venv, args, tmp_path)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1


def test_users_add_their_own_config_folders(venv, tmp_path):
    mine = tmp_path / "my_configs" / "env"
    mine.mkdir(parents=True)
    (mine / "short.yaml").write_text(
        "id: toy/Counter-v0\nentry_point: rlgym_llm.testing.toy:CounterEnv\nmax_turns: 2\n"
        "oracle: rlgym_llm.testing.toy:CounterPlayer\n"
    )
    flag = _run(venv, ["train", "--config-path", str(tmp_path / "my_configs"), "env=short", "--print-config"], tmp_path)
    assert flag.returncode == 0, flag.stderr[-2000:]
    assert "max_turns: 2" in flag.stdout
    env = _run(venv, ["train", "env=short", "--print-config"], tmp_path, RLGYM_CONFIG_PATH=str(tmp_path / "my_configs"))
    assert env.returncode == 0 and "max_turns: 2" in env.stdout
    unknown = _run(venv, ["train", "env=short", "--print-config"], tmp_path)
    assert unknown.returncode == 2 and "env=short" in unknown.stderr
