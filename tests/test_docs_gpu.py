"""docs/gpu.md: every `rlgym train` / `rlgym eval` command in it composes a valid config (they need
a GPU to run; `scripts/gpu_check.sh` runs the GPU path)."""

import re
import shlex
from pathlib import Path

import pytest

from rlgym_llm.config import load_config

DOC = Path(__file__).resolve().parents[1] / "docs" / "gpu.md"
BLOCKS = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.DOTALL)
COMMANDS = [line for block in BLOCKS for line in block.splitlines() if line.startswith(("rlgym train", "rlgym eval"))]


def test_the_doc_has_commands_for_one_gpu_and_several():
    assert len(COMMANDS) >= 5
    assert any("tensor_parallel_size=2" in c and "server_gpus" in c for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_composes_a_valid_config(command):
    _, name, *overrides = shlex.split(command)
    cfg = load_config(name, overrides)
    device = cfg.trainer.device if name == "train" else cfg.device
    assert device == "cuda"
