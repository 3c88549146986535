"""SWE-v0 on the built set: resolve rates of four scripted agents per project, and reset/grade latency.

    python benchmarks/swe_v0.py --backend docker                   # every instance (tens of minutes)
    python benchmarks/swe_v0.py --backend local --per-project 2    # a quick look

Agents: `gold` applies the gold fix and submits (must resolve every instance but the trace-blind ones, whose grades the env voids: `benchmarks/swe_trace_blind.py`), `empty` submits the tree as it
is (0%), `test_edit` rewrites the failing tests into `pass` (0%: grading uses fresh test files),
`random_edit` swaps one random token of one source line (0%). Writes
`benchmarks/results/swe_v0.{json,md}`: per project and agent the resolved fraction, voided grades
and outcome levels; p50/p95 of `env.reset` and of the submitting step (the final grade, canaries
included) per agent.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import rlgym_llm
from rlgym_agents.swe import RandomEditAgent, TestEditingAgent
from rlgym_llm.core.types import AssistantTurn, ToolCall

RESULTS = Path(__file__).parent / "results"


class GoldAgent:
    """The gold fix as exact-replace edits, then submit (no test run: only the grade is timed)."""

    def __init__(self, env: Any) -> None:
        self.env, self._stage = env, 0

    def act(self, messages: Any, info: Any = None) -> AssistantTurn:
        stage, self._stage = self._stage, self._stage + 1
        if stage == 0:
            edits = self.env.unwrapped.task.hidden["gold_edits"]
            calls = [
                ToolCall("edit_file", {"path": p, "old_str": old, "new_str": new}, id=f"e{i}{j}")
                for i, p in enumerate(sorted(edits))
                for j, (old, new) in enumerate(edits[p])
            ]
            return AssistantTurn("Fixing it.", tuple(calls))
        return AssistantTurn("Submitting.", (ToolCall("submit", {}, id="s"),))


class EmptyAgent:
    def act(self, messages: Any, info: Any = None) -> AssistantTurn:
        return AssistantTurn("Nothing to change.", (ToolCall("submit", {}, id="s"),))


AGENTS = {
    "gold": GoldAgent,
    "empty": lambda env: EmptyAgent(),
    "test_edit": TestEditingAgent,
    "random_edit": lambda env: RandomEditAgent(env, seed=0),
}


def play(env: Any, agent: Any, instance_id: str) -> dict[str, Any]:
    start = time.perf_counter()
    messages, info = env.reset(options={"instance_id": instance_id})
    reset_s = time.perf_counter() - start
    while True:
        turn = agent.act(messages, info)
        start = time.perf_counter()
        messages, reward, terminated, truncated, info = env.step(turn)
        step_s = time.perf_counter() - start
        if terminated or truncated:
            break
    return {
        "reward": reward,
        "level": info["signals"]["outcome_level"],
        "tampered": info["outcome"]["components"]["tampered"],
        "reset_s": reset_s,
        "grade_s": step_s,  # the submitting step: the final grade (with canaries when all tests pass)
    }


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="docker", choices=["local", "docker"])
    parser.add_argument("--per-project", type=int, default=None, help="only the first N instances of each project")
    parser.add_argument("--repos", default=None, help="only these projects (comma-separated)")
    parser.add_argument("--out", default=str(RESULTS / "swe_v0"))
    args = parser.parse_args()
    env = rlgym_llm.make("rlgym/SWE-v0", backend=args.backend, max_turns=4, dense_signals=False)
    instances = env.unwrapped.instances
    by_project: dict[str, list[str]] = {}
    for inst in instances:
        by_project.setdefault(inst.repo, []).append(inst.id)
    wanted = set(args.repos.split(",")) if args.repos else set(by_project)
    chosen = [i for repo, ids in by_project.items() if repo in wanted for i in ids[: args.per_project]]
    rows = []
    start = time.monotonic()
    try:
        for n, instance_id in enumerate(chosen):
            repo = next(i.repo for i in instances if i.id == instance_id)
            for name, make_agent in AGENTS.items():
                result = play(env, make_agent(env), instance_id)
                rows.append({"instance_id": instance_id, "project": repo, "agent": name, **result})
            gold = next(r for r in rows if r["instance_id"] == instance_id and r["agent"] == "gold")
            print(f"[{n + 1}/{len(chosen)}] {instance_id}: gold {gold['reward']}", file=sys.stderr, flush=True)
    finally:
        env.close()
    summary: dict[str, Any] = {
        "command": f"python benchmarks/swe_v0.py --backend {args.backend}"
        + (f" --per-project {args.per_project}" if args.per_project else "")
        + (f" --repos {args.repos}" if args.repos else ""),
        "backend": args.backend,
        "instances": len(chosen),
        "wall_s": round(time.monotonic() - start, 1),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "resolved": {},
        "latency_s": {},
    }
    for project in sorted({r["project"] for r in rows}):
        summary["resolved"][project] = {
            agent: round(
                statistics.mean(r["reward"] for r in rows if r["project"] == project and r["agent"] == agent), 3
            )
            for agent in AGENTS
        }
    summary["resolved"]["all"] = {
        agent: round(statistics.mean(r["reward"] for r in rows if r["agent"] == agent), 3) for agent in AGENTS
    }
    summary["voided"] = {agent: sum(r["tampered"] > 0 for r in rows if r["agent"] == agent) for agent in AGENTS}
    resets = [r["reset_s"] for r in rows]
    summary["latency_s"]["reset"] = {"p50": round(_pct(resets, 0.5), 4), "p95": round(_pct(resets, 0.95), 4)}
    for agent in AGENTS:
        grades = [r["grade_s"] for r in rows if r["agent"] == agent]
        summary["latency_s"][f"grade_{agent}"] = {
            "p50": round(_pct(grades, 0.5), 3),
            "p95": round(_pct(grades, 0.95), 3),
        }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1) + "\n")
    lines = [
        f"# SWE-v0 built set on the {args.backend} backend",
        "",
        f"`{summary['command']}`: {len(chosen)} instances, {summary['wall_s']} s, {summary['machine']}.",
        "",
        "| project | " + " | ".join(AGENTS) + " |",
        "|---" * (len(AGENTS) + 1) + "|",
    ]
    for project, rates in summary["resolved"].items():
        lines.append(f"| {project} | " + " | ".join(f"{rates[a]:.0%}" for a in AGENTS) + " |")
    lines += [
        "",
        f"Voided grades (canaries or the patch screen): {summary['voided']}.",
        "",
        "| latency | p50 (s) | p95 (s) |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['p50']} | {v['p95']} |" for k, v in summary["latency_s"].items()]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
