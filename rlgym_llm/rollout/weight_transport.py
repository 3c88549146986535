"""How the trainer's weights reach a vLLM server's workers for an in-place sync.

A `WeightTransport` turns (name, tensor) pairs into a *handle*: a small JSON-able dict that
`VLLMPolicy` passes to every worker through `collective_rpc`, and that the worker extension
(`vllm_worker.receive`) turns back into tensors. `SharedMemoryTransport` is the one built: the bytes
go through a file on a tmpfs (`/dev/shm`), mapped on both sides. The trainer's CPU tensors move into
that file at the first sync (`adopt`), so later syncs cost one memory copy, the workers' (two
without adoption).

On GPUs the usual transport is an NCCL broadcast from the trainer's rank to the server's workers
(TRL's `vllm serve`, OpenRLHF): `send` would start the broadcast (in a thread, since the workers
join it inside the RPC) and return a manifest with `"transport": "nccl"`, `release` would join it,
and `vllm_worker.receive` would get a matching receiver. It is not built: this project's machines
have no GPU to run it on, and an untested transport would be worse than none. Shared memory works
on a GPU machine too (the worker copies each tensor to its device), at the cost of a trip through
host memory.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from rlgym_llm.rollout.vllm_worker import ALIGN, DTYPES

_PREFIX = "rlgym-weights-"


@runtime_checkable
class WeightTransport(Protocol):
    """Carries full weights from the trainer to the server's workers (one handle per sync)."""

    def send(self, weights: Sequence[tuple[str, Any]], tied: dict[str, str]) -> dict[str, Any]:
        """Make `weights` available to the workers; returns the handle they receive them by.

        Args:
            weights: (checkpoint name, tensor) pairs, one per distinct tensor.
            tied: names left out of `weights` because they share a tensor with a sent one,
                mapped to that one's name (e.g. a tied LM head to the embedding).
        """
        ...

    def release(self, handle: dict[str, Any]) -> None:
        """Called once the workers have loaded the handle (or failed to)."""
        ...

    def close(self) -> None:
        """Free everything the transport holds (the policy is stopping)."""
        ...


class SharedMemoryTransport:
    """Weights through one file on a tmpfs: every tensor's bytes, and a manifest in the handle.

    Args:
        directory: where the file goes; default `/dev/shm` (memory-backed on Linux), else the
            temporary folder. It must be readable by the server's processes (same machine).
        adopt: after writing a CPU tensor into the file, make the trainer's tensor live there
            (`tensor.data` becomes its slot in the file, a storage of its own). The optimizer then
            updates the shared bytes in place, and later syncs skip the trainer-side copy of every
            tensor still at its slot: the workers read the trainer's weights directly, as CUDA IPC
            handles would on a GPU. A tensor moved elsewhere since (`model.to(...)`, a new
            Parameter) is simply copied again. False: one copy into the file per sync.

    The file and its mapping are kept from one sync to the next (a fresh file costs a page fault
    per 4 KiB, several times the copy itself): it holds the model's size in memory until `close()`
    (and, adopted, for as long as the trainer's tensors live there).
    """

    def __init__(self, directory: str | os.PathLike | None = None, adopt: bool = True):
        default = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
        self.directory = Path(directory) if directory is not None else default
        self.adopt = adopt
        self.path: Path | None = None
        self._data: Any = None  # a uint8 tensor over the file's shared mapping
        self._mapped: Any = None  # the mmap object itself (slots are made from it)
        self._size = 0
        self._slots: dict[tuple[int, str, tuple[int, ...]], Any] = {}  # (offset, dtype, shape) -> tensor
        self.copied = 0  # tensors copied by the last send (the rest were adopted already)

    def send(self, weights: Sequence[tuple[str, Any]], tied: dict[str, str]) -> dict[str, Any]:
        entries, offset = [], 0
        for name, tensor in weights:
            dtype = str(tensor.dtype).removeprefix("torch.")
            if dtype not in DTYPES:
                raise TypeError(f"{name}: dtype {dtype} cannot be sent (one of {DTYPES})")
            nbytes = tensor.numel() * tensor.element_size()
            entries.append(
                {"name": name, "dtype": dtype, "shape": list(tensor.shape), "offset": offset, "nbytes": nbytes}
            )
            offset += -(-nbytes // ALIGN) * ALIGN
        size = max(offset, ALIGN)
        self._buffer(size)
        self.copied = 0
        for entry, (_, tensor) in zip(entries, weights):
            slot = self._slot(entry["offset"], tensor)
            if tensor.data_ptr() == slot.data_ptr() and tensor.numel():
                continue  # the trainer's tensor lives in its slot: the workers read it there
            slot.copy_(tensor.detach())
            self.copied += 1
            if self.adopt and _adoptable(tensor):
                tensor.data = slot
        return {"transport": "shm", "path": str(self.path), "size": size, "tensors": entries, "tied": dict(tied)}

    def _slot(self, offset: int, tensor: Any) -> Any:
        """The file's bytes for `tensor` at `offset`, as a tensor of its dtype and shape with a
        storage of its own (tensors sharing one storage would look tied to checkpoint writers)."""
        import torch

        key = (offset, str(tensor.dtype), tuple(tensor.shape))
        slot = self._slots.get(key)
        if slot is None:
            count = tensor.numel()
            if count == 0:
                slot = torch.empty(tensor.shape, dtype=tensor.dtype)
            else:
                slot = torch.frombuffer(self._mapped, dtype=tensor.dtype, count=count, offset=offset)
                slot = slot.view(tensor.shape)
            self._slots[key] = slot
        return slot

    def release(self, handle: dict[str, Any]) -> None:
        """Nothing to free: the file is overwritten by the next sync (`close()` removes it)."""

    def close(self) -> None:
        """Remove the file (a server still mapping it keeps the memory until it unmaps)."""
        atexit.unregister(self.close)
        # Adopted tensors keep their slots' mapping alive (the memory goes when they do).
        self._data, self._mapped, self._size, self._slots = None, None, 0, {}
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None

    def _buffer(self, size: int) -> Any:
        """The mapped file, replaced by a new one (new name) when `size` outgrows it."""
        import mmap

        import torch

        if self._data is not None and size <= self._size:
            return self._data
        self.close()
        _remove_orphans(self.directory)
        path = self.directory / f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.bin"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Reserve the memory now: a full tmpfs then fails here (ENOSPC), not with a SIGBUS at the copy.
            os.posix_fallocate(fd, 0, size)
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mapped = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
        self.path, self._size, self._mapped = path, size, mapped
        self._data = torch.frombuffer(mapped, dtype=torch.uint8)
        atexit.register(self.close)
        return self._data


def _adoptable(tensor: Any) -> bool:
    """A plain, dense CPU tensor (not a DTensor or other subclass) may move into the shared file."""
    import torch

    return (
        tensor.device.type == "cpu"
        and type(tensor.data) is torch.Tensor
        and tensor.layout == torch.strided
        and tensor.numel() > 0
    )


def _remove_orphans(directory: Path) -> None:
    """Remove weights files left by processes that are gone (killed before `close()`): a tmpfs
    keeps them, and their memory, until reboot."""
    for path in directory.glob(f"{_PREFIX}*.bin"):
        pid = path.name.removeprefix(_PREFIX).split("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except PermissionError:
            pass  # alive, another user's


def full_weights(model: Any) -> tuple[list[tuple[str, Any]], dict[str, str]]:
    """A model's parameters and buffers to send: each distinct tensor once, and the tied names.

    Returns:
        ([(name, tensor), ...] in the model's order, {tied name: the sent name it shares a tensor with}).
        Non-persistent buffers (e.g. rotary `inv_freq`) are left out: checkpoints do not hold them.
    """
    named: dict[int, str] = {}
    weights: list[tuple[str, Any]] = []
    tied: dict[str, str] = {}
    for name, tensor in model.named_parameters(remove_duplicate=False):
        key = id(tensor)
        if key in named:
            tied[name] = named[key]
        else:
            named[key] = name
            weights.append((name, tensor))
    persistent = set(model.state_dict(keep_vars=True))
    for name, buffer in model.named_buffers(remove_duplicate=False):
        if name in persistent and id(buffer) not in named:
            named[id(buffer)] = name
            weights.append((name, buffer))
    return weights, tied


def folder_weights(folder: Path) -> tuple[list[tuple[str, Any]], dict[str, str]]:
    """The tensors of a Hugging Face folder's safetensors files (tied names are not stored there)."""
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder} has no *.safetensors weights to sync in place")
    weights: list[tuple[str, Any]] = []
    for file in files:
        weights += list(load_file(str(file)).items())
    return weights, {}
