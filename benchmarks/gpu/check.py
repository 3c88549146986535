"""The GPU check of issue 33, ready to run on one GPU in at most 8 minutes; on a machine without
one it runs what the CPU can and says, line by line, what it skipped.

    python benchmarks/gpu/check.py                        # writes benchmarks/results/gpu_check.md
    python benchmarks/gpu/check.py --out /tmp/check.md --steps 2

Parts:
1. fsdp: `trainer.strategy=fsdp` on 1 rank with SmolLM2-135M, bf16 compute
   (`MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`), a few updates on random
   multi-turn rows: loss, grad norm, seconds per update, peak GPU memory. Without a GPU the same
   code runs on the tiny model in fp32 on the CPU (a smoke check of the path, not the GPU result).
2. vllm: a vLLM server on the GPU (bf16, its CUDA venv: `$RLGYM_VLLM_PYTHON`) takes full-weight
   syncs of SmolLM2 (`VLLMPolicy.sync_weights`, in place), each checked by comparing the server's
   prompt logprobs with the trainer's, and timed against a device-to-device copy of the same bytes
   (`Tensor.copy_` between two GPU buffers, synchronised). Skipped without a GPU or without the venv.
Each part's outcome (ok, skipped with why, or failed with the error) goes to the results file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import resource
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "gpu_check.md"
ROWS, TOKENS = 4, 128
TEXT = "<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n42<|im_end|>"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _model(name: str, device: str) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    if name == "smollm2":
        from rlgym_llm.rollout.smollm2 import build_smollm2

        folder = build_smollm2()
    else:
        from rlgym_llm.rollout.tiny_model import build_tiny_model

        folder = build_tiny_model()
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device), folder


def fsdp_part(steps: int) -> dict[str, Any]:
    """FSDP on 1 rank: SmolLM2 in bf16 on the GPU, or the tiny model in fp32 on the CPU."""
    import torch

    from rlgym_llm.rollout.device import Compute
    from rlgym_llm.train.config import OptimConfig
    from rlgym_llm.train.strategy import make_strategy
    from rlgym_llm.train.trainer import PolicyTrainer, TrainBatch

    gpu = _cuda()
    device, name = ("cuda", "smollm2") if gpu else ("cpu", "tiny")
    compute = Compute(torch.device(device), torch.bfloat16 if gpu else torch.float32)
    model, _ = _model(name, device)
    strategy = make_strategy("fsdp", compute=compute)
    trainer = PolicyTrainer(model, optim=OptimConfig(lr=1e-5), micro_batch_size=2, compute=compute, strategy=strategy)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (ROWS, TOKENS), generator=g)
    mask = torch.zeros(ROWS, TOKENS)
    mask[:, TOKENS // 2 :] = 1.0  # the second half: completion tokens
    batch = TrainBatch(
        ids, torch.ones_like(ids), mask, torch.randn(ROWS, TOKENS, generator=g) * mask, torch.zeros(ROWS, TOKENS)
    )
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    rows = []
    for _ in range(steps):
        t0 = time.perf_counter()
        metrics = trainer.update(batch)
        if gpu:
            torch.cuda.synchronize()
        rows.append({"loss": metrics["loss"], "grad_norm": metrics["grad_norm"], "seconds": time.perf_counter() - t0})
    if not all(map(_finite, [r["loss"] for r in rows] + [r["grad_norm"] for r in rows])):
        raise RuntimeError(f"non-finite loss or grad norm: {rows}")
    peak = (
        torch.cuda.max_memory_allocated() / 2**20 if gpu else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    )
    return {
        "model": name,
        "device": device,
        "dtype": str(compute.dtype).removeprefix("torch."),
        "mixed_precision": strategy.mixed_precision,  # type: ignore[attr-defined]
        "steps": rows,
        "peak_mb": peak,
        "peak_kind": "torch.cuda.max_memory_allocated" if gpu else "process ru_maxrss (CPU)",
    }


def _finite(x: float) -> bool:
    return x == x and abs(x) != float("inf")


def vllm_part(syncs: int) -> dict[str, Any]:
    """Weight sync to a vLLM server on the GPU vs a device-to-device copy of the same bytes."""
    import torch
    import transformers

    from rlgym_llm.rollout.vllm_policy import VLLMPolicy

    model, folder = _model("smollm2", "cuda")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    state = [t for t in model.state_dict().values()]
    nbytes = sum(t.numel() * t.element_size() for t in state)
    copies = [torch.empty_like(t) for t in state]
    copy_s = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for dst, src in zip(copies, state):
            dst.copy_(src)
        torch.cuda.synchronize()
        copy_s.append(time.perf_counter() - t0)
    rows = []
    server = {"device": "cuda", "dtype": "bfloat16", "gpu_memory_utilization": 0.3}
    with VLLMPolicy(folder, max_model_len=512, sync="inplace", **server) as policy:
        for i in range(syncs):
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 1e-3)  # a stand-in for an optimizer step
            sync = policy.sync_weights(model)
            diff = _logprob_diff(policy, model, ids)
            rows.append({"sync": i, "seconds": sync.seconds, "mode": sync.mode, "max_abs_logprob_diff": diff})
            if diff > 5e-2:  # bf16 server vs fp32 trainer: ~1e-2 expected; a missed sync is ~1
                raise RuntimeError(f"sync {i} did not deliver the weights: logprobs differ by {diff}")
    sync_p50, copy_p50 = statistics.median(r["seconds"] for r in rows), statistics.median(copy_s)
    return {
        "bytes": nbytes,
        "syncs": rows,
        "sync_p50_s": sync_p50,
        "d2d_copy_p50_s": copy_p50,
        "ratio": sync_p50 / copy_p50,
    }


def _logprob_diff(policy: Any, model: Any, ids: list[int]) -> float:
    import urllib.request

    import torch

    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids], device="cuda")).logits[0].float(), -1)
    expected = [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
    body = {"model": policy.served_name, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0}
    request = urllib.request.Request(
        f"{policy.server.base_url}/completions",
        data=json.dumps({**body, "add_special_tokens": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as resp:
        entries = json.loads(resp.read())["choices"][0]["prompt_logprobs"]
    return max(abs(float(entries[i][str(ids[i])]["logprob"]) - expected[i - 1]) for i in range(1, len(ids)))


def _vllm_missing() -> str | None:
    from rlgym_llm.rollout.vllm_server import VLLMEnvMissingError, find_vllm_python

    try:
        find_vllm_python()
    except VLLMEnvMissingError as e:
        return str(e).splitlines()[0]
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    parts: list[tuple[str, Any, str | None]] = [
        ("fsdp", lambda: fsdp_part(args.steps), None),
        ("vllm", lambda: vllm_part(args.syncs), None if _cuda() else "no GPU (torch.cuda.is_available() is False)"),
    ]
    for name, part, skip in parts:
        if name == "vllm" and skip is None:
            skip = _vllm_missing()
        if skip is not None:
            results[name] = {"status": "skipped", "why": skip}
            print(f"{name}: SKIPPED: {skip}", flush=True)
            continue
        t0 = time.perf_counter()
        try:
            results[name] = {"status": "ok", **part(), "wall_s": time.perf_counter() - t0}
        except Exception as e:  # one part failing must not hide the others' results
            results[name] = {"status": "failed", "error": repr(e), "trace": traceback.format_exc()[-2000:]}
        print(f"{name}: {results[name]['status'].upper()} {json.dumps(results[name])[:400]}", flush=True)
    return results


def markdown(results: dict[str, Any], command: str) -> str:
    import torch

    gpu = torch.cuda.get_device_name(0) if _cuda() else "none"
    lines = [
        "# GPU check (issue 33)",
        "",
        f"`{command}` on {platform.machine()}, GPU: {gpu}, torch {torch.__version__}, {datetime.date.today().isoformat()}.",
        "",
    ]
    fsdp, vllm = results["fsdp"], results["vllm"]
    lines.append(f"## 1. FSDP on 1 rank: {fsdp['status']}")
    lines.append("")
    if fsdp["status"] == "ok":
        if fsdp["device"] == "cpu":
            lines += ["SKIPPED the GPU run (no GPU): the same code ran on the CPU with the tiny model in fp32.", ""]
        lines += [
            f"{fsdp['model']} on {fsdp['device']}, compute {fsdp['dtype']}, mixed precision {fsdp['mixed_precision']};",
            f"peak memory {fsdp['peak_mb']:.0f} MB ({fsdp['peak_kind']}).",
            "",
            "| update | loss | grad norm | seconds |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {i + 1} | {r['loss']:.4f} | {r['grad_norm']:.3f} | {r['seconds']:.2f} |"
            for i, r in enumerate(fsdp["steps"])
        ]
    else:
        lines.append(f"```text\n{fsdp.get('trace') or fsdp.get('why')}\n```")
    lines += ["", f"## 2. vLLM on the GPU, weight sync vs device-to-device copy: {vllm['status']}", ""]
    if vllm["status"] == "ok":
        lines += [
            f"{vllm['bytes'] / 2**20:.0f} MiB of weights: sync p50 {vllm['sync_p50_s']:.3f} s, device-to-device copy p50 "
            f"{vllm['d2d_copy_p50_s']:.4f} s, ratio {vllm['ratio']:.1f}.",
            "",
            "| sync | mode | seconds | max abs logprob diff |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r['sync']} | {r['mode']} | {r['seconds']:.3f} | {r['max_abs_logprob_diff']:.2e} |"
            for r in vllm["syncs"]
        ]
    elif vllm["status"] == "skipped":
        lines.append(f"SKIPPED: {vllm['why']}.")
    else:
        lines.append(f"```text\n{vllm['trace']}\n```")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--steps", type=int, default=3, help="FSDP updates")
    parser.add_argument("--syncs", type=int, default=3, help="weight syncs to the vLLM server")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(min(4, torch.get_num_threads()))
    results = run(args)
    command = "python benchmarks/gpu/check.py" + "".join(f" {a}" for a in sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(results, command))
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print(f"results: {args.out}")
    return 1 if any(r["status"] == "failed" for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
