"""Data-parallel training over the processes torchrun starts: ranks and the collectives the loop
needs (how the model is spread over them is `train.strategy`'s: single, DDP or FSDP).

    dist = Distributed.start(nproc=2, device_type="cpu")   # in each process torchrun started
    lo, hi = dist.shard(8)                                  # this rank's tasks: [lo, hi)
    everyone = dist.gather(mine)                            # every rank's items, in rank order
    credit = dist.broadcast(credit if dist.main else None)  # rank 0's object on every rank

With one process (`Distributed()`, rank 0 of 1) every collective returns its input: the loop and the
trainer run the same code either way. Tensors go through the default process group (gloo on CPU,
NCCL on GPUs); Python objects (trajectories, credit results) through a gloo group, so they never
have to be copied onto a GPU.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rlgym_llm.core.errors import ConfigError

TIMEOUT = datetime.timedelta(hours=2)
"""How long a rank waits in a collective: rank 0's held-out evaluations and checkpoints run while
the other ranks wait for the next step's gather."""


@dataclass
class Distributed:
    """This process's place among the data-parallel ranks (`rank` of `world`).

    Args:
        rank: 0 .. world - 1; rank 0 evaluates, logs and checkpoints.
        world: the number of processes.
        local_rank: the rank on this machine (its GPU index).
        objects: the process group that carries Python objects (gloo); None with one process.
    """

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    objects: Any = None

    @property
    def main(self) -> bool:
        """Whether this is rank 0."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        """Whether there is more than one process."""
        return self.world > 1

    @classmethod
    def start(cls, nproc: int, device_type: str = "cpu") -> Distributed:
        """Join the process group torchrun set up (its `WORLD_SIZE`, `RANK`, `LOCAL_RANK` and
        rendezvous variables), with NCCL on CUDA and gloo on CPU; one process needs none.

        Raises:
            ConfigError: the number of processes torchrun started is not `nproc`.
        """
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world != nproc:
            how = (
                f"launch it with `rlgym train trainer.nproc={nproc}` (it starts torchrun) or "
                f"`torchrun --nproc_per_node {nproc} -m rlgym_llm.cli.main train trainer.nproc={nproc} ...`"
            )
            raise ConfigError([f"trainer.nproc={nproc} but {world} process(es) were started: {how}"])
        if world == 1:
            return cls()
        import torch.distributed as dist

        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        backend = "nccl" if device_type == "cuda" else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(local_rank)  # "cuda" then means this rank's GPU
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=TIMEOUT)
        objects = dist.new_group(backend="gloo", timeout=TIMEOUT) if backend != "gloo" else dist.group.WORLD
        return cls(dist.get_rank(), dist.get_world_size(), local_rank, objects)

    def close(self, failed: bool = False) -> None:
        """Leave the process group: after a last barrier, or (`failed`) at once, since the other
        ranks may be waiting in another collective (torchrun then stops them)."""
        if self.enabled:
            import torch.distributed as dist

            if not failed:
                self.barrier()
            dist.destroy_process_group()

    def barrier(self) -> None:
        """Wait until every rank gets here."""
        if self.enabled:
            import torch.distributed as dist

            dist.barrier(group=self.objects)

    def shard(self, n: int) -> tuple[int, int]:
        """This rank's contiguous block [lo, hi) of n items: the first n % world ranks get one more.
        The blocks in rank order are 0 .. n, so gathering them restores the order of one process."""
        base, extra = divmod(n, self.world)
        lo = self.rank * base + min(self.rank, extra)
        return lo, lo + base + (self.rank < extra)

    def gather(self, items: Sequence[Any]) -> list[Any]:
        """Every rank's `items`, concatenated in rank order (on every rank)."""
        if not self.enabled:
            return list(items)
        import torch.distributed as dist

        parts: list[Any] = [None] * self.world
        dist.all_gather_object(parts, list(items), group=self.objects)
        return [x for part in parts for x in part]

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (the others pass anything, e.g. None)."""
        if not self.enabled:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.objects)
        return box[0]

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        """The sum over ranks of each value (float64 on CPU, every rank passes the same keys)."""
        if not self.enabled or not values:
            return dict(values)
        import torch.distributed as dist

        keys = sorted(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
        dist.all_reduce(t, group=self.objects)
        return dict(zip(keys, t.tolist()))


class NodeServer:
    """One inference server per machine, shared by that machine's ranks (a `TrainablePolicy`).

    The machine's local rank 0 owns the server (`owner`, e.g. a started `VLLMPolicy`): it syncs
    the weights to it and stops it. The other ranks send their requests through a client
    (`make_client(base_url, served_name, max_context)`, e.g. an `OpenAICompatiblePolicy`) pointed at
    the owner's address and served name, which are looked up again after every sync (a LoRA sync
    changes the name, a restart may change the address). `sync_weights` is a collective: every rank
    calls it after the same update (the loop does), and it returns once the machine's server holds
    the new weights, so no rank samples from the old ones.

    Args:
        dist: the ranks.
        owner: the server's policy on local rank 0; None on the other ranks.
        make_client: builds a client on the other ranks.
    """

    def __init__(self, dist: Distributed, owner: Any, make_client: Any):
        self.dist, self.owner, self._make_client = dist, owner, make_client
        self.client: Any = None
        self._locate()

    def _locate(self) -> None:
        """Every rank learns its machine's server address and served name (a gather: collective)."""
        import socket

        host = socket.gethostname()
        served = None
        if self.owner is not None:
            served = (self.owner.server.base_url, self.owner.served_name, self.owner.server.max_model_len)
        table = self.dist.gather([(host, served)])
        found = [s for h, s in table if h == host and s is not None]
        if not found:
            raise RuntimeError(f"no rank on {host} owns an inference server (its local rank 0 should)")
        url, name, max_context = found[0]
        if self.owner is not None:
            return
        if self.client is None:
            self.client = self._make_client(url, name, max_context)
        elif (self.client.base_url, self.client.model) != (url.rstrip("/"), name):
            self.client.base_url, self.client.model = url.rstrip("/"), name
            self.client.reset_connections()

    async def generate(self, prompt_token_ids: Sequence[int], sampling: Any) -> Any:
        """Sample from this machine's server."""
        return await (self.owner if self.owner is not None else self.client).generate(prompt_token_ids, sampling)

    def sync_weights(self, model: Any) -> Any:
        """The owner syncs `model` to the server; every rank waits for it (a collective)."""
        result = self.owner.sync_weights(model) if self.owner is not None else None
        self._locate()
        return result

    async def close(self) -> None:
        """Close the client, or (the owner) stop the server."""
        if self.owner is not None:
            await self.owner.close()
        elif self.client is not None:
            await self.client.close()
