"""Scripted agents for `rlgym/GUI-v0`: a planning oracle and a random baseline.

The oracle reads the task's goal (`env.task.hidden`) and searches breadth-first over device
states with the env's public model (`env.device.actions` / `env.device.apply`, pure functions of a
state) starting from a copy of the current state; the real env is only stepped with the plan it
finds. Goals name the data paths a solution may change (`hidden["relevant"]`); the search leaves
everything else alone (irrelevant toggles, other apps) and prefers values the goal mentions (see
`plan`), which keeps it to a few hundred states.

The agents talk to the env by duck typing (this package may not import `rlgym_envs`).

    env = rlgym_llm.make("rlgym/GUI-v0")
    agent = GUIPlannerAgent(env)
    messages, info = env.reset(seed=0)
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages))
        if terminated or truncated:
            break
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlgym_llm import AssistantTurn, Messages, ToolCall

logger = logging.getLogger(__name__)

Action = tuple[str, dict[str, Any]]


class PlanNotFound(RuntimeError):
    """The search ran out of states (or budget) without reaching the goal."""


def plan(env: Any, max_states: int = 100_000) -> list[tuple[str, dict[str, Any], str]]:
    """Shortest action sequence (under the search rules) from the env's current state to its goal.

    The search leaves the other apps and the goal app's data outside `hidden["relevant"]` alone, and
    types only strings the goal mentions. It first also keeps every string in the relevant data to
    one the goal mentions or one already there (so it never opens a product or mail the goal does
    not name); only if that finds nothing does it search without this rule.

    Args:
        env: a GUI env (wrapped or not), after `reset`.
        max_states: search budget per pass; `PlanNotFound` beyond it.

    Returns:
        `(tool, arguments, state key after the action)` triples; empty when the goal already holds.
    """
    genv = env.unwrapped
    start = genv.state  # a copy: the search never touches the env
    if _solved(genv, start):
        return []
    try:
        actions = _search(genv, start, max_states, strict=True)
    except PlanNotFound:
        logger.debug("strict search failed for %s; searching without the string rule", genv.task.id)
        actions = _search(genv, start, max_states, strict=False)
    return _replay(genv.device, start, actions)


def _search(genv: Any, start: dict[str, Any], max_states: int, strict: bool) -> list[Action]:
    """Breadth-first search from `start` to a state meeting every goal predicate."""
    device, hidden = genv.device, genv.task.hidden
    texts, app, relevant = hidden["texts"], hidden["app"], hidden.get("relevant")
    others = [k for k in start if k not in ("ui", app)]
    outside = _outside(start[app], relevant)
    mentioned = {*texts, *(part for p in hidden["preds"] for part in p["path"].split("."))}
    allowed = _strings(_inside(start[app], relevant)) | mentioned

    def key(state: Mapping[str, Any]) -> str:
        # The search keeps only states equal to `start` outside the UI and the goal app's relevant
        # data, so those two identify a kept state (a state it drops may share a key: it is dropped anyway).
        return json.dumps([state["ui"], _inside(state[app], relevant)], sort_keys=True)

    parents: dict[str, tuple[str, Action] | None] = {key(start): None}
    frontier = deque([start])
    while frontier:
        state = frontier.popleft()
        skey = key(state)
        for tool, args, nxt in device.successors(state, texts):
            nkey = key(nxt)
            if nkey in parents:
                continue
            if any(nxt[k] != start[k] for k in others) or _outside(nxt[app], relevant) != outside:
                continue
            if strict and not _strings(_inside(nxt[app], relevant)) <= allowed:
                continue
            parents[nkey] = (skey, (tool, args))
            if _solved(genv, nxt):
                return _path(parents, nkey)
            if len(parents) > max_states:
                raise PlanNotFound(f"no plan within {max_states} states for task {genv.task.id}")
            frontier.append(nxt)
    raise PlanNotFound(f"the goal of task {genv.task.id} is unreachable from the current state")


def _solved(genv: Any, state: Mapping[str, Any]) -> bool:
    met, total = genv.subgoals(state)
    return met == total


def _path(parents: Mapping[str, tuple[str, Action] | None], key: str) -> list[Action]:
    steps = []
    while (link := parents[key]) is not None:
        key, action = link
        steps.append(action)
    return steps[::-1]


def _replay(device: Any, state: Mapping[str, Any], actions: list[Action]) -> list[tuple[str, dict[str, Any], str]]:
    """Attach the env's own state key after each action (the agent checks it to detect drift)."""
    out = []
    for tool, args in actions:
        state, _ = device.apply(state, tool, args)
        out.append((tool, args, device.key(state)))
    return out


def _inside(data: Mapping[str, Any], relevant: Sequence[str] | None) -> list[Any]:
    """The values at the relevant paths (all of `data` when `relevant` is None)."""
    if relevant is None:
        return [data]
    out = []
    for path in relevant:
        node: Any = data
        for part in path.split("."):
            node = node[part]
        out.append(node)
    return out


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, Mapping):
        value = value.values()
    if isinstance(value, (list, tuple, type({}.values()))):
        return set().union(*(_strings(v) for v in value))
    return set()


def _outside(data: Mapping[str, Any], relevant: Sequence[str] | None) -> Any:
    """`data` without the relevant paths: the part of the goal app a plan must not change."""
    if relevant is None:
        return None
    out = dict(data)
    for path in relevant:
        *parents, last = path.split(".")
        node = out
        for part in parents:  # copy only along the path; the rest is shared, never mutated
            node[part] = dict(node[part])
            node = node[part]
        node.pop(last, None)
    return out


def _call(tool: str, args: Mapping[str, Any], index: int) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(name=tool, arguments=dict(args), id=f"call_{index}"),))


class GUIPlannerAgent:
    """Oracle: plans with `plan`, plays one action per turn, then calls `done()`.

    It replans whenever the env is not in the state the plan expects (a new episode, or someone
    else stepped the env), so one agent serves many episodes.
    """

    def __init__(self, env: Any, max_states: int = 200_000):
        self.env = env
        self.max_states = max_states
        self._plan: deque[tuple[str, dict[str, Any], str]] = deque()
        self._expected: str | None = None
        self._turn = 0

    def act(self, messages: Messages | None = None) -> AssistantTurn:
        """The next action; `messages` is ignored (the oracle reads the model, not the screen)."""
        genv = self.env.unwrapped
        current = genv.device.key(genv.state)
        if current != self._expected:
            self._plan = deque(plan(self.env, self.max_states))
        self._turn += 1
        if not self._plan:
            self._expected = None
            return _call("done", {}, self._turn)
        tool, args, self._expected = self._plan.popleft()
        return _call(tool, args, self._turn)


_ID_RE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
_OPTIONS_RE = re.compile(r" options=(\[.*\])")
_WORDS = ("hello", "yes", "report", "2", "Express", "alice.martin@example.com", "notes.txt", "14")
TOOLS = ("click", "type", "select", "scroll", "back", "done")


class RandomGUIAgent:
    """Baseline: random tool calls with ids (and options) read from the latest screen.

    Args:
        seed: seed of the agent's own RNG.
        probs: probability of each tool in `TOOLS` order (click, type, select, scroll, back, done).
    """

    def __init__(self, seed: int = 0, probs: Sequence[float] = (0.5, 0.1, 0.15, 0.1, 0.1, 0.05)):
        self.rng = np.random.default_rng(seed)
        self.probs = np.asarray(probs, dtype=float) / sum(probs)
        self._screen = ""
        self._turn = 0

    def act(self, messages: Messages) -> AssistantTurn:
        """A random action; `messages` are the env's latest messages (opening or step output)."""
        for m in messages:
            if "Screen:" in m.get("content", ""):
                self._screen = m["content"]
        ids = [int(i) for i in _ID_RE.findall(self._screen)] or [1]
        options = [o for line in _OPTIONS_RE.findall(self._screen) for o in json.loads(line)] or list(_WORDS)
        tool = TOOLS[int(self.rng.choice(len(TOOLS), p=self.probs))]
        element = ids[int(self.rng.integers(len(ids)))]
        choices: dict[str, dict[str, Any]] = {
            "click": {"id": element},
            "type": {"id": element, "text": _WORDS[int(self.rng.integers(len(_WORDS)))]},
            "select": {"id": element, "option": options[int(self.rng.integers(len(options)))]},
            "scroll": {"direction": "down" if self.rng.random() < 0.5 else "up"},
            "back": {},
            "done": {},
        }
        self._turn += 1
        return _call(tool, choices[tool], self._turn)


def play(
    env: Any, agent: Any, seed: int | None = None, options: dict[str, Any] | None = None, max_turns: int = 100
) -> dict[str, Any]:
    """Run one episode of `agent` (anything with `act(messages)`) and summarize it.

    Args:
        max_turns: a safety stop for unwrapped envs; the episode counts as truncated there.

    Returns:
        `reward`, `turns`, `terminated`, `truncated`, the final `outcome` and the per-step `state_keys`.
    """
    messages, _ = env.reset(seed=seed, options=options)
    turns, keys = 0, []
    while True:
        messages, reward, terminated, truncated, info = env.step(agent.act(messages))
        turns += 1
        keys.append(info["signals"]["state_key"])
        if turns >= max_turns and not (terminated or truncated):
            truncated, info = True, {**info, "outcome": env.unwrapped.outcome()}
        if terminated or truncated:
            return {
                "reward": float(reward) if terminated else float(info["outcome"]["reward"]),
                "turns": turns,
                "terminated": terminated,
                "truncated": truncated,
                "outcome": info["outcome"],
                "state_keys": keys,
            }
