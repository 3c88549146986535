"""The CPU thread policy (`rlgym_llm.core.threads`): OpenMP's wait policy set before torch loads it,
a user's own setting kept, and torch's thread count taken from the CPUs the process may run on."""

import os
import subprocess
import sys

import pytest

from rlgym_llm.core import threads
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.train.config import TrainerConfig


def test_quiet_openmp_sets_passive_when_unset():
    env: dict[str, str] = {}
    assert threads.quiet_openmp(env) is True
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}


@pytest.mark.parametrize("mine", ["ACTIVE", "active", "PASSIVE"])
def test_quiet_openmp_keeps_the_users_setting(mine):
    env = {"OMP_WAIT_POLICY": mine}
    assert threads.quiet_openmp(env) is False
    assert env == {"OMP_WAIT_POLICY": mine}


def test_cpu_quota_reads_cgroup_v2(tmp_path):
    f = tmp_path / "cpu.max"
    f.write_text("250000 100000\n")
    assert threads.cpu_quota(f) == 2.5
    f.write_text("max 100000\n")
    assert threads.cpu_quota(f) is None
    assert threads.cpu_quota(tmp_path / "absent") is None


def test_auto_is_the_affinity_mask_capped_by_the_quota(tmp_path):
    mine, none = len(os.sched_getaffinity(0)), {}
    assert threads.resolve("auto", tmp_path / "absent", none) == mine
    f = tmp_path / "cpu.max"
    f.write_text("50000 100000\n")  # half a CPU: one thread, never zero
    assert threads.resolve("auto", f, none) == 1
    f.write_text(f"{(mine + 7) * 100000} 100000\n")  # a quota above the mask does not add threads
    assert threads.resolve("auto", f, none) == mine
    assert threads.resolve(3, f, none) == 3


def test_auto_follows_the_users_omp_num_threads(tmp_path):
    assert threads.resolve("auto", tmp_path / "absent", {"OMP_NUM_THREADS": "5"}) == 5
    assert threads.resolve(2, tmp_path / "absent", {"OMP_NUM_THREADS": "5"}) == 2  # a number wins
    mine = len(os.sched_getaffinity(0))
    for unusable in ("0", "", "two"):
        assert threads.resolve("auto", tmp_path / "absent", {"OMP_NUM_THREADS": unusable}) == mine


@pytest.mark.parametrize("bad", [0, -1, "many", True, 1.5])
def test_resolve_rejects_other_values(bad):
    with pytest.raises(ValueError, match="auto"):
        threads.resolve(bad)


@pytest.mark.parametrize("bad", [0, "many", 2.0])
def test_trainer_config_checks_threads(bad):
    with pytest.raises(ConfigError, match="threads"):
        TrainerConfig(threads=bad)
    assert TrainerConfig().threads == "auto"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_torch_threads_follow_the_affinity_mask():
    """A process pinned to one CPU (as `taskset -c N` does) gets one torch thread from `auto`,
    however many cores the machine has; the recipes' `cpu_threads` applies it."""
    code = (
        "import os\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "from rlgym_llm.recipes import parts\n"
        "n = parts.cpu_threads('auto')\n"
        "import torch\n"
        "print(n, torch.get_num_threads(), os.environ['OMP_WAIT_POLICY'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "PASSIVE"]
