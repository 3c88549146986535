"""Rollout-manager overhead per turn: a zero-latency policy and a zero-latency env, so all time is ours.

    python benchmarks/rollout_overhead.py                          # all setups, concurrency 1/64/256
    python benchmarks/rollout_overhead.py --episodes 128 --repeats 1 --no-write
    python benchmarks/rollout_overhead.py --ray                    # also the Ray runner (2 env workers)

Setups (rows):
- `bare`: a pass-through agent (fixed ids, pre-parsed action), env stepped on the event loop, no token
  check: the manager's own loop plus the `Env` base class.
- `bare+thread`: the same with `env_in_thread=True` (the default): one thread hop per env call.
- `agent`: the real `ToolCallingAgent` with the tiny model's tokenizer (chat-template rendering,
  parsing), env on the loop, no token check: adds the agent's rendering cost.
- `agent+defaults`: `agent` with the manager's defaults (`env_in_thread=True`, `token_check="warn"`).
- `ray` (with `--ray`): `RayRolloutRunner` with the real agent, 2 env workers, one policy.

With `--slow-env-ms 50`, also env steps/s for an env whose step blocks for that long (a sandbox exec,
say) under `env_in_thread=True`: the ceiling shows how many env calls really run at once.

Each cell is the median of `--repeats` runs. Writes benchmarks/results/rollout_overhead.{json,md}; a
hand-written `## Analysis` section already in the .md is kept below the new table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rlgym_llm import AssistantTurn, Env, Step, StepSignals, Task, Tool, ToolCall
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager
from rlgym_llm.rollout.policy import Completion, SamplingParams

RESULTS = Path(__file__).resolve().parent / "results"
CALL_TEXT = '<tool_call>{"name": "noop", "arguments": {}}</tool_call>'


class Noop(Tool):
    """Do nothing."""

    name: ClassVar[str] = "noop"


class InstantEnv(Env):
    """Answers every turn at once with one short tool result; ends after `turns` turns with reward 1."""

    tools = (Noop,)

    def __init__(self, turns: int = 8) -> None:
        super().__init__()
        self.turns = turns

    def sample_task(self, options: Any) -> Task:
        return Task(id=f"instant-{int(self.np_random.integers(1000))}", prompt="Call noop until told to stop.")

    def opening(self, task: Task) -> list:
        return [{"role": "user", "content": task.prompt}]

    def respond(self, turn: AssistantTurn) -> Step:
        done = self.turn >= self.turns
        call_id = turn.tool_calls[0].id if turn.tool_calls else "call_0"
        reply = {"role": "tool", "content": "ok", "tool_call_id": call_id, "name": "noop"}
        return Step([reply], reward=float(done), terminated=done, signals=StepSignals(tool_ok=True))

    def outcome(self) -> dict[str, Any]:
        return {"reward": float(self.turn >= self.turns), "components": {}}


class InstantPolicy:
    """Returns the same precomputed completion at once (no tokenization, no await)."""

    def __init__(self, token_ids: Sequence[int], text: str):
        self.completion = Completion(tuple(token_ids), (-0.5,) * len(token_ids), text, "stop")

    async def generate(self, prompt_token_ids: Sequence[int], sampling: SamplingParams) -> Completion:
        return self.completion


class PassThroughAgent:
    """The cheapest possible agent: fixed ids for every rendering and a pre-parsed action."""

    def __init__(self, prompt_len: int = 64, obs_len: int = 8):
        self.prompt, self.obs = list(range(prompt_len)), list(range(obs_len))
        self.action = AssistantTurn(content="", tool_calls=(ToolCall("noop", {}, "call_0"),))

    def prepare(self, opening: list) -> list:
        return list(opening)

    def render_prompt(self, messages: Any, tools: Any) -> list[int]:
        return list(self.prompt)

    def render_continuation(self, history: Any, new_messages: Any, tools: Any, completion_closed: bool) -> list[int]:
        return list(self.obs)

    def render_text(self, messages: Any, tools: Any, generation_prompt: bool) -> str:
        return ""

    def assistant_message(self, completion_text: str) -> dict:
        return {"role": "assistant", "content": completion_text}

    def parse(self, text: str) -> AssistantTurn:
        return self.action


def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    from rlgym_llm.rollout.tiny_model import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model())


def _setups(tokenizer: Any) -> dict[str, tuple[Any, dict[str, Any]]]:
    from rlgym_agents.tool_calling import ToolCallingAgent

    agent = ToolCallingAgent(tokenizer)
    on_loop = {"env_in_thread": False, "token_check": "off"}
    return {
        "bare": (PassThroughAgent(), on_loop),
        "bare+thread": (PassThroughAgent(), {"env_in_thread": True, "token_check": "off"}),
        "agent": (agent, on_loop),
        "agent+defaults": (agent, {}),
    }


def _config(concurrency: int, turns: int, **overrides: Any) -> RolloutConfig:
    # max_turns above the env's own end, so every episode ends by termination after exactly `turns` turns.
    return RolloutConfig(
        max_turns=turns + 1, max_context=1 << 20, concurrency=concurrency, sampling=SamplingParams(), **overrides
    )


def _measure(manager: Any, episodes: int) -> dict[str, float]:
    start = time.perf_counter()
    trajectories = manager.run_sync(range(episodes))
    wall = time.perf_counter() - start
    turns = sum(len(t.turns) for t in trajectories)
    bad = [t.failures for t in trajectories if t.failures or t.reward != 1.0]
    if bad:
        raise RuntimeError(f"{len(bad)} episodes did not finish cleanly, e.g. {bad[0]}")
    return {"us_per_turn": wall / turns * 1e6, "turns_per_s": turns / wall, "episodes_per_s": episodes / wall}


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    with open("/proc/cpuinfo") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    tokenizer = _tokenizer()
    completion_ids = [*tokenizer.encode(CALL_TEXT, add_special_tokens=False), tokenizer.eos_token_id]
    policy = InstantPolicy(completion_ids, CALL_TEXT)
    make_env = lambda: InstantEnv(args.turns)  # noqa: E731
    rows = []
    setups = _setups(tokenizer)
    for name, (agent, overrides) in setups.items():
        for concurrency in args.concurrency:
            manager = RolloutManager(make_env, agent, policy, _config(concurrency, args.turns, **overrides))
            manager.run_sync(range(min(args.episodes, 16)))  # warm-up: template compilation, caches
            cell = _median([_measure(manager, args.episodes) for _ in range(args.repeats)])
            rows.append({"setup": name, "concurrency": concurrency, **cell})
            print(f"{name:>15} c={concurrency:<4} {cell['us_per_turn']:9.1f} us/turn", file=sys.stderr)
    if args.ray:
        rows += _run_ray(args, setups["agent"][0], policy, make_env)
    if args.slow_env_ms:
        args.blocking_rows = _run_blocking_env(args, policy)
    return rows


class BlockingEnv(InstantEnv):
    """`InstantEnv` whose step blocks the calling thread for `block_s` (like a synchronous sandbox call)."""

    def __init__(self, turns: int, block_s: float) -> None:
        super().__init__(turns)
        self.block_s = block_s

    def respond(self, turn: AssistantTurn) -> Step:
        time.sleep(self.block_s)
        return super().respond(turn)


def _run_blocking_env(args: argparse.Namespace, policy: Any) -> list[dict[str, Any]]:
    block_s, turns, rows = args.slow_env_ms / 1000, 4, []
    for concurrency in args.concurrency:
        cfg = _config(concurrency, turns, token_check="off")  # env_in_thread=True: the default
        manager = RolloutManager(lambda: BlockingEnv(turns, block_s), PassThroughAgent(), policy, cfg)
        episodes = max(2 * concurrency, 8)
        start = time.perf_counter()
        manager.run_sync(range(episodes))
        steps_per_s = episodes * turns / (time.perf_counter() - start)
        rows.append({"concurrency": concurrency, "steps_per_s": steps_per_s, "ideal": concurrency / block_s})
        print(f"blocking env c={concurrency:<4} {steps_per_s:8.0f} steps/s", file=sys.stderr)
    return rows


def _run_ray(args: argparse.Namespace, agent: Any, policy: Any, make_env: Any) -> list[dict[str, Any]]:
    import ray

    from rlgym_llm.rollout.ray_runner import RayRolloutRunner

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    rows = []
    try:
        for concurrency in args.concurrency:
            cfg = _config(concurrency, args.turns, token_check="off")
            with RayRolloutRunner(make_env, agent, [policy], cfg, num_env_workers=2) as runner:
                runner.run_sync(range(min(args.episodes, 16)))
                cell = _median([_measure(runner, args.episodes) for _ in range(args.repeats)])
            rows.append({"setup": "ray", "concurrency": concurrency, **cell})
            print(f"{'ray':>15} c={concurrency:<4} {cell['us_per_turn']:9.1f} us/turn", file=sys.stderr)
    finally:
        ray.shutdown()
    return rows


def _markdown(rows: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    lines = [
        "# Rollout-manager overhead per turn",
        "",
        f"Date: {datetime.date.today().isoformat()}. Machine: {_machine()} (shared with other work; expect noise).",
        "",
        f"Command: `{command}`",
        "",
        f"Zero-latency policy and env; {args.episodes} episodes of {args.turns} turns per cell, median of "
        f"{args.repeats} runs. Setups are described in `benchmarks/rollout_overhead.py`.",
        "",
        "| setup | concurrency | µs per turn | turns/s | episodes/s |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['setup']} | {r['concurrency']} | {r['us_per_turn']:.0f} | {r['turns_per_s']:.0f} | {r['episodes_per_s']:.1f} |"
        for r in rows
    ]
    if getattr(args, "blocking_rows", None):
        lines += [
            "",
            f"Env whose step blocks for {args.slow_env_ms:g} ms, `env_in_thread=True`, pass-through agent:",
            "",
            "| concurrency | env steps/s | ideal (concurrency / step time) |",
            "|---:|---:|---:|",
        ]
        lines += [f"| {r['concurrency']} | {r['steps_per_s']:.0f} | {r['ideal']:.0f} |" for r in args.blocking_rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=256, help="episodes per measured run")
    parser.add_argument("--turns", type=int, default=8, help="turns per episode")
    parser.add_argument("--concurrency", type=lambda s: [int(c) for c in s.split(",")], default=[1, 64, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ray", action="store_true", help="also measure the Ray runner")
    parser.add_argument("--slow-env-ms", type=float, default=0, help="also measure a blocking env (ms per step)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    args = parser.parse_args()
    command = "python " + " ".join(["benchmarks/rollout_overhead.py", *sys.argv[1:]])
    rows = run(args)
    table = _markdown(rows, args, command)
    print(table)
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        blocking = getattr(args, "blocking_rows", [])
        record = {"command": command, "rows": rows, "blocking_env": blocking}
        (args.out / "rollout_overhead.json").write_text(json.dumps(record, indent=2))
        md = args.out / "rollout_overhead.md"
        old = md.read_text() if md.exists() else ""
        notes = old[old.index("## Analysis") :] if "## Analysis" in old else ""
        md.write_text(table + ("\n" + notes if notes else ""))


if __name__ == "__main__":
    main()
