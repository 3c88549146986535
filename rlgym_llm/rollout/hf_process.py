"""A transformers policy whose forward passes run in a child process, over weights in shared memory.

Why: with `trainer.off_policy_steps > 0` the next batch is sampled while the trainer updates. In a
thread of the trainer's process the two share one GIL, and sampling a small model is hundreds of
short torch calls per token, each of which gives the GIL back and waits to take it again while the
update holds it. A child process has its own interpreter and its own torch thread pool (`threads`),
so sampling and update can run side by side. On the shared 2-core machine (saturated, the kernel
sharing CPU out per session) it was not reliably faster than the thread
(benchmarks/results/peers/grpo_overlap.md), so `trainer.off_policy_threads` defaults to the thread.

    engine = ProcessPolicy(copy.deepcopy(model).eval(), tokenizer, threads=1)
    engine.sync_weights(state_dict)  # copied into the shared tensors: the child sees it at once

The child holds the same tensors (`torch.multiprocessing` shares their storage), so a weight sync is a
copy in this process and sends nothing. The child samples with `TransformersPolicy.generate_batch`
itself, so a seed gives the same completion as the in-process engine. CPU only.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from rlgym_llm.rollout.hf_policy import TransformersPolicy, _torch
from rlgym_llm.rollout.policy import Completion, SamplingParams

logger = logging.getLogger(__name__)


def _serve(conn: Any, model: Any, tokenizer: Any, max_context: int, threads: int, prefix_tokens: int) -> None:
    """The child: answer `generate_batch` requests until told to stop (None) or the pipe closes."""
    torch = _torch()
    torch.set_num_threads(threads)
    model.eval()
    # the parent forms the batches; its budget for kept KV (the default would scale with this size)
    engine = TransformersPolicy(model, tokenizer, 1 << 30, max_context=max_context, prefix_tokens=prefix_tokens)
    synced = 0  # the parent's count of weight syncs: they write the shared tensors from the parent,
    # which this process's tensors' version counters do not see, so the kept KV is dropped here
    while True:
        try:
            request = conn.recv()
        except EOFError:  # the parent is gone
            return
        if request is None:
            return
        prompts, samplings, calls, syncs = request
        if syncs != synced and engine.prefixes is not None:
            engine.prefixes.clear()  # computed with the weights before the sync: stale
        synced = syncs
        engine._calls = calls  # unseeded requests draw from the parent's counter, as in-process
        try:
            reply: tuple[str, Any] = ("ok", engine.generate_batch(prompts, samplings))
        except Exception as e:  # handed to the caller, who classifies it (e.g. ContextOverflowError)
            reply = ("error", e)
        conn.send(reply)


def _stop(conn: Any, proc: Any) -> None:
    """Ask the child to stop, and kill it if it has not within 30 s."""
    with contextlib.suppress(OSError, ValueError):  # the pipe is already closed: nothing to tell
        conn.send(None)
    proc.join(timeout=30)  # a loaded machine can take a while to tear down a torch process
    if proc.is_alive():
        proc.kill()
        proc.join()
    conn.close()


class ProcessPolicy(TransformersPolicy):
    """A `TransformersPolicy` that samples in a child process with `threads` torch threads.

    Args:
        model: a CPU model of its own (not the trainer's: the child reads its weights while the
            trainer updates its own); its tensors are moved to shared memory.
        tokenizer, max_batch_size, batch_wait_s, max_context, prefix_tokens: as `TransformersPolicy`
            (the kept KV lives in the child).
        threads: torch threads of the child (intra-op); the trainer's process keeps its own.

    Raises:
        ValueError: the model is not on the CPU.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_batch_size: int = 32,
        batch_wait_s: float = 0.002,
        max_context: int | None = None,
        threads: int = 1,
        prefix_tokens: int | None = None,
    ):
        torch = _torch()
        super().__init__(model, tokenizer, max_batch_size, batch_wait_s, max_context, prefix_tokens=prefix_tokens)
        if self.compute.device.type != "cpu" or self.compute.dtype != torch.float32:
            raise ValueError(
                f"ProcessPolicy samples on the CPU in float32; the model is on {self.compute.device} "
                f"({self.compute.dtype}): sample in-process (TransformersPolicy) on a GPU"
            )
        self.threads = threads
        model.eval()
        model.requires_grad_(False)
        model.share_memory()
        ctx = torch.multiprocessing.get_context("spawn")  # fork would copy the trainer's OpenMP state
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_serve,
            args=(child, model, tokenizer, self.max_context, threads, self.prefix_tokens),
            name="rlgym-sampler",
            daemon=True,  # never outlives the trainer
        )
        self._proc.start()
        child.close()
        self._rpc = threading.Lock()  # one request on the pipe at a time
        self._syncs = 0  # weight syncs so far: the child drops its kept KV when the count changes
        self._finalizer = weakref.finalize(self, _stop, self._conn, self._proc)

    def generate_batch(self, prompts: Sequence[Sequence[int]], samplings: Sequence[SamplingParams]) -> list[Completion]:
        """`TransformersPolicy.generate_batch`, run by the child."""
        if not self._proc.is_alive():
            raise RuntimeError(f"the sampling process has exited (exit code {self._proc.exitcode})")
        with self._lock, self._rpc:
            self._conn.send(([list(p) for p in prompts], list(samplings), self._calls, self._syncs))
            self._calls += len(prompts)
            try:
                status, value = self._conn.recv()
            except EOFError as e:
                raise RuntimeError(f"the sampling process died (exit code {self._proc.exitcode})") from e
        if status == "error":
            raise value
        return value

    def sync_weights(self, model: Any) -> None:
        """Copy `model`'s weights (a module or a state dict) into the shared tensors, between
        batches (the lock keeps a running batch from seeing half of them)."""
        state = model if isinstance(model, Mapping) else model.state_dict()
        with self._lock:
            self.model.load_state_dict(state)
            self._syncs += 1

    def detached(self, threads: int | None = None) -> TransformersPolicy:
        """Another engine over a copy of these weights: a process with `threads` (default: as many
        as this one's), or in this process with 0."""
        return detached(self, self.threads if threads is None else threads)

    def shutdown(self) -> None:
        """Stop the child (also done when this object is collected, and at exit)."""
        self._finalizer()

    async def close(self) -> None:
        """Stop the child process."""
        self.shutdown()


def detached(policy: TransformersPolicy, threads: int = 0) -> TransformersPolicy:
    """An engine over a copy of `policy`'s weights that samples while the trainer updates the original.

    Args:
        policy: the trainer's engine.
        threads: 0: in this process (`TransformersPolicy.detached`: a thread of the caller samples,
            sharing the GIL with the trainer); n > 0: in a child process with n torch threads
            (`ProcessPolicy`, CPU and float32 only).
    """
    own = TransformersPolicy.detached(policy)  # the base copy, also for a ProcessPolicy
    if threads <= 0:
        return own
    return ProcessPolicy(
        own.model, own.tokenizer, own.max_batch_size, own.batch_wait_s, own.max_context, threads, own.prefix_tokens
    )
