"""Oracles and noisy teachers for the credit testbeds (`rlgym/Ladder-v0`, `rlgym/TwentyQ-v0`, `rlgym/BugFix-v0`).

Each oracle reads the env's state (oracles may cheat) and plays the optimal policy; each noisy
teacher is its oracle with the mistakes the testbed is about, one mistake with probability `noise`
per turn, drawn from the episode's seed (the same seed gives the same episode). Warm-ups clone the
teacher as it is (`sft.successful_only=false`), so the model starts with the teacher's habits:

    rlgym sft env=ladder          # configs/env/ladder.yaml names LadderTeacher as the oracle

    env = rlgym_llm.make("rlgym/Ladder-v0")
    messages, _ = env.reset(seed=0)
    agent = LadderOracle(env)
    while not (out := env.step(agent.act(messages)))[2]:
        messages = out[0]
"""

from __future__ import annotations

import random
from typing import Any

from rlgym_llm import AssistantTurn, ToolCall


def _call(name: str, **arguments: Any) -> AssistantTurn:
    return AssistantTurn(content="", tool_calls=(ToolCall(name, arguments, id=f"call_{name}"),))


class _Teacher:
    """An oracle's moves with a mistake (`mistake()`) instead, with probability `noise` per turn."""

    noise = 0.0

    def __init__(self, env: Any) -> None:
        self.env = env.unwrapped
        self.rng = random.Random(f"{type(self).__name__}-{self.env.np_random_seed}")

    def act(self, messages: Any = None, info: Any = None) -> AssistantTurn:
        """The next turn (the env's state decides it; `messages` are not needed)."""
        if self.noise > 0 and self.rng.random() < self.noise:
            return self.mistake()
        return self.best()

    def best(self) -> AssistantTurn:
        raise NotImplementedError

    def mistake(self) -> AssistantTurn:
        return self.best()


class LadderOracle(_Teacher):
    """`rlgym/Ladder-v0`: add 3 while 3 or more are left, then the rest, then submit."""

    def best(self) -> AssistantTurn:
        left = self.env.target - self.env.counter
        return _call("add", amount=min(left, 3)) if left > 0 else _call("submit")

    def mistake(self) -> AssistantTurn:
        # a wrong amount: a wasted turn low down, an overshoot (the end) near the top
        left = self.env.target - self.env.counter
        right = min(left, 3) if left > 0 else 0
        return _call("add", amount=self.rng.choice([a for a in (1, 2, 3) if a != right]))


class LadderTeacher(LadderOracle):
    """LadderOracle with a wrong amount on 15 % of its turns."""

    noise = 0.15


class TwentyQOracle(_Teacher):
    """`rlgym/TwentyQ-v0`: bisection, `ask(lo, mid)` on the candidate range, then the answer."""

    def best(self) -> AssistantTurn:
        candidates = sorted(self.env.candidates)
        if len(candidates) == 1:
            return _call("answer", n=candidates[0])
        return _call("ask", lo=candidates[0], hi=candidates[(len(candidates) - 1) // 2])

    def mistake(self) -> AssistantTurn:
        # answering before the candidates are down to one: a guess
        return _call("answer", n=self.rng.choice(sorted(self.env.candidates)))


class TwentyQTeacher(TwentyQOracle):
    """TwentyQOracle that guesses early on 20 % of its turns."""

    noise = 0.2


class BugFixOracle(_Teacher):
    """`rlgym/BugFix-v0`: run the tests after every change, set the first failing line to the digit the
    tests expect, submit when they pass."""

    def best(self) -> AssistantTurn:
        env = self.env
        if not env.tested:
            return _call("run_tests")
        failing = env.failing()
        if not failing:
            return _call("submit")
        return _call("fix", line=failing[0], value=env.expected(failing[0]))

    def mistake(self) -> AssistantTurn:
        # the two ways to miss: run the tests again (a wasted, farmable turn) or submit too early
        return _call("run_tests") if self.rng.random() < 0.5 else _call("submit")


class BugFixTeacher(BugFixOracle):
    """BugFixOracle with a repeated test run or an early submission on 20 % of its turns."""

    noise = 0.2
