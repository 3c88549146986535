"""`parts.release_memory()` hands freed heap pages back to the OS. A run frees the warm-up's optimizer
and activations, and its own weights before the final export loads them afresh; without the trim those
pages stay in the process's resident memory, and the main job's peak was the sum of both phases."""

import sys

import pytest

from rlgym_llm.recipes import parts

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")


_HEAP_SCRIPT = """
import ctypes
from rlgym_llm.recipes import parts

def rss_mb():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
base = rss_mb()
# 160 MB in 4 KB heap blocks, all freed but the last, which pins the heap's top: plain `free`
# returns none of it to the OS
blocks = [libc.malloc(4096) for _ in range(40_000)]
for b in blocks:
    libc.memset(b, 1, 4096)
for b in blocks[:-1]:
    libc.free(b)
held = rss_mb()
assert parts.release_memory()
print(held - base, held - rss_mb())
"""


def test_freed_heap_pages_go_back_to_the_os():
    """In a fresh interpreter: a long-lived test process may already hold free heap pages that the
    blocks reuse, and then its RSS does not grow (the control fails for the wrong reason)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _HEAP_SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    grew, released = map(float, out.stdout.split())
    assert grew > 100  # control: freed, and still resident
    assert released > 100


@pytest.mark.slow  # a short tiny-model run (~20 s)
def test_a_run_lets_go_of_its_weights_before_the_final_export(tmp_path, monkeypatch):
    """The final export loads the weights afresh; the run's own model (and the policy, managers and
    trainer holding it) must be unreachable by then, or both copies count in the peak. A loop variable
    of the teardown held a rollout manager, and through it the policy and the model, until the end.
    Only the run's own models count: in a long-lived test process earlier tests may keep theirs."""
    import gc
    import weakref

    pytest.importorskip("torch")
    from transformers import PreTrainedModel

    from rlgym_llm.cli.main import main

    gc.collect()
    earlier = weakref.WeakSet(o for o in gc.get_objects() if isinstance(o, PreTrainedModel))
    alive: list[int] = []
    release = parts.release_memory

    def spy() -> bool:
        done = release()
        alive.append(sum(isinstance(o, PreTrainedModel) and o not in earlier for o in gc.get_objects()))
        return done

    monkeypatch.setattr(parts, "release_memory", spy)
    budget = ["sft.steps=2", "sft.episodes=4", "trainer.steps=1", "trainer.tasks_per_step=2", "trainer.group_size=2"]
    rest = ["trainer.eval_tasks=2", "progress=false", "trainer.threads=1", f"out_dir={tmp_path / 'run'}"]
    assert main(["train", *budget, *rest]) == 0
    assert len(alive) == 2  # after the warm-up, and before the export
    assert alive[0] > 0  # control: after the warm-up the model is in use, and the count sees it
    assert alive[1] == 0, f"{alive[1]} model objects still alive before the final export"
    assert (tmp_path / "run" / "final_model" / "config.json").exists()
