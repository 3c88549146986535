"""Where a local model computes, and in what precision: one setting for the trainer and the
transformers policy (they share the model).

    compute = resolve("auto", "auto")     # cuda + bfloat16 when torch sees a GPU, else cpu + float32
    model.to(compute.device)
    with compute.autocast():
        logits = model(input_ids=ids.to(compute.device)).logits.float()

Weights stay float32 in every mode: they are the optimizer's master copy, so small updates are not
rounded away. bfloat16 is the precision of the matrix products, through `torch.autocast` (on CPU too,
which is how the tests exercise that code path on a machine without a GPU). Logprobs, losses and
sampling are computed in float32 from the logits.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

from rlgym_llm.core.errors import ConfigError

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")


@dataclass(frozen=True)
class Compute:
    """A resolved device and compute dtype.

    Args:
        device: where the model's weights and every batch live.
        dtype: the matrix-product precision (float32: no autocast).
    """

    device: torch.device
    dtype: torch.dtype = torch.float32

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """`torch.autocast` to `dtype` on `device` (a no-op context for float32)."""
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    @classmethod
    def of(cls, model: Any) -> Compute:
        """Float32 on the device of `model`'s weights (what a model built without settings runs as)."""
        try:
            return cls(next(model.parameters()).device)
        except (StopIteration, AttributeError):
            return cls(torch.device("cpu"))


def resolve(device: str = "auto", dtype: str = "auto") -> Compute:
    """`device` (auto, cpu, cuda or cuda:N) and `dtype` (auto, float32, bfloat16) as a `Compute`.

    auto picks cuda when torch sees a GPU; dtype auto picks bfloat16 on a GPU and float32 on CPU.

    Raises:
        ConfigError: an unknown name, or cuda asked for where torch sees no GPU.
    """
    problems = []
    if device.split(":")[0] not in DEVICES:
        problems.append(f"device={device!r}: choose one of {', '.join(DEVICES)} (or cuda:N)")
    if dtype not in DTYPES:
        problems.append(f"dtype={dtype!r}: choose one of {', '.join(DTYPES)}")
    if problems:
        raise ConfigError(problems)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            [
                f"device={device}: torch {torch.__version__} sees no GPU; use device=cpu (or auto), or install a CUDA build"
            ]
        )
    dev = torch.device(device)
    if dtype == "auto":
        dtype = "bfloat16" if dev.type == "cuda" else "float32"
    return Compute(dev, getattr(torch, dtype))
