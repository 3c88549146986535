"""The Makefile as a newcomer meets it: `make install` says what it is doing, every target runs its
tools through `$(PY)` (a venv's python works without activating the venv), and `make demo` never
deletes an earlier run."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = ROOT / "Makefile"
PY = "/opt/some-venv/bin/python"
# Tools a venv puts on PATH only once activated: called bare, they are whatever PATH finds.
BARE_TOOLS = {"rlgym", "ruff", "mypy", "pytest", "pip", "pip3", "python", "python3", "hydra", "torchrun"}
SHELL_WORDS = {"then", "else", "do", "if", "elif", "!", "{", "(", "exec", "command"}

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _dry_run(*args: str) -> list[str]:
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-f", str(MAKEFILE), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def _targets() -> list[str]:
    phony = re.search(r"^\.PHONY:(.*)$", MAKEFILE.read_text(), re.MULTILINE)
    assert phony, "the Makefile lists its targets in .PHONY"
    return phony.group(1).split()


def _commands(line: str) -> list[str]:
    """The first word of each simple command of a shell line (after ;, &&, ||, |, subshells, keywords)."""
    words = []
    for part in re.split(r"&&|\|\||[;|()`]|\$\(", line):
        tokens = part.split()
        while tokens and (tokens[0] in SHELL_WORDS or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tokens[0])):
            tokens.pop(0)  # keywords, and VAR=value prefixes of a command
        if tokens:
            words.append(tokens[0])
    return words


def test_install_names_each_step_and_lets_pip_show_its_progress():
    lines = _dry_run("install", f"PY={PY}")
    steps = [line for line in lines if re.match(r"""^(echo\s+["']?)?== \[\d/\d\]""", line)]
    assert [re.search(r"\[(\d)/(\d)\]", s).groups() for s in steps] == [("1", "3"), ("2", "3"), ("3", "3")], lines
    assert "torch 2.13.0" in steps[0]
    pip_lines = [line for line in lines if " -m pip install" in line]
    assert len(pip_lines) == 3, lines
    for line in pip_lines:
        assert line.startswith(f"{PY} -m pip install"), line
        assert not re.search(r"(^|\s)(--quiet|-q+)(\s|$)", line), f"pip runs quiet: {line}"


@pytest.mark.parametrize("target", _targets())
def test_every_target_runs_python_tools_through_PY(target):
    lines = _dry_run(target, f"PY={PY}")
    bare = [(word, line) for line in lines for word in _commands(line) if word in BARE_TOOLS]
    assert not bare, f"`make {target}` calls {bare[0][0]} bare (use $(PY) -m ...): {bare[0][1]}"


def test_the_rlgym_module_runs_the_cli():
    out = subprocess.run(
        [os.environ.get("PYTHON", "python3"), "-m", "rlgym_llm.cli.main", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("rlgym-llm ")


FAKE_PYTHON = """#!/bin/sh
# Stands in for `python -m rlgym_llm.cli.main train out_dir=X`: refuses a folder that holds files,
# as rlgym train does, and writes one.
echo "$@" >> calls.txt
for arg in "$@"; do case "$arg" in out_dir=*) out="${arg#out_dir=}";; esac; done
if [ -n "$(ls -A "$out" 2>/dev/null)" ]; then echo "error: $out already holds files" >&2; exit 2; fi
mkdir -p "$out" && echo "$out" > "$out/config.yaml"
"""


def test_demo_never_deletes_a_run_and_runs_demo_names_the_newest(tmp_path):
    dry = "\n".join(_dry_run("demo", f"PY={PY}"))
    assert "rm " not in dry and f"{PY} -m rlgym_llm.cli.main train +experiment=demo" in dry, (
        dry
    )  # before running it for real
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    old = tmp_path / "runs" / "demo"
    old.mkdir(parents=True)
    (old / "metrics.jsonl").write_text("an earlier demo, from before runs/demo became a link\n")

    def demo() -> str:
        out = subprocess.run(
            ["make", "--no-print-directory", "-f", str(MAKEFILE), "demo", f"PY={fake}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    first = demo()
    time.sleep(1.1)  # the folders are named by the second
    demo()
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 2 and all(
        c.startswith("-m rlgym_llm.cli.main train +experiment=demo out_dir=runs/demo-") for c in calls
    )
    folders = [c.rpartition("out_dir=")[2] for c in calls]
    assert folders[0] != folders[1]
    for folder in folders:  # both runs are kept
        assert (tmp_path / folder / "config.yaml").read_text().strip() == folder
    link = tmp_path / "runs" / "demo"
    assert link.is_symlink() and link.resolve() == (tmp_path / folders[1]).resolve()
    kept = [p for p in (tmp_path / "runs").iterdir() if (p / "metrics.jsonl").exists()]
    assert len(kept) == 1 and "an earlier demo" in (kept[0] / "metrics.jsonl").read_text()
    assert str(kept[0].relative_to(tmp_path)) in first  # moved aside, and it said so
