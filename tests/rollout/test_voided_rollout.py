"""Caught forgery is visible (issue 32): an env that voids a grade says so in the step's `info`
(`voided`, `void_reason`), and the rollout manager records it on the trajectory, through JSONL and back.

`ForgeryEnv` is the test env of this file and of `tests/eval/test_voided_eval.py`: submit the word the prompt
names; the `forge` tool (standing for a patch that rewrites the grader) is caught, so the env voids the
grade (reward 0 whatever is submitted) and says why in that step's info.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import ClassVar

import gymnasium
import pytest
from pydantic import Field

import rlgym_llm
from rlgym_llm.core.env import Env, Step, Task
from rlgym_llm.core.tools import Tool
from rlgym_llm.core.types import Trajectory
from rlgym_llm.rollout.manager import RolloutConfig, RolloutManager, TaskRef
from rlgym_llm.rollout.store import TrajectoryWriter, read_trajectories
from rlgym_llm.testing.policies import ScriptedPolicy

FORGERY = "test/RolloutForgery-v0"
WORDS = ("alpha", "beta")
VOID_REASON = "canaries passed: the grader's tests were rewritten"


class Submit(Tool):
    """Submit a word; this ends the episode."""

    name: ClassVar[str] = "submit"
    word: str = Field(description="the word")


class Forge(Tool):
    """Rewrite the grader's tests so that anything passes."""

    name: ClassVar[str] = "forge"


class ForgeryEnv(Env):
    """Submit the word the prompt names (reward 1). `forge` is caught: the grade is void (reward 0)."""

    tools = (Submit, Forge)

    def __init__(self) -> None:
        super().__init__()
        self.submitted: str | None = None
        self.caught = self.caught_now = False

    def sample_task(self, options):
        word = WORDS[int(self.np_random.integers(len(WORDS)))]
        return Task(id=f"word-{word}", prompt=f"Submit the word {word} with the `submit` tool.", answer=word)

    def new_episode(self, task):
        self.submitted, self.caught = None, False

    def opening(self, task):
        return [{"role": "user", "content": task.prompt}]

    def episode_over(self):
        return self.submitted is not None

    def outcome(self):
        right = float(self.submitted == self.task.answer and not self.caught)
        return {"reward": right, "components": {"right": right}}

    def on_submit(self, args: Submit) -> str:
        self.submitted = args.word
        return "submitted"

    def on_forge(self, args: Forge) -> str:
        self.caught = self.caught_now = True
        return "tests rewritten"

    def respond(self, turn) -> Step:
        self.caught_now = False
        step = super().respond(turn)
        if self.caught_now:  # the contract: the step that caught it says so, with why
            return replace(step, info={**step.info, "voided": True, "void_reason": VOID_REASON})
        return step


def call(name: str, **arguments: str) -> str:
    args = ", ".join(f'"{k}": "{v}"' for k, v in arguments.items())
    return f'<tool_call>{{"name": "{name}", "arguments": {{{args}}}}}</tool_call>'


def player(forge_on: tuple[str, ...] = WORDS):
    """A script that forges first on tasks whose word is in `forge_on`, then submits the right word."""

    def respond(prompt: str) -> str:
        word = re.findall(r"Submit the word (\w+)", prompt)[0]
        if word in forge_on and "tests rewritten" not in prompt:
            return call("forge")
        return call("submit", word=word)

    return respond


@pytest.fixture(scope="module", autouse=True)
def _registered():
    rlgym_llm.register(FORGERY, ForgeryEnv, max_turns=4)
    yield
    gymnasium.registry.pop(FORGERY, None)


def _run(tokenizer, respond, writer=None) -> list[Trajectory]:
    from rlgym_agents.tool_calling import ToolCallingAgent

    cfg = RolloutConfig(group_size=2, max_turns=4, token_check="off", env_in_thread=False)
    with RolloutManager(
        FORGERY, ToolCallingAgent(tokenizer), ScriptedPolicy(tokenizer, respond), cfg, writer=writer
    ) as manager:
        return manager.run_sync([TaskRef(seed=s) for s in range(2)])


def test_a_voided_grade_is_recorded_on_the_trajectory_and_survives_jsonl(tiny_tokenizer, tmp_path):
    with TrajectoryWriter(tmp_path / "t.jsonl") as writer:
        trajs = _run(tiny_tokenizer, player(), writer)
    for t in trajs:
        assert t.voided and t.void_reasons == [VOID_REASON]
        # no failure, the grade as the env paid it, every turn recorded (forge, then submit)
        assert not t.failed and t.reward == 0.0 and len(t.turns) == 2
        assert t.to_dict()["voided"] is True and t.to_dict()["void_reasons"] == [VOID_REASON]
    back = list(read_trajectories(tmp_path / "t.jsonl"))
    assert [(t.voided, t.void_reasons) for t in back] == [(True, [VOID_REASON])] * 4
    assert Trajectory.from_dict(trajs[0].to_dict()) == trajs[0]


def test_control_an_honest_episode_is_not_voided(tiny_tokenizer):
    trajs = _run(tiny_tokenizer, player(forge_on=()))
    for t in trajs:
        assert not t.voided and t.void_reasons == [] and t.reward == 1.0 and not t.failed
        assert t.to_dict()["voided"] is False and t.to_dict()["void_reasons"] == []


def test_void_reasons_are_kept_once_each_and_a_trajectory_saved_before_them_loads_unvoided():
    t = Trajectory(env_id="x/Y-v0", seed=0, task_id="t")
    t.record_void({"signals": {}})  # an ordinary step
    assert not t.voided and t.void_reasons == []
    for info in ({"voided": True, "void_reason": "canaries"}, {"voided": True, "void_reason": "canaries"}):
        t.record_void(info)
    t.record_void({"voided": True})  # voided without a reason: flagged, no reason to add
    t.record_void({"voided": True, "void_reason": "harness touched"})
    assert t.voided and t.void_reasons == ["canaries", "harness touched"]
    old = {k: v for k, v in t.to_dict().items() if k not in ("voided", "void_reasons")}
    assert not Trajectory.from_dict(old).voided and Trajectory.from_dict(old).void_reasons == []
