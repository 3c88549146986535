"""The vLLM side of in-place weight sync: a worker extension that loads the trainer's weights.

vLLM mixes this class into each of its workers when the server starts with
`--worker-extension-cls rlgym_vllm_worker.WeightSyncExtension`; the trainer then calls its method
through `collective_rpc` (the server's `/collective_rpc` endpoint, `VLLM_SERVER_DEV_MODE=1`), which
reaches every worker of every engine: each tensor-parallel rank, each data-parallel replica.

    POST /collective_rpc {"method": "rlgym_load_weights", "args": ["<handle as JSON>"]}

The handle says how the weights travel (`transport`). Here that is `shm`: one file on a tmpfs
(`/dev/shm`) holding every tensor's bytes, 64-byte aligned, and a manifest of name, dtype, shape and
offset (written by `weight_transport.SharedMemoryTransport`). Each worker maps the file once and
reads zero-copy views of it (`torch.frombuffer`). An NCCL or CUDA-IPC transport for GPUs would add a
receiver here; none is built yet.

Loading (`direct`, for unquantized models): the views go through the model's own `load_weights`,
which maps checkpoint names to the served ones (q/k/v into the fused qkv, gate/up into gate_up) and
keeps this worker's tensor-parallel shard, so one copy per tensor, on every rank, TP=1 or TP>1 alike.
On CPU, vLLM packs each linear layer's weight for oneDNN at load time and frees the original, so a
copy into the parameter would not reach the kernel; the first sync therefore gives those layers
their plain weights back (shapes and loaders from vLLM's own reload metadata) and computes them with
`torch.nn.functional.linear`, which reads the live parameter. On GPU, unquantized layers keep no
derived copy. A tied LM head shares the embedding's Parameter, so it follows the embedding.

Quantized and MLA models keep derived state that only their processing rebuilds: they go through
vLLM's in-place reload (`model_runner.reload_weights`: each layer restored to checkpoint format,
loaded, re-processed, copied back), with `_refresh_tied` re-processing layers that share a weight
(vLLM's reload skips a tied head). Either way `_probe_head` proves the head computes logits with the
new weights.

This file runs inside the vLLM venv, which does not have rlgym_llm's dependencies: `VLLMPolicy`
copies it there as the stand-alone module `rlgym_vllm_worker`. It imports only the standard library
at module level (torch and vllm, which the venv has, inside the functions) and nothing from rlgym_llm.
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


_mapped: dict[str, Any] = {}
"""The mapped weights file of this process: {"key": (path, size), "data": a uint8 tensor over it}."""


def _map(path: str, size: int) -> Any:
    """A uint8 tensor over the shared file, mapped once per file: later syncs reuse the mapping
    (mapping 0.5 GB again costs a page-table entry per 4 KiB, a good part of a copy)."""
    import mmap
    import warnings

    import torch

    if _mapped.get("key") == (path, size):
        return _mapped["data"]
    _mapped.clear()  # the trainer made a new file: drop the old mapping (its memory goes with it)
    with open(path, "rb") as f:
        # MAP_POPULATE maps every page in one call: page by page costs more than the copy itself.
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        mapped = mmap.mmap(f.fileno(), size, flags=flags, prot=mmap.PROT_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "not writable": the views are only read
        data = torch.frombuffer(mapped, dtype=torch.uint8)
    _mapped.update(key=(path, size), data=data)
    return data


def read_shared(handle: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The tensors of a shared-memory handle, as read-only views of the mapped file (no copy).

    Args:
        handle: `{"transport": "shm", "path": ..., "size": ..., "tensors": [{"name", "dtype",
            "shape", "offset", "nbytes"}, ...]}`.

    Raises:
        ValueError: the manifest is malformed (an unknown dtype, a tensor outside the file).
    """
    import torch

    size = int(handle["size"])
    entries = handle["tensors"]
    for entry in entries:  # check all before the first view: a bad manifest loads nothing
        name, offset, nbytes = entry["name"], int(entry["offset"]), int(entry["nbytes"])
        if entry["dtype"] not in DTYPES:
            raise ValueError(f"{name}: unknown dtype {entry['dtype']!r} (one of {DTYPES})")
        if offset % ALIGN or offset < 0 or offset + nbytes > size:
            raise ValueError(f"{name}: bytes [{offset}, {offset + nbytes}) do not fit a {size}-byte file")
    data = _map(str(handle["path"]), size)
    for entry in entries:
        offset, nbytes = int(entry["offset"]), int(entry["nbytes"])
        view = data[offset : offset + nbytes].view(getattr(torch, entry["dtype"]))
        yield entry["name"], view.view([int(d) for d in entry["shape"]])


def receive(handle: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The (name, tensor) pairs a handle delivers, by its transport."""
    transport = handle.get("transport")
    if transport == "shm":
        return read_shared(handle)
    raise ValueError(f"no receiver for weight transport {transport!r} in this vLLM worker (known: shm)")


class WeightSyncExtension:
    """Mixed into vLLM's worker (`self.model_runner` is the worker's): loads weights in place."""

    _rlgym_probed = False  # whether a direct load on this worker has probed the LM head yet

    def rlgym_load_weights(self, handle_json: str) -> dict[str, Any]:
        """Load the weights a transport handle describes into the served model, in place.

        Args:
            handle_json: the handle as JSON (the RPC endpoint passes strings only). Besides the
                transport's fields, `tied` maps each tied parameter left out of the transfer to the
                one sent in its place, e.g. `{"lm_head.weight": "model.embed_tokens.weight"}`, and
                `load` ("auto", the default, or "reload") can force vLLM's reload path.

        Returns:
            `tensors` (how many were loaded), `path` (`direct` or `reload`, see the module doc),
            `tied` (layers sharing a weight), `unpacked` (CPU layers given their plain weights back
            by this call), `head_max_abs_diff` (the probe of the LM head; None where it cannot run,
            or where it has nothing to find: a direct load after the first, into the Parameter
            the head's kernel reads), `rank` (this worker's global rank), `seconds` and
            `load_seconds` (the load alone).

        Raises:
            ValueError: a bad handle, or a probe showing the head does not use the new weights.
        """
        import torch

        t0 = time.perf_counter()
        handle = json.loads(handle_json)
        runner = self.model_runner  # type: ignore[attr-defined]  # the vLLM worker's
        model = runner.model
        sent: dict[str, Any] = {}

        def weights() -> Iterator[tuple[str, Any]]:
            for name, tensor in receive(handle):
                sent[name] = tensor
                yield name, tensor

        unpacked: list[str] = []
        with torch.no_grad():
            if handle.get("load", "auto") == "auto" and _direct_load_applies(runner):
                unpacked, switched = _unpack_cpu_linears(model)
                threads = torch.get_num_threads()
                # One thread: the copies are memory-bound, and on cores shared with other work each
                # tensor's OpenMP fork/join can stall for milliseconds (measured: 2 threads up to 30x slower).
                torch.set_num_threads(1)
                try:
                    model.load_weights(weights())
                finally:
                    torch.set_num_threads(threads)
                path = "direct"
                t1 = time.perf_counter()
                tied = _shared_weight_layers(model)
                # The head can only serve stale weights where its kernel changed (the first direct load,
                # or after vLLM's reload re-packed it); later direct loads write the Parameter it reads.
                probe = switched > 0 or not self._rlgym_probed
            else:
                runner.reload_weights(weights_iterator=weights(), is_checkpoint_format=True)
                path = "reload"
                t1 = time.perf_counter()
                tied = _refresh_tied(model, loaded={name.rpartition(".")[0] for name in sent})
                probe = True
            diff = _probe_head(model, _sent_head(sent, handle.get("tied") or {}, tied)) if probe else None
            self._rlgym_probed = self._rlgym_probed or (probe and path == "direct")
        t2 = time.perf_counter()
        return {
            "tensors": len(sent),
            "path": path,
            "tied": tied,
            "unpacked": len(unpacked),
            "head_max_abs_diff": diff,
            "rank": _rank(),
            "seconds": t2 - t0,
            "load_seconds": t1 - t0,
        }


def _direct_load_applies(runner: Any) -> bool:
    """Whether the model's `load_weights` alone updates everything the kernels read: unquantized,
    no MLA (its attention keeps weights derived at load time)."""
    config = getattr(runner, "model_config", None)
    if config is None:
        return False
    return getattr(config, "quantization", None) is None and not getattr(config, "use_mla", False)


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _unpack_cpu_linears(model: Any) -> tuple[list[str], int]:
    """On CPU, make every linear layer compute from its own `weight` Parameter; returns the layers
    whose weight had to be given back, and how many layers changed kernel.

    vLLM's CPU backend packs each unquantized linear weight into a oneDNN handle at load time and
    replaces the Parameter with an empty one; an in-place copy would then miss the kernel. Such a
    layer gets its Parameter back (shape, dtype and weight loader from the metadata vLLM records for
    its own reload, zero-filled until the load that follows), `cpu_linear` becomes
    `torch.nn.functional.linear` over the live weight, and `_cpu_skip_gemm_dispatch` keeps it so if
    vLLM re-processes a linear layer later. Layers that kept their weight (a tied head) only switch
    kernels, on every call: vLLM's reload re-packs them. Nothing to do on GPU (no `cpu_linear`).
    """
    import torch

    restored, switched = [], 0
    for name, module in model.named_modules():
        if not hasattr(module, "cpu_linear") or module.cpu_linear is torch.nn.functional.linear:
            continue
        weight = module._parameters.get("weight")
        if weight is None:
            continue
        if weight.numel() == 0:
            from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info
            from vllm.model_executor.model_loader.reload.meta import materialize_layer, restore_layer_on_meta

            info = get_layerwise_info(module)
            if "weight" not in info.restore_metadata[0]:
                raise ValueError(f"{name}: its packed weight cannot be unpacked (vLLM recorded no shape for it)")
            restore_layer_on_meta(module, info)
            materialize_layer(module, info)
            module.weight.data.zero_()
            # vLLM's own reload wraps the recorded loaders in place (to defer its processing); a
            # wrapped loader called outside that reload drops the weight, so take the original back.
            loader = getattr(module.weight, "weight_loader", None)
            while loader is not None and getattr(loader, "__name__", "") == "online_process_loader":
                loader = loader.__wrapped__
            if loader is not None:
                module.weight.weight_loader = loader
            restored.append(name)
        module.cpu_linear = torch.nn.functional.linear
        module._cpu_skip_gemm_dispatch = True
        switched += 1
    return restored, switched


def _shared_weight_layers(model: Any) -> list[str]:
    """The layers whose weight Parameter another layer holds too (a tied LM head and its embedding)."""
    by_weight: dict[int, list[str]] = {}
    for name, module in model.named_modules():
        weight = module._parameters.get("weight") if hasattr(module, "_parameters") else None
        if weight is not None:
            by_weight.setdefault(id(weight), []).append(name)
    return sorted(name for group in by_weight.values() if len(group) > 1 for name in group)


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
    logits = model.compute_logits(states)  # a collective under tensor parallelism: every rank calls it
    if logits is None:  # ranks other than the first get no gathered logits; the first probes
        return None
    served = logits[:, :vocab].float().cpu()  # (4, V)
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
