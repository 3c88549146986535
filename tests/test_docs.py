"""Every code block of README.md and docs/*.md runs as written, or is marked illustrative.

A fenced block's info string says what it is:
- `python`: executed (in a fresh folder holding the doc's `file=` blocks); a block right after it
  whose info string is `output` must appear in what it printed.
- `bash`: each line is an `rlgym` command. `rlgym train|sft|eval ...` is composed and validated
  (`--print-config`: the command as written is a valid config); other subcommands run (`envs`,
  `check-env`; `sandbox` only where its backend is available). Times stated for the full commands
  were measured by hand (the commands are listed in the docs next to their times).
- `<lang> file=NAME`: a file the doc's examples read (written to the folder first; a python one
  also runs).
- `<lang> illustrative`: not run (an excerpt, a make target, a shell session).
- `python slow` / `python vllm` / `python docker`: run in that test tier (pytest marker).
- any other info string (`json`, `yaml`, `text`): data shown to the reader; not run.
A doc added by anyone is covered: the files are found by pattern.
"""

import contextlib
import io
import re
import shlex
import shutil
from pathlib import Path

import pytest

from rlgym_llm.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(doc: Path) -> list[tuple[str, str, int]]:
    text = doc.read_text()
    return [(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def _runnable():
    for doc in DOCS:
        blocks = _blocks(doc)
        for i, (info, code, line) in enumerate(blocks):
            words = info.split()
            if not words or "illustrative" in words:
                continue
            following = blocks[i + 1][:2] if i + 1 < len(blocks) and blocks[i + 1][0] == "output" else None
            marks = [getattr(pytest.mark, w) for w in words if w in ("slow", "vllm", "docker")]
            if words[0] == "python":
                yield pytest.param(doc, code, following, id=f"{doc.name}:{line}", marks=marks)
            elif words[0] in ("bash", "sh", "shell"):
                for k, cmd in enumerate(_commands(code)):
                    yield pytest.param(doc, cmd, None, id=f"{doc.name}:{line}:{k}")


def _commands(code: str) -> list[str]:
    lines = [re.sub(r"\s+#\s.*$", "", raw).strip() for raw in code.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _files(doc: Path, into: Path) -> None:
    for info, code, _ in _blocks(doc):
        for word in info.split():
            if word.startswith("file="):
                (into / word.removeprefix("file=")).write_text(code)


CASES = list(_runnable())


def test_the_docs_have_runnable_blocks():
    assert len(CASES) >= 20 and {c.values[0].name for c in CASES} >= {"README.md", "training.md", "credit.md"}


@pytest.mark.parametrize(("doc", "code", "output"), CASES)
def test_doc_block(doc, code, output, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # a doc's file= modules import as the reader's would
    _files(doc, tmp_path)
    if code.startswith("rlgym ") or ("\n" not in code and not code.startswith(("import", "from"))):
        _run_command(code, capsys)
        return
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, f"{doc.name}", "exec"), {"__name__": "__main__"})
    if output is not None:
        for expected in output[1].strip().splitlines():
            assert expected.strip() in printed.getvalue(), (expected, printed.getvalue())


def _run_command(cmd: str, capsys) -> None:
    argv = shlex.split(cmd)
    assert argv[0] == "rlgym", f"`{cmd}`: a command other than rlgym; mark its block `bash illustrative`"
    sub = argv[1] if len(argv) > 1 else ""
    if sub in ("train", "sft", "eval"):
        if "policy=vllm" in argv:
            from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, find_vllm_python

            try:
                find_vllm_python()
            except VLLMEnvMissingError:
                pytest.skip("needs the vLLM venv (make vllm-env)")
        rc = main([sub, "--print-config", *argv[2:]])
        assert rc == 0, capsys.readouterr().err
    elif sub == "sandbox":
        if "docker" in argv and shutil.which("docker") is None:
            pytest.skip("needs docker")
        assert main(argv[1:]) == 0, capsys.readouterr().err
    else:
        assert main(argv[1:]) == 0, capsys.readouterr().err
