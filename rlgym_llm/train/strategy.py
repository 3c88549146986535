"""How the update is spread over the ranks (`trainer.strategy`): one object per kind, one interface,
so the trainer and the loop never ask which kind they run.

    strategy = make_strategy("fsdp", Distributed.start(2))   # in each process torchrun started
    rollout = strategy.rollout_model(model)                   # what generation and credit read
    trainer = PolicyTrainer(model, strategy=strategy)         # wraps the model for the trained forward

- `Single`: one process, the model as it is.
- `DDP`: every rank holds the whole model; DistributedDataParallel averages the gradients in the
  last micro-batch's backward pass (`no_sync` before it).
- `FSDP`: FSDP2 (`torch.distributed.fsdp.fully_shard`) on every decoder layer, then on the root:
  each rank keeps 1/N of the parameters, gradients and Adam states, and all-gathers a layer's
  weights just before it runs. On a GPU with bf16 compute the layers compute in bf16 and reduce
  gradients in fp32 (`MixedPrecisionPolicy`); on the CPU (gloo) they stay fp32.

Generation never runs on sharded weights: a sampling engine calls the model outside the update,
one rank at a time, and a collective there would deadlock. `FSDP.rollout_model` keeps a full copy
of the model (made before sharding); after every update `weights()` all-gathers the full state
dict into it (every rank takes part) and hands it to the engine, as weight sync to a server does.
`Single` and `DDP` hand the trained model itself (the engine shares it, no copy).

Checkpoints: `Single`/`DDP` keep the `trainer.pt` format (rank 0 writes the whole state);
`FSDP` writes the model and optimizer with `torch.distributed.checkpoint` (DCP: every rank its own
shards, under `dcp/`), which loads on any number of ranks and into any kind (`load_state`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import torch

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.train.distributed import Distributed

logger = logging.getLogger(__name__)

KINDS = ("single", "ddp", "fsdp")
DCP_FOLDER = "dcp"
"""The sharded model and optimizer state inside a `step_*` checkpoint written by `FSDP`."""


class Strategy:
    """One process (`Single`); `DDP` and `FSDP` override what differs.

    Args:
        dist: the ranks.
        activation_checkpointing: recompute each decoder layer's activations in the backward pass
            instead of keeping them (less memory, about one more forward pass of compute).
    """

    kind: ClassVar[str] = "single"

    def __init__(self, dist: Distributed | None = None, activation_checkpointing: bool = False):
        self.dist = dist or Distributed()
        self.activation_checkpointing = activation_checkpointing

    def rollout_model(self, model: Any) -> Any:
        """The model generation and credit models read: `model` itself (the engine shares it)."""
        return model

    def wrap(self, policy: torch.nn.Module, model: Any) -> torch.nn.Module:
        """The module of the trained forward pass (`policy`, a `MaskedPolicy` over `model`)."""
        self._checkpoint_activations(model)
        return policy

    def gradient_sync(self, wrapped: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager[Any]:
        """The context of a micro-batch's backward pass (`last`: the batch's last one)."""
        return contextlib.nullcontext()

    def passes(self, n: int) -> int:
        """How many forward/backward passes this rank runs for its `n` micro-batches (the extra
        ones train on a row with no token: zero gradient)."""
        return n

    def clip_grad_norm(self, params: Iterable[torch.Tensor], max_norm: float) -> float:
        """Clip the gradients by their global norm (over every rank's shards); returns the norm before."""
        norm = torch.nn.utils.clip_grad_norm_(list(params), max_norm)
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor]:
        """The whole model's state (every rank calls it; every rank gets it)."""
        return model.state_dict()

    def weights(self, model: Any) -> Any:
        """What the sampling engine syncs from after an update: a model with the full weights."""
        return model

    def save_state(self, folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Write (or return, for rank 0's `trainer.pt`) the model and optimizer state; every rank calls it."""
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}

    def load_state(self, folder: Path, state: dict[str, Any], model: Any, optimizer: torch.optim.Optimizer) -> None:
        """Restore what `save_state` wrote (from `trainer.pt`'s `state`, or the sharded `dcp/` folder
        a checkpoint of any process count holds)."""
        if "model" in state:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        else:
            _load_dcp(folder, model, optimizer)

    def barrier(self) -> None:
        self.dist.barrier()

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        return self.dist.sum(values)

    def _checkpoint_activations(self, model: Any) -> None:
        if not self.activation_checkpointing:
            return
        # non-reentrant: works with frozen inputs (LoRA) and with FSDP's hooks
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5's name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        elif hasattr(model, "gradient_checkpointing_enable"):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        else:
            raise ConfigError(
                ["trainer.activation_checkpointing needs a Hugging Face model (gradient_checkpointing_enable)"]
            )


class Single(Strategy):
    """One process: the model as it is."""


class DDP(Strategy):
    """DistributedDataParallel: the whole model on every rank, gradients averaged once per batch."""

    kind: ClassVar[str] = "ddp"

    def wrap(self, policy: torch.nn.Module, model: Any) -> torch.nn.Module:
        self._checkpoint_activations(model)
        if not self.dist.enabled:
            return policy
        from torch.nn.parallel import DistributedDataParallel

        device = next(policy.parameters()).device
        ids = [device.index if device.index is not None else self.dist.local_rank] if device.type == "cuda" else None
        # no buffer broadcast: it is a collective in every forward pass, and the ranks run different
        # numbers of micro-batches (only the last backward synchronises)
        return DistributedDataParallel(policy, device_ids=ids, forward_sync_buffers=False)

    def gradient_sync(self, wrapped: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager[Any]:
        no_sync = getattr(wrapped, "no_sync", None)
        return no_sync() if no_sync is not None and not last else contextlib.nullcontext()


class FSDP(Strategy):
    """FSDP2: parameters, gradients and optimizer states sharded over the ranks, layer by layer.

    Args:
        dist: the ranks (one process works too: a process group of 1 is made if none exists).
        activation_checkpointing: see `Strategy`.
        mixed_precision: bf16 parameters and fp32 gradient reduction in the sharded layers (set by
            `make_strategy` on a GPU with bf16 compute; the CPU path keeps fp32).
    """

    kind: ClassVar[str] = "fsdp"

    def __init__(
        self, dist: Distributed | None = None, activation_checkpointing: bool = False, mixed_precision: bool = False
    ):
        super().__init__(dist, activation_checkpointing)
        self.mixed_precision = mixed_precision
        self._copies: dict[int, Any] = {}  # id(trained model) -> its full copy for generation
        import torch.distributed as tdist

        if not tdist.is_initialized():  # one process: FSDP still needs a process group
            backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
            tdist.init_process_group(backend, store=tdist.HashStore(), rank=0, world_size=1)

    def rollout_model(self, model: Any) -> Any:
        """A full copy of `model`, made before it is sharded (call it before `wrap`), updated by `weights()`."""
        if id(model) not in self._copies:
            if _is_sharded(model):
                raise RuntimeError("FSDP.rollout_model needs the model before it is sharded (call it before wrap)")
            self._copies[id(model)] = copy.deepcopy(model).eval()
            self._copies[id(model)].requires_grad_(False)
        return self._copies[id(model)]

    def wrap(self, policy: torch.nn.Module, model: Any) -> torch.nn.Module:
        import torch.distributed as tdist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self.rollout_model(model)
        self._checkpoint_activations(model)
        # the mesh on the model's device: fully_shard's default is the machine's accelerator, which
        # is wrong for a CPU run on a GPU machine
        device = next(model.parameters()).device.type
        kwargs: dict[str, Any] = {"mesh": init_device_mesh(device, (tdist.get_world_size(),))}
        if self.mixed_precision:
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in decoder_layers(model):
            fully_shard(layer, **kwargs)
        # the root holds the rest (embeddings, final norm, head): `policy` calls the whole model, so
        # its forward is where they are gathered
        fully_shard(policy, **kwargs)
        return policy

    def passes(self, n: int) -> int:
        # every pass all-gathers each layer's weights: the ranks run the same number of them
        return max(self.dist.gather([n])) if self.dist.enabled else n

    def gradient_sync(self, wrapped: torch.nn.Module, last: bool) -> contextlib.AbstractContextManager[Any]:
        # every micro-batch's backward reduce-scatters into the sharded gradient: skipping it (as DDP's
        # no_sync does) would keep a whole unsharded gradient per rank, the memory FSDP exists to save
        return contextlib.nullcontext()

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state: dict[str, Any] = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        return state

    def weights(self, model: Any) -> Any:
        full = self.rollout_model(model)
        into = dict(full.named_parameters())
        # one parameter gathered at a time (the same order on every rank: each is a collective), so
        # no whole second state dict is ever held next to the copy
        with torch.no_grad():
            for name, param in model.named_parameters():
                into[name].copy_(param.full_tensor() if hasattr(param, "full_tensor") else param)
        return full

    def save_state(self, folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(folder / DCP_FOLDER))
        return {}

    def load_state(self, folder: Path, state: dict[str, Any], model: Any, optimizer: torch.optim.Optimizer) -> None:
        if "model" not in state:
            _load_dcp(folder, model, optimizer)
            return
        # a whole-state checkpoint (single, DDP): every rank keeps its shard of it
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        optim = _fqn_optimizer_state(state["optimizer"], model, optimizer)
        options = StateDictOptions(full_state_dict=True)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=optim, options=options)


def _is_sharded(model: Any) -> bool:
    return any(type(p).__name__ == "DTensor" for p in model.parameters())


def _load_dcp(folder: Path, model: Any, optimizer: torch.optim.Optimizer) -> None:
    """Load a DCP checkpoint into `model` and `optimizer`, whatever their sharding (N ranks -> M)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    path = folder / DCP_FOLDER
    if not path.exists():
        raise FileNotFoundError(f"{folder} holds neither trainer.pt's model state nor a sharded {DCP_FOLDER}/ folder")
    model_state, optim_state = get_state_dict(model, optimizer)
    # loaded in place: the tensors of these dicts (this rank's shards, or whole ones) are filled
    dcp.load({"model": model_state, "optim": optim_state}, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=model_state, optim_state_dict=optim_state)


def read_sharded_model(folder: Path, target: dict[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """The model weights of an FSDP checkpoint, whole, in this process alone (no collective: rank 0
    exports while the others may wait elsewhere).

    Args:
        folder: a `step_*` checkpoint with a `dcp/` folder.
        target: a state dict of the model's shapes, filled in place and returned; None returns the
            saved names only (each mapped to an empty tensor), to see what the checkpoint holds.
    """
    import torch.distributed.checkpoint as dcp

    path = folder / DCP_FOLDER
    if target is None:
        names = dcp.FileSystemReader(str(path)).read_metadata().state_dict_metadata
        return {k.removeprefix("model."): torch.empty(0) for k in names if k.startswith("model.")}
    box = {"model": target}
    dcp.load(box, checkpoint_id=str(path), no_dist=True)
    return box["model"]


def _fqn_optimizer_state(saved: dict[str, Any], model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """`optimizer.state_dict()` of an unsharded run (parameters numbered in group order), keyed by
    parameter name as `set_state_dict` wants; the trainer builds its groups from the trainable
    parameters in `model.parameters()` order, which sharding keeps."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    groups = []
    for group in saved["param_groups"]:
        groups.append({**group, "params": [names[i] for i in group["params"]]})
    return {"state": {names[i]: s for i, s in saved["state"].items()}, "param_groups": groups}


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The transformer blocks of a Hugging Face causal LM (peft-wrapped or not): the units FSDP
    shards and gathers one at a time."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    body = base.get_decoder() if hasattr(base, "get_decoder") else getattr(base, "model", None)
    layers = getattr(body, "layers", None)
    if layers is None:
        raise ConfigError(
            [f"trainer.strategy=fsdp: no decoder layers found in {type(base).__name__} (expected model.layers)"]
        )
    return list(layers)


def make_strategy(
    kind: str,
    dist: Distributed | None = None,
    activation_checkpointing: bool = False,
    compute: Any = None,
) -> Strategy:
    """The strategy `trainer.strategy` names (`auto`: ddp with several processes, else single).

    Raises:
        ConfigError: an unknown kind, or single with several processes.
    """
    dist = dist or Distributed()
    if kind == "auto":
        kind = "ddp" if dist.enabled else "single"
    if kind not in KINDS:
        raise ConfigError([f"trainer.strategy={kind!r} is not one of auto, {', '.join(KINDS)}"])
    if kind == "single" and dist.enabled:
        raise ConfigError(
            [f"trainer.strategy=single runs one process but {dist.world} were started: use ddp or fsdp, or nproc=1"]
        )
    if kind == "fsdp":
        gpu_bf16 = compute is not None and compute.device.type == "cuda" and compute.dtype == torch.bfloat16
        return FSDP(dist, activation_checkpointing, mixed_precision=gpu_bf16)
    return (DDP if kind == "ddp" else Single)(dist, activation_checkpointing)
