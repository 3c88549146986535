"""The C heap of a CPU process: hand its free pages back to the OS.

PyTorch's CPU tensors come from the C allocator (glibc's malloc). A freed tensor's pages stay in the
process's heap, counted in its resident memory, until the allocator returns them; glibc does that
only for blocks above its dynamic mmap threshold (which grows up to 32 MB as big blocks are freed)
or when the top of the heap is free. So an RL step's activations (a GB or more for SmolLM2 on a
few hundred tokens) stay resident through the next rollout, and the next step's allocations land
beside them: a run's resident memory climbs well above its working set. `trim_heap` after each
phase returns the free pages at once (`malloc_trim`, a few ms).

This module imports nothing heavy: `import rlgym_llm` stays light.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def trim_heap() -> bool:
    """Return the C heap's free pages to the OS (glibc's `malloc_trim(0)`). False where the C
    library has no `malloc_trim` (musl, macOS): nothing is done there."""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    if trim is None:
        return False
    trim(0)
    return True
