"""CPU threads of a training process: OpenMP's wait policy and torch's thread count.

    threads.quiet_openmp()                 # before the first `import torch` (the `rlgym` command does it)
    torch.set_num_threads(threads.resolve("auto"))

On a busy machine, torch's OpenMP workers spin between parallel regions (GNU OpenMP spins for
~300k iterations before it sleeps): with other jobs on the same cores the spinning takes their
time slices and the run's CPU time grows severalfold for the same work. `OMP_WAIT_POLICY=PASSIVE`
makes a waiting worker sleep at once. OpenMP reads it when the library loads, i.e. at
`import torch`, so it has to be in the environment before that. The thread count comes from the
CPUs this process may run on (its affinity mask, capped by a cgroup CPU quota; or the user's
`OMP_NUM_THREADS`), not from the machine's core count: `taskset`, container limits and batch schedulers all shrink the former.

This module imports nothing heavy: `import rlgym_llm` stays light.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

logger = logging.getLogger(__name__)

WAIT_POLICY = "PASSIVE"
"""The OpenMP wait policy `quiet_openmp` sets: a worker with nothing to do sleeps instead of spinning."""

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2's CPU quota file: "<quota_us> <period_us>", or "max <period_us>" for no quota."""


def quiet_openmp(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set `OMP_WAIT_POLICY=PASSIVE` in `environ` (default: `os.environ`) unless the user set it.

    Child processes inherit it (a vLLM server included). Set `OMP_WAIT_POLICY=ACTIVE` yourself to
    keep spinning workers (a dedicated machine, many small parallel regions).

    Returns:
        Whether the policy now in `environ` was set here. It takes effect only if torch (and so its
        OpenMP library) is not loaded yet; a warning says so otherwise.
    """
    env = os.environ if environ is None else environ
    if "OMP_WAIT_POLICY" in env:
        return False
    env["OMP_WAIT_POLICY"] = WAIT_POLICY
    if env is os.environ and "torch" in sys.modules:
        logger.warning(
            "torch was imported before OMP_WAIT_POLICY=%s was set, so this process keeps OpenMP's "
            "spinning workers; set the variable before `import torch` (child processes get it)",
            WAIT_POLICY,
        )
    return True


def cpu_quota(cpu_max: Path = CGROUP_CPU_MAX) -> float | None:
    """CPUs' worth of time the cgroup quota allows (e.g. 2.5 for `docker run --cpus 2.5`), or None
    when there is no quota (or no cgroup v2 file to read)."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """CPUs this process may use: its affinity mask (`os.sched_getaffinity`, where the platform has
    it; else `os.cpu_count()`), capped by the cgroup CPU quota rounded up; at least 1."""
    if hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:  # macOS, Windows: no affinity call
        n = os.cpu_count() or 1
    quota = cpu_quota(cpu_max)
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)


def resolve(setting: int | str, cpu_max: Path = CGROUP_CPU_MAX, environ: Mapping[str, str] | None = None) -> int:
    """torch's CPU thread count for a `threads` setting: an int >= 1 as given; "auto" as the user's
    `OMP_NUM_THREADS` where it is a positive int (the standard way to ask for a count), else
    `available_cpus()`.

    Raises:
        ValueError: any other value.
    """
    if setting == "auto":
        asked = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
        return int(asked) if asked.isdigit() and int(asked) >= 1 else available_cpus(cpu_max)
    if isinstance(setting, int) and not isinstance(setting, bool) and setting >= 1:
        return setting
    raise ValueError(f"threads={setting!r}: use auto (the CPUs this process may run on) or an int >= 1")
