"""`rlgym train` puts `OMP_WAIT_POLICY=PASSIVE` in the environment before torch is imported (OpenMP
reads it only then), and keeps a policy the user set. Checked in a subprocess on the real command
path: an import hook notes the variable at the first `import torch`, lets torch load its OpenMP
library with `OMP_DISPLAY_ENV=verbose` (GNU OpenMP then prints the settings it read) and ends the
process before any training."""

import os
import re
import subprocess
import sys

import pytest

PROBE = """
import importlib.abc, os, sys

class FirstTorchImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        print("OMP_WAIT_POLICY at import torch:", os.environ.get("OMP_WAIT_POLICY", "(unset)"), flush=True)
        import torch
        torch.ones(2) + 1  # start OpenMP
        sys.stderr.flush()
        os._exit(0)

sys.meta_path.insert(0, FirstTorchImport())
from rlgym_llm.cli.main import main
main(["train", "out_dir=" + sys.argv[1]])
raise SystemExit("rlgym train finished without importing torch")
"""


def _first_torch_import(tmp_path, **env_vars):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.update(OMP_DISPLAY_ENV="verbose", **env_vars)
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "run")], env=env, capture_output=True, text=True, timeout=240
    )
    assert out.returncode == 0, out.stdout + out.stderr
    seen = re.search(r"OMP_WAIT_POLICY at import torch: (\S+)", out.stdout)
    assert seen, out.stdout
    spin = re.search(r"GOMP_SPINCOUNT = '(\d+)'", out.stderr)  # GNU OpenMP (torch's Linux wheels)
    assert not (tmp_path / "run").exists(), "the probe must stop before the run starts"
    return seen.group(1), int(spin.group(1)) if spin else None


def test_rlgym_train_sets_passive_before_torch_loads(tmp_path):
    policy, spin = _first_torch_import(tmp_path)
    assert policy == "PASSIVE"
    if spin is None:
        pytest.skip("torch's OpenMP is not GNU OpenMP: its settings are not displayed")
    assert spin == 0  # what OpenMP read: waiting workers sleep at once


def test_rlgym_train_keeps_the_users_wait_policy(tmp_path):
    policy, spin = _first_torch_import(tmp_path, OMP_WAIT_POLICY="ACTIVE")
    assert policy == "ACTIVE"
    if spin is None:
        pytest.skip("torch's OpenMP is not GNU OpenMP: its settings are not displayed")
    assert spin > 0  # the user's spinning workers
