"""Record (or compare) golden trajectories of every shipped env: the check that a refactor changed no behaviour.

    python scripts/golden_trajectories.py record /tmp/golden.json      # before the change
    python scripts/golden_trajectories.py compare /tmp/golden.json     # after: lists every difference

Each env is played by its oracle, by a seeded random agent (random text and schema-shaped tool calls, some
malformed) and by `check_env`'s hostile actions, with fixed seeds. Every step's action, observation, reward,
flags and info (signals and outcome included) is recorded. Timings are scrubbed (they differ run to run).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rlgym_agents.random_agent import RandomAgent
from rlgym_llm.config.compose import load_config
from rlgym_llm.core.fuzz import hostile_actions
from rlgym_llm.core.types import AssistantTurn
from rlgym_llm.recipes import parts as build

# env config -> (oracle episodes, random episodes); ~500 episodes in all, the sandboxed envs fewer (slow).
PLAN = {
    "counter": (60, 60),
    "math": (60, 60),
    "search": (40, 40),
    "gui": (40, 40),
    "code": (20, 40),
    "swe": (12, 30),
}
HOSTILE_ACTIONS = 80  # check_env's fixed corpus (34 actions) and random draws
_END = object()
_TIMING = re.compile(r"\d+(\.\d+)?\s*(s|ms|sec|seconds)\b")


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in ("duration_s", "elapsed_s", "wall_s")}
    if isinstance(value, (list, tuple)):
        return [_scrub(v) for v in value]
    if isinstance(value, str):
        if len(value) > 20_000:  # huge hostile inputs: compared by hash (and the timing regex would crawl)
            return f"<{len(value)} chars sha256={hashlib.sha256(value.encode(errors='replace')).hexdigest()}>"
        return _TIMING.sub("<t>", value)
    if isinstance(value, float) and value != value:
        return "nan"
    return value


def _action(action: Any) -> Any:
    if isinstance(action, AssistantTurn):
        return action.to_message()
    return action


def _play(env: Any, seed: int, act: Callable[[Any, dict], Any] | Iterator[Any], reset_options=None) -> dict:
    messages, info = env.reset(seed=seed, options=reset_options)
    steps: list[dict] = []
    record = {"seed": seed, "opening": messages, "info": info, "steps": steps}
    actions = act if isinstance(act, Iterator) else None
    while True:
        if actions is not None:
            action = next(actions, _END)
            if action is _END:
                break
        else:
            assert callable(act)
            action = act(messages, info)
        messages, reward, terminated, truncated, info = env.step(action)
        steps.append(
            {"action": _action(action), "obs": messages, "reward": reward, "term": terminated, "trunc": truncated}
            | {"info": info}
        )
        if terminated or truncated:
            if actions is None:
                break
            messages, info = env.reset(seed=seed, options=reset_options)
            steps.append({"reset": messages, "info": info})
    return _scrub(json.loads(json.dumps(record, default=repr)))


def record_env(name: str) -> list[dict]:
    cfg = load_config("train", [f"env={name}", "sandbox=local"])
    env = build.env_factory(cfg.env, cfg.sandbox)()
    n_oracle, n_random = PLAN[name]
    episodes = []
    try:
        oracle_maker = build.oracle_factory(cfg.env.oracle)
        for seed in range(n_oracle):
            env.reset(seed=seed)
            act = oracle_maker(env)
            episodes.append({"agent": "oracle", **_play(env, seed, lambda m, i, a=act: a(m))})
        for seed in range(n_random):
            agent = RandomAgent(seed=1000 + seed)
            _, info = env.reset(seed=seed)
            agent.reset(None, info)
            episodes.append({"agent": "random", **_play(env, seed, lambda m, i, a=agent: a.act(m, i))})
        _, info = env.reset(seed=0)
        hostile = itertools.islice(hostile_actions(env.action_space, info["tools"], seed=0), HOSTILE_ACTIONS)
        actions = (a for _, a in hostile)
        episodes.append({"agent": "hostile", **_play(env, 0, actions)})
    finally:
        env.close()
    return episodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["record", "compare"])
    parser.add_argument("path")
    parser.add_argument("--envs", nargs="*", default=list(PLAN))
    args = parser.parse_args()
    current = {name: record_env(name) for name in args.envs}
    total = sum(len(v) for v in current.values())
    if args.mode == "record":
        with open(args.path, "w") as f:
            json.dump(current, f)
        print(f"recorded {total} episodes: " + ", ".join(f"{k}={len(v)}" for k, v in current.items()))
        return 0
    with open(args.path) as f:
        golden = json.load(f)
    differences = 0
    for name, episodes in current.items():
        for i, (old, new) in enumerate(zip(golden[name], episodes, strict=True)):
            if old != new:
                differences += 1
                old_steps, new_steps = old.get("steps", []), new.get("steps", [])
                where = next((j for j, (a, b) in enumerate(zip(old_steps, new_steps)) if a != b), None)
                print(f"{name} episode {i} ({new['agent']}, seed {new['seed']}): first difference at step {where}")
                if where is not None:
                    print(
                        f"  before: {json.dumps(old_steps[where])[:600]}\n  after:  {json.dumps(new_steps[where])[:600]}"
                    )
    print(f"compared {total} episodes: {differences} differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
