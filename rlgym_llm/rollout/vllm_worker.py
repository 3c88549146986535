"""The vLLM side of in-place weight sync: a worker extension that loads the trainer's weights.

vLLM mixes this class into each of its workers when the server starts with
`--worker-extension-cls rlgym_vllm_worker.WeightSyncExtension`; the trainer then calls its method
through `collective_rpc` (the server's `/collective_rpc` endpoint, `VLLM_SERVER_DEV_MODE=1`):

    POST /collective_rpc {"method": "rlgym_load_weights", "args": ["<handle as JSON>"]}

The handle says how the weights travel (`transport`). Here that is `shm`: one file on a tmpfs
(`/dev/shm`) holding every tensor's bytes, 64-byte aligned, and a manifest of name, dtype, shape and
offset (written by `weight_transport.SharedMemoryTransport`). An NCCL transport for GPUs would add a
receiver here; none is built yet.

Loading goes through vLLM's own in-place reload (`model_runner.reload_weights`: each layer is
restored to checkpoint format, loaded with the model's `load_weights`, re-processed, e.g. re-packed
for the CPU GEMM kernels, and copied back into the live tensors). A tied LM head shares its weight
with the embedding but has no tensor of its own in the checkpoint, so that reload skips it and its
CPU kernel keeps the old packed weights; `_refresh_tied` re-processes every layer whose weight is
shared, and `_probe_head` proves the head computes logits with the new weights.

This file runs inside the vLLM venv, which does not have rlgym_llm's dependencies: `VLLMPolicy`
copies it there as the stand-alone module `rlgym_vllm_worker`. It imports only the standard library
at module level (torch, which vLLM brings, inside the functions) and nothing from rlgym_llm.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

MODULE_NAME = "rlgym_vllm_worker"
"""The module name the server imports this file under."""
EXTENSION_CLS = f"{MODULE_NAME}.WeightSyncExtension"
"""The value of `--worker-extension-cls`."""
RPC_METHOD = "rlgym_load_weights"
"""The worker method the trainer calls through `collective_rpc`."""
ALIGN = 64
"""Tensors start at multiples of this many bytes in a shared-memory weights file."""
DTYPES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")
"""Tensor dtypes a manifest may name (torch attribute names)."""


def read_shared(handle: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The tensors of a shared-memory handle, as read-only views of the mapped file (no copy).

    Args:
        handle: `{"transport": "shm", "path": ..., "size": ..., "tensors": [{"name", "dtype",
            "shape", "offset", "nbytes"}, ...]}`.

    Raises:
        ValueError: the manifest is malformed (an unknown dtype, a tensor outside the file).
    """
    import mmap
    import warnings

    import torch

    size = int(handle["size"])
    with open(handle["path"], "rb") as f:
        # MAP_POPULATE maps every page in one call: page by page costs more than the copy itself.
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        mapped = mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "not writable": the views are only read
        data = torch.frombuffer(mapped, dtype=torch.uint8)
    for entry in handle["tensors"]:
        name, dtype, shape = entry["name"], entry["dtype"], [int(d) for d in entry["shape"]]
        offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        if dtype not in DTYPES:
            raise ValueError(f"{name}: unknown dtype {dtype!r} (one of {DTYPES})")
        if offset % ALIGN or offset < 0 or offset + nbytes > size:
            raise ValueError(f"{name}: bytes [{offset}, {offset + nbytes}) do not fit a {size}-byte file")
        yield name, data[offset : offset + nbytes].view(getattr(torch, dtype)).view(shape)


def receive(handle: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The (name, tensor) pairs a handle delivers, by its transport."""
    transport = handle.get("transport")
    if transport == "shm":
        return read_shared(handle)
    raise ValueError(f"no receiver for weight transport {transport!r} in this vLLM worker (known: shm)")


class WeightSyncExtension:
    """Mixed into vLLM's worker (`self.model_runner` is the worker's): loads weights in place."""

    def rlgym_load_weights(self, handle_json: str) -> dict[str, Any]:
        """Load the weights a transport handle describes into the served model, in place.

        Args:
            handle_json: the handle as JSON (the RPC endpoint passes strings only). Besides the
                transport's fields, `tied` maps each tied parameter left out of the transfer to the
                one sent in its place, e.g. `{"lm_head.weight": "model.embed_tokens.weight"}`.

        Returns:
            `tensors` (how many were loaded), `tied` (layers re-processed because they share a
            weight), `head_max_abs_diff` (the probe of the LM head, or None where it cannot run)
            and `seconds`.

        Raises:
            ValueError: a bad handle, or a probe showing the head does not use the new weights.
        """
        import torch

        t0 = time.perf_counter()
        handle = json.loads(handle_json)
        model = self.model_runner.model  # type: ignore[attr-defined]  # the vLLM worker's
        sent: dict[str, Any] = {}

        def weights() -> Iterator[tuple[str, Any]]:
            for name, tensor in receive(handle):
                sent[name] = tensor
                yield name, tensor

        with torch.no_grad():
            self.model_runner.reload_weights(weights_iterator=weights(), is_checkpoint_format=True)  # type: ignore[attr-defined]
            t1 = time.perf_counter()
            tied = _refresh_tied(model, loaded={name.rpartition(".")[0] for name in sent})
            diff = _probe_head(model, _sent_head(sent, handle.get("tied") or {}, tied))
        t2 = time.perf_counter()
        return {
            "tensors": len(sent),
            "tied": tied,
            "head_max_abs_diff": diff,
            "seconds": t2 - t0,
            "reload_seconds": t1 - t0,
        }


def _refresh_tied(model: Any, loaded: set[str]) -> list[str]:
    """Re-run weight processing on layers that share their weight with a loaded layer but were not
    loaded themselves; returns the names of all layers sharing a weight.

    vLLM ties the LM head by making it hold the embedding's Parameter. The reload writes the new
    values into that Parameter through the embedding, but processes only layers it loaded: the head's
    own derived state (on CPU, a packed copy for the GEMM kernel) stays stale. Processing it again
    rebuilds that state from the shared weight.

    Args:
        model: the served model.
        loaded: the layers the reload processed (the sent tensors' module names).
    """
    by_weight: dict[int, list[tuple[str, Any]]] = {}
    for name, module in model.named_modules():
        weight = module._parameters.get("weight") if hasattr(module, "_parameters") else None
        if weight is not None:
            by_weight.setdefault(id(weight), []).append((name, module))
    shared = []
    for group in by_weight.values():
        if len(group) < 2:
            continue
        for name, module in group:
            shared.append(name)
            method = getattr(module, "quant_method", None)
            if name not in loaded and method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(module)
    return sorted(shared)


def _sent_head(sent: dict[str, Any], tied: dict[str, str], shared: list[str]) -> Any:
    """The tensor sent for the LM head: its own, the one the trainer tied it to, or (a checkpoint
    folder stores a tied head once) the sent weight of a layer the server ties it to."""
    names = ["lm_head.weight", tied.get("lm_head.weight", "")]
    if "lm_head" in shared:
        names += [f"{name}.weight" for name in shared if name != "lm_head"]
    return next((sent[name] for name in names if name in sent), None)


def _probe_head(model: Any, expected: Any) -> float | None:
    """Max |logit difference| between the served head and `hidden @ expected.T` on random hidden states.

    The served head computes logits with its kernel's weights (packed on CPU), which is what a stale
    tied head gets wrong; the reference uses the tensor the trainer sent. None when the model has no
    plain head to probe (no `lm_head`/`logits_processor`, soft-capped or scaled logits, or no head
    tensor sent).

    Raises:
        ValueError: the difference is beyond the served dtype's rounding: the head serves other weights.
    """
    import torch

    head = getattr(model, "lm_head", None)
    processor = getattr(model, "logits_processor", None)
    if expected is None or head is None or processor is None or not hasattr(model, "compute_logits"):
        return None
    if getattr(processor, "soft_cap", None) is not None or getattr(processor, "scale", 1.0) != 1.0:
        return None
    weight = head.weight
    vocab, hidden = expected.shape
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(4, hidden, generator=gen).to(device=weight.device, dtype=weight.dtype)  # (4, H)
    served = model.compute_logits(states)[:, :vocab].float().cpu()  # (4, V)
    reference = states.float().cpu() @ expected.float().t()  # (4, V)
    diff = float((served - reference).abs().max())
    # float32 agrees to ~1e-5 of the logits' scale; bfloat16/float16 keep 8-11 bits of mantissa.
    rel = 1e-4 if weight.dtype == torch.float32 else 3e-2
    if diff > rel * max(1.0, float(reference.abs().max())):
        raise ValueError(
            f"after the weight update the LM head's logits differ from the sent weights' by {diff:.4g}: "
            "the head serves stale weights"
        )
    return diff
