"""Multi-turn rollout throughput through `RolloutManager` against a vLLM server, vs raw HTTP.

One vLLM server (the tiny model) serves both columns in one run:
- manager: `RolloutManager` + `ToolCallingAgent` + `OpenAICompatiblePolicy` on GuessNumberEnv
  (multi-turn: chat-template rendering, parsing, env steps, token bookkeeping, JSONL-ready trajectories);
- raw: the very same generation requests (the prompts the manager sent, same max_tokens and sampling),
  replayed with plain aiohttp. Each episode's requests are replayed in order, at most `concurrency`
  episodes at once, as the manager runs them: the difference is the manager's own cost.

Rounds alternate in ABBA order (manager, raw, raw, manager, ...) so background load hits both columns alike.

    python benchmarks/rollout_vllm.py                      # 8 tasks x 4 samples, 4 turns, 64 tokens, 6 rounds
    python benchmarks/rollout_vllm.py --tasks 8 --rounds 2

Needs the vLLM venv (`make vllm-env`). Writes benchmarks/results/rollout_vllm.{json,md}; a hand-written
`## Analysis` section already in the .md is kept below the new numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp

import rlgym_llm
from rlgym_agents.tool_calling import ToolCallingAgent
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.rollout.openai_policy import OpenAICompatiblePolicy
from rlgym_llm.rollout.policy import Completion, SamplingParams
from rlgym_llm.rollout.tiny_model import build_tiny_model
from rlgym_llm.rollout.vllm_server import VLLMServer, find_vllm_python

RESULTS = Path(__file__).resolve().parent / "results"
ENV_ID = "bench/Guess-v0"


Request = tuple[list[int], SamplingParams, float, float]  # prompt, sampling, start, end (perf_counter)


class Recorder:
    """Pass-through policy that records every request (with its start and end), in the order sent."""

    def __init__(self, inner: OpenAICompatiblePolicy):
        self.inner = inner
        self.requests: list[Request] = []

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        start = time.perf_counter()
        completion = await self.inner.generate(prompt_token_ids, sampling)
        self.requests.append((list(prompt_token_ids), sampling, start, time.perf_counter()))
        return completion

    def chains(self) -> list[list[Request]]:
        """The requests grouped by episode, in order.

        An episode's context only grows, so each request extends the prompt of its episode's previous
        one: attach it to a chain whose last prompt is its prefix and which ended before it started
        (of several, as with identical openings, the one that ended last), else it opens a chain.
        """
        chains: list[list[Request]] = []
        for request in sorted(self.requests, key=lambda r: r[2]):
            prompt, start = request[0], request[2]
            homes = [
                c
                for c in chains
                if c[-1][3] <= start and len(c[-1][0]) < len(prompt) and prompt[: len(c[-1][0])] == c[-1][0]
            ]
            home = max(homes, key=lambda c: c[-1][3]) if homes else None
            if home is None:
                chains.append([request])
            else:
                home.append(request)
        return chains


def timing(chains: list[list[Request]]) -> dict[str, float]:
    """Where an episode's time goes: in requests, and between one request's answer and the next request.

    The gap is the client's own time per turn (parse, env step, rendering, bookkeeping, event-loop waits).
    """
    latency = [end - start for chain in chains for _, _, start, end in chain]
    gaps = [b[2] - a[3] for chain in chains for a, b in itertools.pairwise(chain)]
    return {
        "request_latency_ms_median": 1000 * statistics.median(latency),
        "gap_ms_median": 1000 * statistics.median(gaps) if gaps else 0.0,
        "gap_ms_mean": 1000 * statistics.fmean(gaps) if gaps else 0.0,
    }


async def run_manager(server: VLLMServer, agent: ToolCallingAgent, args: argparse.Namespace, seed0: int):
    config = RolloutConfig(
        group_size=args.group,
        max_turns=args.turns,
        max_context=args.max_model_len,
        concurrency=args.concurrency,
        sampling=SamplingParams(max_tokens=args.max_tokens, temperature=1.0),
        token_check="off",  # a debugging aid: decoding every context would be benchmark noise
    )
    async with OpenAICompatiblePolicy(
        server.base_url, model=server.model_name, max_connections=args.concurrency
    ) as policy:
        recorder = Recorder(policy)
        manager = RolloutManager(ENV_ID, agent, recorder, config)
        start, cpu = time.perf_counter(), time.process_time()
        trajectories = await manager.run(list(range(seed0, seed0 + args.tasks)))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    failures = sum(len(t.failures) for t in trajectories)
    if failures:
        raise RuntimeError(f"{failures} failures in the manager run: {trajectories[0].failures}")
    tokens = sum(len(turn.completion_token_ids) for t in trajectories for turn in t.turns)
    chains = recorder.chains()
    if len(chains) != len(trajectories):
        raise RuntimeError(f"{len(chains)} request chains for {len(trajectories)} episodes")
    stats = {"tokens": tokens, "requests": len(recorder.requests), "episodes": len(trajectories)}
    return {**stats, "wall_s": wall, "client_cpu_s": cpu, **timing(chains)}, chains


async def run_raw(server: VLLMServer, chains: list[list[Request]], concurrency: int):
    """Replay the recorded requests with plain aiohttp: each chain in order, `concurrency` chains at once."""
    url = f"{server.base_url}/completions"
    tokens = 0
    sem = asyncio.Semaphore(concurrency)
    replayed: list[list[Request]] = []

    async def chain(session: aiohttp.ClientSession, requests: list[Request]) -> None:
        nonlocal tokens
        done: list[Request] = []
        replayed.append(done)
        async with sem:
            for prompt, sp, _, _ in requests:
                start = time.perf_counter()
                body = {
                    "model": server.model_name,
                    "prompt": prompt,
                    "max_tokens": sp.max_tokens,
                    "temperature": sp.temperature,
                    "top_p": sp.top_p,
                    "logprobs": 0,
                    "return_token_ids": True,
                }
                async with session.post(url, json=body) as resp:
                    resp.raise_for_status()
                    payload = await resp.json()
                tokens += len(payload["choices"][0]["token_ids"])
                done.append((prompt, sp, start, time.perf_counter()))

    # As the policy does: idle connections go before the server's 5 s keep-alive closes them.
    connector = aiohttp.TCPConnector(limit=concurrency, keepalive_timeout=4.0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as session:
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(chain(session, c) for c in chains))
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    stats = {"tokens": tokens, "requests": sum(map(len, chains)), "episodes": len(chains)}
    return {**stats, "wall_s": wall, "client_cpu_s": cpu, **timing(replayed)}


def _machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return f"{platform.system()} {platform.machine()}, {cpu}, {len(os.sched_getaffinity(0))} cores"


def _vllm_version() -> str:
    out = subprocess.run(
        [str(find_vllm_python()), "-c", "import vllm, torch; print(vllm.__version__, torch.__version__)"],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer

    rlgym_llm.register(ENV_ID, "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10)
    model_dir = build_tiny_model()
    agent = ToolCallingAgent(AutoTokenizer.from_pretrained(model_dir))
    rounds: list[dict[str, Any]] = []
    async with VLLMServer(model_dir, max_model_len=args.max_model_len) as server:
        warm, chains = await run_manager(server, agent, args, seed0=10_000)
        print(f"warm-up: {warm}", flush=True)
        for r in range(args.rounds):
            # ABBA order: in odd rounds raw goes first (replaying the previous manager run's requests),
            # so a drift in background load does not favour one column.
            if r % 2:
                raw = await run_raw(server, chains, args.concurrency)
                managed, chains = await run_manager(server, agent, args, seed0=r * args.tasks)
            else:
                managed, chains = await run_manager(server, agent, args, seed0=r * args.tasks)
                raw = await run_raw(server, chains, args.concurrency)
            rounds.append({"manager": managed, "raw": raw})
            print(
                f"round {r}: manager {managed['tokens'] / managed['wall_s']:.0f} tok/s, "
                f"raw {raw['tokens'] / raw['wall_s']:.0f} tok/s",
                flush=True,
            )
    return {"rounds": rounds}


def report(result: dict[str, Any], args: argparse.Namespace, command: str) -> str:
    rows, rates = [], {"manager": [], "raw": []}
    for i, r in enumerate(result["rounds"]):
        for mode in ("manager", "raw"):
            m = r[mode]
            rate = m["tokens"] / m["wall_s"]
            rates[mode].append(rate)
            rows.append(
                f"| {i} | {mode} | {m['episodes']} | {m['requests']} | {m['tokens']} | {m['wall_s']:.2f} "
                f"| {m['client_cpu_s']:.2f} | {m['request_latency_ms_median']:.0f} | {m['gap_ms_median']:.1f} "
                f"| {m['gap_ms_mean']:.1f} | {rate:.0f} |"
            )
    ratios = [m / r for m, r in zip(rates["manager"], rates["raw"])]
    cpu_ms = {
        mode: statistics.median(1000 * r[mode]["client_cpu_s"] / r[mode]["requests"] for r in result["rounds"])
        for mode in ("manager", "raw")
    }
    result["summary"] = {
        "client_cpu_ms_per_request": cpu_ms,
        "manager_tokens_per_s_median": statistics.median(rates["manager"]),
        "raw_tokens_per_s_median": statistics.median(rates["raw"]),
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
    }
    s = result["summary"]
    return "\n".join(
        [
            "# Rollout throughput through RolloutManager vs raw HTTP to one vLLM server",
            "",
            f"- Date: {datetime.date.today().isoformat()}",
            f"- Machine: {_machine()}; vLLM, torch (server venv): {_vllm_version()}; Python {sys.version.split()[0]}",
            f"- Command: `{command}`",
            f"- Workload: tiny model (fp32, vLLM on CPU, max_model_len {args.max_model_len}); GuessNumberEnv, "
            f"{args.tasks} tasks x {args.group} samples, {args.turns} turns, {args.max_tokens} max tokens per turn, "
            f"temperature 1.0, concurrency {args.concurrency}; {args.rounds} rounds in ABBA order after a warm-up.",
            "- Raw: the same requests the manager sent (same prompts, max_tokens, sampling), replayed with plain "
            "aiohttp, each episode's requests in order, the same number of episodes in flight.",
            "- Client and server share the machine's cores, so the manager's CPU work (rendering, parsing, env "
            "steps) competes with generation; `client CPU s` is the benchmark process's own CPU time per run.",
            "- `request ms`: one generation request, sent to answered. `gap ms`: from a request's answer to the "
            "next request of the same episode, i.e. the client's own time per turn (parse, env step, rendering, "
            "bookkeeping, event-loop waits); for raw it is the replay loop's.",
            "",
            "| round | mode | episodes | requests | completion tokens | wall s | client CPU s "
            "| request ms (median) | gap ms (median) | gap ms (mean) | tokens/s |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"**Ratio (manager / raw tokens/s), median of rounds: {s['ratio_median']:.3f}** "
            f"(per round: {', '.join(f'{x:.3f}' for x in ratios)}; target >= 0.9). "
            f"Median tokens/s: manager {s['manager_tokens_per_s_median']:.0f}, raw {s['raw_tokens_per_s_median']:.0f}.",
            "",
            f"Client CPU per generation request (median): manager {cpu_ms['manager']:.2f} ms, raw {cpu_ms['raw']:.2f} ms "
            "(rendering, parsing, env step and bookkeeping cost the difference). Run-to-run spread comes from other "
            "load on the shared machine (see the per-round ratios); compare the medians.",
            "",
        ]
    )


if __name__ == "__main__":  # vLLM-facing scripts need the guard
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--no-write", action="store_true", help="print the report, write no results files")
    args = parser.parse_args()
    command = "python benchmarks/rollout_vllm.py " + " ".join(sys.argv[1:])
    result = asyncio.run(main(args))
    text = report(result, args, command.strip())
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "rollout_vllm.json").write_text(json.dumps({**result, "args": vars(args)}, indent=2))
        md = RESULTS / "rollout_vllm.md"
        # A hand-written analysis below the numbers survives re-runs.
        previous = md.read_text() if md.exists() else ""
        analysis = previous[previous.index("## Analysis") :] if "## Analysis" in previous else ""
        md.write_text(text + ("\n" + analysis if analysis else ""))
