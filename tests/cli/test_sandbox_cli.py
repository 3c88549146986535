"""`rlgym sandbox exec`: one command in a backend, the ExecResult printed as JSON."""

import json
import subprocess
import sys

import pytest

from rlgym_llm.cli.main import main


def run_cli(capsys, *argv):
    code = main(["sandbox", "exec", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_runs_a_command_and_prints_the_result(capsys):
    code, result, _ = run_cli(
        capsys, "--", sys.executable, "-c", "import sys; print(6 * 7); print('e', file=sys.stderr)"
    )
    assert code == 0
    assert result["stdout"] == "42\n" and result["stderr"] == "e\n"
    assert result["exit_code"] == 0 and result["ok"] is True and result["timed_out"] is False


def test_limits_come_from_flags(capsys):
    code, result, _ = run_cli(capsys, "--wall", "0.5", "--", "sh", "-c", "sleep 5")
    assert code == 1 and result["timed_out"] is True and result["duration_s"] < 4
    code, result, _ = run_cli(capsys, "--output-bytes", "10", "--", "python3", "-c", "print('x' * 100)")
    assert code == 0 and result["stdout"] == "x" * 10 and result["truncated"] is True
    code, result, _ = run_cli(capsys, "--memory-mb", "64", "--", "python3", "-c", "b = bytearray(200 * 2**20)")
    assert code == 1 and result["oom_killed"] is True
    code, result, _ = run_cli(capsys, "--", "python3", "-c", "raise SystemExit(3)")
    assert code == 1 and result["exit_code"] == 3


def test_stdin_from_a_file(capsys, tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("abc")
    code, result, _ = run_cli(capsys, "--stdin", str(path), "--", "python3", "-c", "print(input().upper())")
    assert code == 0 and result["stdout"] == "ABC\n"


def test_usage_errors_exit_2(capsys):
    code, result, err = run_cli(capsys)
    assert code == 2 and result is None and "no command given" in err
    code, _, err = run_cli(capsys, "--memory-mb", "1", "--", "true")
    assert code == 2 and "memory_mb" in err
    code, _, err = run_cli(capsys, "--stdin", "/no/such/file", "--", "true")
    assert code == 2 and "--stdin" in err


def test_the_installed_command_in_a_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "rlgym_llm.cli.main", "sandbox", "exec", "--", "sh", "-c", "echo $HOME; exit 4"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["exit_code"] == 4 and result["stdout"].startswith("/")


@pytest.mark.docker
def test_docker_backend(capsys):
    code, result, _ = run_cli(capsys, "--backend", "docker", "--", "python3", "-c", "import os; print(os.getuid())")
    assert code == 0 and result["stdout"] == "65534\n"
    code, result, _ = run_cli(capsys, "--backend", "docker", "--wall", "1", "--", "sleep", "10")
    assert code == 1 and result["timed_out"] is True
