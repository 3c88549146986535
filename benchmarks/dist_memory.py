"""Memory per rank of DDP and FSDP training (issue 33, item 4): measured on the CPU, computed for
large models.

    python benchmarks/dist_memory.py                       # tiny model and SmolLM2-135M at 1/2/4 ranks (~14 GB at 4 SmolLM2 ranks)
    python benchmarks/dist_memory.py --models tiny --no-write

Measured: each configuration (model, strategy, ranks) runs under torchrun (gloo, 1 thread per
rank) and takes 2 `PolicyTrainer.update`s on 4 rows per rank of 64 tokens (micro-batches of 2).
Each rank then reports
- state MB: the bytes of the tensors it holds for training, counted from the live tensors: its
  parameters (its shards under FSDP), their gradients and AdamW's two moments (fp32 here);
- copy MB: the full copy of the weights FSDP keeps for generation (`FSDP.rollout_model`; 0 for
  DDP, whose engine shares the trained model);
- peak RSS MB: the process's `ru_maxrss`, and "step peak": how far building the trainer and the
  updates raised it above the RSS with the model loaded (activations, all-gather buffers and
  allocator slack included; noisy on a CPU, where freed memory is not always returned).
The table shows rank 0 (the ranks hold equal shares, +-1 row of a shard).

Computed: bytes per rank for training state = P x (w + g + a) / S, with P parameters, w = 4 (fp32
weights: the optimizer's master copy), g = 4 (fp32 gradients), a = 8 (AdamW's two fp32 moments),
S = 1 for DDP and S = N (the ranks) for FSDP; FSDP adds a transient all-gathered layer in the
compute dtype (bf16 on a GPU: 2 bytes per parameter of the largest layer, twice for prefetch), and
in this library's design a full copy of the weights per rank for generation and weight sync
(4 x P fp32). Activations are left out (they depend on batch and length; activation checkpointing
cuts them).

Writes benchmarks/results/dist_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
ROWS, TOKENS, STEPS = 4, 64, 2
# (name, parameters, hidden size, layers, vocabulary matrices: 1 when tied) of the computed rows: Qwen2.5's
LARGE = [("1.5B", 1.54e9, 1536, 28, 1), ("7B", 7.62e9, 3584, 28, 2), ("32B", 32.8e9, 5120, 64, 2)]
VOCAB = 152064
MB, GB = 2**20, 2**30


def _rank(model_name: str, kind: str, out: Path) -> None:
    """One rank of one configuration (run under torchrun)."""
    import torch

    from rlgym_llm.train.config import OptimConfig
    from rlgym_llm.train.distributed import Distributed
    from rlgym_llm.train.strategy import make_strategy
    from rlgym_llm.train.trainer import PolicyTrainer, TrainBatch

    torch.set_num_threads(1)
    dist = Distributed.start(int(os.environ.get("WORLD_SIZE", "1")))
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(_model_dir(model_name), dtype=torch.float32)
    loaded = _rss_mb()
    trainer = PolicyTrainer(model, optim=OptimConfig(lr=1e-5), micro_batch_size=2, strategy=make_strategy(kind, dist))
    g = torch.Generator().manual_seed(dist.rank)
    ids = torch.randint(0, model.config.vocab_size, (ROWS, TOKENS), generator=g)
    mask = torch.zeros(ROWS, TOKENS)
    mask[:, TOKENS // 2 :] = 1.0
    batch = TrainBatch(
        ids, torch.ones_like(ids), mask, torch.randn(ROWS, TOKENS, generator=g) * mask, torch.zeros(ROWS, TOKENS)
    )
    for _ in range(STEPS):
        trainer.update(batch)
    params = [p for p in model.parameters()]
    state = _bytes(params) + _bytes([p.grad for p in params if p.grad is not None])
    state += _bytes([v for s in trainer.optimizer.state.values() for v in s.values() if torch.is_tensor(v)])
    copy = 0 if trainer.rollout_model is model else _bytes(list(trainer.rollout_model.parameters()))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    row = {
        "model": model_name,
        "strategy": kind,
        "ranks": dist.world,
        "rank": dist.rank,
        "params": sum(p.numel() for p in params),
        "state_mb": state / MB,
        "copy_mb": copy / MB,
        "peak_rss_mb": peak,
        "step_peak_mb": peak - loaded,
    }
    (out / f"rank{dist.rank}.json").write_text(json.dumps(row))
    dist.close()


def _bytes(tensors: list[Any]) -> int:
    """Bytes of `tensors` as this rank holds them (a DTensor's local shard), each storage once."""
    seen, total = set(), 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        key = local.untyped_storage().data_ptr()
        if key not in seen:
            seen.add(key)
            total += local.untyped_storage().nbytes()
    return total


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def _model_dir(name: str) -> Path:
    if name == "tiny":
        from rlgym_llm.rollout.tiny_model import build_tiny_model

        return build_tiny_model()
    from rlgym_llm.rollout.smollm2 import build_smollm2

    return build_smollm2()


def measure(model: str, kind: str, ranks: int) -> dict[str, Any]:
    """Run one configuration; rank 0's row."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    with tempfile.TemporaryDirectory() as tmp:
        launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"]
        cmd = [*launch, __file__, "--rank", model, kind, tmp]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0:
            raise RuntimeError(f"{model} {kind} x{ranks} failed:\n{done.stderr[-3000:]}")
        return json.loads((Path(tmp) / "rank0.json").read_text())


def computed() -> list[dict[str, Any]]:
    """Training state per rank by the formula in the module docstring."""
    rows = []
    for name, p, hidden, layers, matrices in LARGE:
        layer = (p - matrices * VOCAB * hidden) / layers  # parameters of one decoder layer
        for kind in ("ddp", "fsdp"):
            for n in (1, 2, 4):
                shards = n if kind == "fsdp" else 1
                state = p * 16 / shards
                gathered = 2 * 2 * layer if kind == "fsdp" else 0.0
                copy = 4 * p if kind == "fsdp" else 0.0
                rows.append(
                    {
                        "model": name,
                        "strategy": kind,
                        "ranks": n,
                        "state_gb": state / GB,
                        "gathered_gb": gathered / GB,
                        "copy_gb": copy / GB,
                    }
                )
    return rows


def write(measured: list[dict[str, Any]], command: str) -> Path:
    when = datetime.date.today().isoformat()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# Memory per rank: DDP and FSDP",
        "",
        f"`{command}` on {platform.machine()}, {os.cpu_count()} cores (load: {load}), CPU only (gloo), {when}.",
        "",
        "## Measured (CPU, rank 0)",
        "",
        f"Two updates of {ROWS} rows x {TOKENS} tokens per rank; the columns are defined in `benchmarks/dist_memory.py`.",
        "",
        "| model | params | strategy | ranks | training state MB | generation copy MB | peak RSS MB | step peak MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in measured:
        lines.append(
            f"| {r['model']} | {r['params'] / 1e6:.1f}M | {r['strategy']} | {r['ranks']} | {r['state_mb']:.1f} | "
            f"{r['copy_mb']:.1f} | {r['peak_rss_mb']:.0f} | {r['step_peak_mb']:.0f} |"
        )
    lines += [
        "",
        "## Computed (not run: no GPU here)",
        "",
        "Training state per rank = P x (4 weights + 4 gradients + 8 AdamW moments) bytes / S, with S = 1 for DDP",
        "and S = N ranks for FSDP (fp32 master weights, gradients and moments; bf16 only in the compute).",
        "FSDP adds the all-gathered layer in bf16 (2 bytes x its parameters, x2 for prefetch) and, in this",
        "library, a full fp32 copy of the weights per rank for generation and weight sync (4 x P).",
        "Activations are not included.",
        "",
        "| model | strategy | ranks | training state GB | gathered layers GB | generation copy GB | total GB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in computed():
        total = r["state_gb"] + r["gathered_gb"] + r["copy_gb"]
        lines.append(
            f"| {r['model']} | {r['strategy']} | {r['ranks']} | {r['state_gb']:.1f} | {r['gathered_gb']:.2f} | "
            f"{r['copy_gb']:.1f} | {total:.1f} |"
        )
    path = RESULTS / "dist_memory.md"
    path.write_text("\n".join(lines) + "\n")
    (RESULTS / "dist_memory.json").write_text(json.dumps({"measured": measured, "computed": computed()}, indent=1))
    return path


def main() -> None:
    if sys.argv[1:2] == ["--rank"]:
        _rank(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2"])
    parser.add_argument("--ranks", nargs="+", type=int, default=[1, 2, 4])
    # 4 ranks of SmolLM2 hold ~4 x 3.5 GB: lower it on a machine with less spare memory
    parser.add_argument("--smollm2-ranks", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    rows = []
    for model in args.models:
        for kind in ("ddp", "fsdp"):
            for n in args.smollm2_ranks if model == "smollm2" else args.ranks:
                row = measure(model, kind, n)
                print(json.dumps(row), flush=True)
                rows.append(row)
    if not args.no_write:
        command = "python benchmarks/dist_memory.py " + " ".join(sys.argv[1:])
        print(write(rows, command.strip()))


if __name__ == "__main__":
    main()
