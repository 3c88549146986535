"""One system's env-step measurements, run in that system's own interpreter (see `env_step.py`).

    <venv>/bin/python benchmarks/peers/env_worker.py SYSTEM DATA.jsonl --calls 2000 --rounds 10

Prints one JSON object: per cell, the median and 99th percentile of per-call times (µs) or the
env-steps/s of a batched loop. Only the standard library is imported at the top: each system's
package is imported inside its own functions, in the interpreter of its own venv.

Systems and what one call does (the text actions are built here from the same rows for everybody;
"wrong" = the right answer + 1, still well formatted):
- `ours-light`: rlgym `Math-v0`; the model text is the chain of thought then a Hermes tool call
  `submit_answer(answer="N")`. step = the agent's `parse_tool_calls(text)` + `env.step(turn)`, i.e. raw
  text in, reward out. The verifier's plain-number path decides.
- `ours-light-reuse`: `ours-light` on envs made once and reset per episode (as GEM's vector env
  does), not made per episode: what an env pool in the rollout manager would save.
- `ours-full`, `ours-full-reuse`: as `ours-light`, `ours-light-reuse`, but the submitted answer is
  the whole response ending in `\\boxed{N}`: the verifier extracts, normalises and compares it
  exactly (GEM's grader gets the same text).
- `gem`, `gem-inproc`: GEM `MathEnv` over a `datasets.Dataset` built from the rows; action = chain of
  thought + `\\boxed{N}`. `gem` is the default (grading in a one-process pool per env, 1 s timeout);
  `gem-inproc` grades in-process under SIGALRM (`use_mp=False`), which cannot run in threads.
- `skyrl-gsm8k`: SkyRL-gym `gsm8k`; action = chain of thought + `#### N` (regex check).
- `skyrl-aime`: SkyRL-gym `aime`; action = chain of thought + `Answer: N` (its default check: the
  last `Answer:` line, MATH-style string normalisation, string equality; reward 1 or -1).
Ours and SkyRL's envs are built per episode, as their trainers do (our `RolloutManager` calls
`rlgym_llm.make` per episode, SkyRL's generator `skyrl_gym.make`), so their "reset" is make + reset
(`init` for SkyRL); GEM's vector env reuses its envs, so its "reset" is `env.reset()`. Batched cells run rounds of 64 episodes (reset + one step each): `sync` in one thread,
`threads` on a 64-thread pool (how GEM's AsyncVectorEnv and our rollout manager run env calls).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

N_ENVS = 64


def actions(row: dict[str, Any], system: str, wrong: bool) -> str:
    """The model text for `row` in the format `system` grades."""
    n = int(row["answer"]) + (1 if wrong else 0)
    cot = row["cot"]
    if system == "skyrl-gsm8k":
        return f"{cot}\n#### {n}"
    if system == "skyrl-aime":
        return f"{cot}\nAnswer: {n}"  # its default check: Minerva's `Answer: ...` line, normalised
    boxed = f"{cot} The final answer is \\boxed{{{n}}}."
    if system.startswith("ours-light"):
        call = {"name": "submit_answer", "arguments": {"answer": str(n)}}
        return f"{cot}\n<tool_call>{json.dumps(call)}</tool_call>"
    if system.startswith("ours-full"):
        return f"<tool_call>{json.dumps({'name': 'submit_answer', 'arguments': {'answer': boxed}})}</tool_call>"
    return boxed  # gem, gem-inproc


def _pct(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_us": s[len(s) // 2] * 1e6, "p99_us": s[min(len(s) - 1, int(len(s) * 0.99))] * 1e6, "n": len(s)}


# --- one system = how to make an env, reset it to row i, and step it with a text -------------------


class System:
    """Adapters with one shape: `make()`, `reset(env, i) -> env`, `step(env, text) -> reward`."""

    threads_ok = True

    def __init__(self, rows: list[dict[str, Any]], data_path: str):
        self.rows, self.data_path = rows, data_path

    def make(self) -> Any:
        raise NotImplementedError

    def reset(self, env: Any, i: int) -> Any:
        raise NotImplementedError

    def step(self, env: Any, text: str) -> float:
        raise NotImplementedError

    def answer_index(self, env: Any, i: int) -> int:
        """The row the env is on after `reset(env, i)` (GEM walks its own shuffled order)."""
        return i


class Ours(System):
    def __init__(self, rows: list[dict[str, Any]], data_path: str, reuse: bool = False):
        super().__init__(rows, data_path)
        self.reuse = reuse
        import rlgym_llm
        from rlgym_agents.tool_calling import parse_tool_calls
        from rlgym_llm.core.splits import split_of

        self._make = lambda: rlgym_llm.make("rlgym/Math-v0", dataset=data_path)
        self.parse = parse_tool_calls
        # the env's train pool holds the rows whose question hashes to it; task_index counts within it
        self.pool = [k for k, row in enumerate(rows) if split_of(row["question"].strip()) == "train"]

    def make(self) -> Any:
        return self._make() if self.reuse else None  # else a fresh env per episode, as the manager does

    def reset(self, env: Any, i: int) -> Any:
        if not self.reuse:
            env = self._make()
        env.reset(options={"task_index": i % len(self.pool)})
        return env

    def answer_index(self, env: Any, i: int) -> int:
        return self.pool[i % len(self.pool)]

    def step(self, env: Any, text: str) -> float:
        return env.step(self.parse(text))[1]


class Gem(System):
    def __init__(self, rows: list[dict[str, Any]], data_path: str, use_mp: bool):
        super().__init__(rows, data_path)
        from datasets import Dataset
        from gem.envs.math_env import MathEnv

        self.threads_ok = use_mp  # in-process grading uses SIGALRM: main thread only
        self.dataset = Dataset.from_list([{"question": r["question"], "answer": r["answer"]} for r in rows])
        self.index = {r["question"]: k for k, r in enumerate(rows)}
        self._make = lambda: MathEnv(dataset=self.dataset, question_key="question", answer_key="answer", use_mp=use_mp)

    def make(self) -> Any:
        return self._make()

    def reset(self, env: Any, i: int) -> Any:
        env.reset()  # GEM walks its (shuffled) dataset; the row is looked up from the question
        return env

    def answer_index(self, env: Any, i: int) -> int:
        return self.index[env.first_obs]

    def step(self, env: Any, text: str) -> float:
        return env.step(text)[1]


class SkyRL(System):
    def __init__(self, rows: list[dict[str, Any]], data_path: str, env_id: str):
        super().__init__(rows, data_path)
        import skyrl_gym

        key = "reward_spec" if env_id == "gsm8k" else "reward_model"
        self._make_env = lambda i: skyrl_gym.make(
            env_id, env_config={}, extras={key: {"ground_truth": rows[i]["answer"]}}
        )

    def make(self) -> Any:
        return None  # built per trajectory, in reset

    def reset(self, env: Any, i: int) -> Any:
        env = self._make_env(i)
        env.init([{"role": "user", "content": self.rows[i]["question"]}])
        return env

    def step(self, env: Any, text: str) -> float:
        return float(env.step(text)["reward"])


def build(system: str, rows: list[dict[str, Any]], data_path: str) -> System:
    if system.startswith("ours"):
        return Ours(rows, data_path, reuse=system.endswith("-reuse"))
    if system in ("gem", "gem-inproc"):
        return Gem(rows, data_path, use_mp=system == "gem")
    if system in ("skyrl-gsm8k", "skyrl-aime"):
        return SkyRL(rows, data_path, system.split("-", 1)[1])
    raise SystemExit(f"unknown system {system!r}")


# --- measurements -----------------------------------------------------------------------------------


def single(sys_: System, name: str, calls: int, budget_s: float) -> dict[str, Any]:
    """Per-call latency in one thread: reset, step with a correct answer, step with a wrong one.

    Each cell times `calls` calls, or fewer (at least 100) if it has run for `budget_s` seconds.
    """
    env = sys_.make()
    texts = {w: [actions(r, name, w) for r in sys_.rows] for w in (False, True)}
    out: dict[str, Any] = {}
    n = len(sys_.rows)
    for cell in ("reset", "step_correct", "step_wrong"):
        wrong = cell == "step_wrong"
        samples, rewards = [], 0.0
        deadline = time.perf_counter() + budget_s
        for k in range(calls + 20):  # 20 warm-up calls
            if len(samples) >= 100 and time.perf_counter() > deadline:
                break
            t0 = time.perf_counter()
            env = sys_.reset(env, k % n)
            t1 = time.perf_counter()
            if cell == "reset":
                dt = t1 - t0
                sys_.step(env, texts[False][sys_.answer_index(env, k % n)])  # finish the episode, untimed
            else:
                text = texts[wrong][sys_.answer_index(env, k % n)]
                t1 = time.perf_counter()
                r = sys_.step(env, text)
                dt = time.perf_counter() - t1
                if k >= 20:
                    rewards += r
            if k >= 20:
                samples.append(dt)
        out[cell] = {**_pct(samples), "mean_reward": rewards / len(samples) if cell != "reset" else None}
    return out


def batched(
    sys_: System, envs: list[Any], name: str, rounds: int, mode: str, wrong: bool, budget_s: float
) -> dict[str, Any]:
    """env-steps/s of 64 envs: each round resets all 64 and steps each once (`rounds` rounds, or
    fewer, at least 1, once `budget_s` seconds have passed)."""
    n = len(sys_.rows)
    texts = [actions(r, name, wrong) for r in sys_.rows]
    counter = [0]

    def episode(j: int) -> float:
        i = (counter[0] + j) % n
        env = envs[j] = sys_.reset(envs[j], i)
        return sys_.step(env, texts[sys_.answer_index(env, i)])

    pool = ThreadPoolExecutor(N_ENVS) if mode == "threads" else None
    run: Callable[[], list[float]]
    if pool is not None:
        run = lambda: list(pool.map(episode, range(N_ENVS)))  # noqa: E731
    else:
        run = lambda: [episode(j) for j in range(N_ENVS)]  # noqa: E731
    run()  # warm-up round (starts pool threads, GEM's worker processes)
    rewards, done, t0 = 0.0, 0, time.perf_counter()
    while done < rounds and (done == 0 or time.perf_counter() - t0 < budget_s):
        rewards += sum(run())
        counter[0] += N_ENVS
        done += 1
    elapsed = time.perf_counter() - t0
    if pool is not None:
        pool.shutdown()
    return {"env_steps_per_s": done * N_ENVS / elapsed, "mean_reward": rewards / (done * N_ENVS), "rounds": done}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("system")
    ap.add_argument("data")
    ap.add_argument("--calls", type=int, default=2000, help="timed calls per single-process cell")
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds of 64 episodes per batched cell")
    ap.add_argument("--budget-s", type=float, default=6.0, help="time cap per cell (slow peers stop early)")
    args = ap.parse_args()
    with open(args.data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    sys_ = build(args.system, rows, args.data)
    gc.collect()
    result: dict[str, Any] = {
        "system": args.system,
        "single": single(sys_, args.system, args.calls, args.budget_s),
        "batched": {},
    }
    envs = [sys_.make() for _ in range(N_ENVS)]  # made once (GEM starts a grading process per env)
    for mode in ("sync", "threads"):
        if mode == "threads" and not sys_.threads_ok:
            continue
        for wrong in (False, True):
            cell = f"{mode}_{'wrong' if wrong else 'correct'}"
            result["batched"][cell] = batched(sys_, envs, args.system, args.rounds, mode, wrong, args.budget_s)
    for env in envs:
        if getattr(env, "mp_pool", None) is not None:  # GEM's per-env grading process
            env.close()
    print("RESULT " + json.dumps(result), flush=True)  # a marked line: peers may print to stdout


if __name__ == "__main__":
    main()
