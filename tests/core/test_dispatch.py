"""The Env base class runs tools: handlers per tool, function tools, per-episode state, abstract methods."""

from typing import Annotated, Any, ClassVar

import gymnasium
import pydantic
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import rlgym_llm
from rlgym_llm import AssistantTurn, Env, Task, Tool, ToolCall, ToolResult, check_env, function_tool, register
from rlgym_llm.core.dispatch import clip_observation, tool_from_function, tool_message


class Shout(Tool):
    """Say something loudly."""

    name: ClassVar[str] = "shout"
    text: str


def scale(x: float, factor: Annotated[int, pydantic.Field(ge=1, le=10)] = 2) -> str:
    """Multiply a number.

    A second line of description.

    Args:
        x: the number to scale,
            across two lines
        factor: how many times
    """
    return str(x * factor)


class Demo(Env):
    tools = (Shout, scale)

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[str] = []

    def sample_task(self, options: Any) -> Task:
        return Task(id="t", prompt="Shout, then finish.", answer="done")

    def opening(self, task: Task) -> list:
        assert self.log == [], "new_episode runs before opening"
        return [{"role": "user", "content": task.prompt}]

    def new_episode(self, task: Task) -> None:
        self.log: list[str] = []
        self.finished = False
        self.episodes.append(task.id)

    def episode_over(self) -> bool:
        return self.finished

    def on_shout(self, args: Shout) -> str | ToolResult:
        self.log.append(args.text)
        return ToolResult("too quiet", ok=False) if args.text.islower() else args.text + "!"

    @function_tool
    def finish(self, note: str = "") -> str:
        """End the episode."""
        self.finished = True
        return f"finished {note}".strip()

    def outcome(self) -> dict[str, Any]:
        return {"reward": float(self.finished), "components": {"shouts": float(len(self.log))}}


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments, id=f"c_{name}")


def turn(*calls: ToolCall) -> AssistantTurn:
    return AssistantTurn(content="", tool_calls=tuple(calls))


def test_tool_message_answers_the_call():
    assert tool_message(call("shout", text="x"), "hi") == {
        "role": "tool",
        "content": "hi",
        "tool_call_id": "c_shout",
        "name": "shout",
    }


def test_function_tool_schema_comes_from_signature_and_docstring():
    spec = tool_from_function(scale).spec()
    assert spec.name == "scale"
    assert spec.description == "Multiply a number.\n\nA second line of description."
    props = spec.parameters["properties"]
    assert props["x"] == {"type": "number", "description": "the number to scale, across two lines"}
    assert props["factor"]["default"] == 2 and props["factor"]["maximum"] == 10
    assert props["factor"]["description"] == "how many times"
    assert spec.parameters["required"] == ["x"]


def test_function_tool_rejects_var_args():
    def bad(*items: int) -> str:
        return ""

    with pytest.raises(TypeError, match="plain named parameter"):
        function_tool(bad)


def test_tools_collect_models_functions_and_methods():
    assert [t.name for t in Demo.tools] == ["shout", "scale", "finish"]
    assert [s["function"]["name"] for s in Demo().tool_schemas()] == ["shout", "scale", "finish"]


def test_dispatch_runs_each_handler_and_answers_every_call():
    env = Demo()
    env.reset(seed=0)
    messages, reward, terminated, _, info = env.step(
        turn(call("shout", text="HEY"), call("scale", x=1.5, factor=3), call("nope"), call("scale", x=1, factor=99))
    )
    assert [m["content"] for m in messages[:2]] == ["HEY!", "4.5"]
    assert messages[2]["content"].startswith("Error: unknown tool 'nope'")
    assert "factor: Input should be less than or equal to 10" in messages[3]["content"]
    assert [m["tool_call_id"] for m in messages] == ["c_shout", "c_scale", "c_nope", "c_scale"]
    assert (reward, terminated, info["signals"]["tool_ok"]) == (0.0, False, False)


def test_handler_failure_sets_tool_ok_false_and_no_call_nudges():
    env = Demo()
    env.reset(seed=0)
    assert env.step(turn(call("shout", text="quiet")))[4]["signals"]["tool_ok"] is False
    messages, *_, info = env.step("just text")
    assert messages == [{"role": "user", "content": Env.no_tool_call}] and info["signals"]["tool_ok"] is None


def test_episode_over_ends_the_episode_pays_once_and_ignores_later_calls():
    env = Demo()
    env.reset(seed=0)
    messages, reward, terminated, _, info = env.step(turn(call("finish", note="now"), call("shout", text="LATE")))
    assert [m["content"] for m in messages] == ["finished now", Env.ignored_call.content]
    assert env.log == [], "a call after the end does not run"
    assert (reward, terminated, info["outcome"]["reward"]) == (1.0, True, 1.0)


def test_reset_calls_new_episode_each_time():
    env = Demo()
    env.reset(seed=0)
    env.step(turn(call("shout", text="A"), call("finish")))
    env.reset(seed=1)
    assert env.log == [] and not env.finished and env.episodes == ["t", "t"]


def test_required_methods_are_abstract():
    class Incomplete(Env):
        def sample_task(self, options: Any) -> Task:
            return Task(id="x", prompt="x")

    with pytest.raises(TypeError, match="abstract method"):
        Incomplete()  # type: ignore[abstract]


def test_a_tool_without_handler_is_named_in_the_error():
    class NoHandler(Demo):
        on_shout = None  # type: ignore[assignment]

    env = NoHandler()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="on_shout"):
        env.step(turn(call("shout", text="X")))


def test_duplicate_tool_names_fail_at_class_creation():
    with pytest.raises(TypeError, match="more than once"):

        class Twice(Demo):
            @function_tool
            def shout(self, text: str) -> str:
                """Again."""
                return text


def test_extra_info_reaches_reset_and_step():
    class WithInfo(Demo):
        def extra_info(self) -> dict[str, Any]:
            return {"shouts": len(self.log)}

    env = WithInfo()
    assert env.reset(seed=0)[1]["shouts"] == 0
    assert env.step(turn(call("shout", text="A")))[4]["shouts"] == 1


def test_the_demo_env_passes_check_env():
    register("dispatch/Demo-v0", Demo, max_turns=3)
    try:
        check_env("dispatch/Demo-v0")
    finally:
        gymnasium.registry.pop("dispatch/Demo-v0", None)
        rlgym_llm.core.registry._max_turns.pop("dispatch/Demo-v0", None)


@given(st.lists(st.integers(0, 20_000), min_size=1, max_size=40), st.integers(2000, 40_000))
# Hypothesis found it: the last of 21 messages got a share (94) shorter than its notice alone, and the
# total came to 2,001
@example([92] + [95] * 20, 2000)
def test_clip_observation_bounds_the_total_and_keeps_short_messages(sizes, limit):
    messages = [{"role": "tool", "content": "x" * n} for n in sizes]
    clipped = clip_observation(messages, limit)
    assert sum(len(m["content"]) for m in clipped) <= limit
    if sum(sizes) <= limit:
        assert clipped is messages
    fair = limit // len(sizes) - 200  # a message shorter than an equal share minus the notice is never cut
    for before, after in zip(messages, clipped, strict=True):
        if len(before["content"]) <= fair:
            assert after == before
        elif after != before:  # cut: a prefix of the original, then the notice (a short one, or none, where
            # the share cannot hold the full notice)
            if "\n[... " not in after["content"]:
                assert before["content"].startswith(after["content"])
                assert len(after["content"]) < len(before["content"])
                continue
            kept, notice = after["content"].split("\n[... ", 1)
            assert before["content"].startswith(kept)
            cut = len(before["content"]) - len(kept)
            assert notice.startswith(f"{cut} characters cut: an observation holds at most") or notice == f"{cut} cut]"


def test_clip_observation_shortens_the_notice_where_a_share_cannot_hold_it():
    # 40 messages in 2,000 characters: 50 each, less than the full notice (~95 characters)
    clipped = clip_observation([{"role": "tool", "content": "y" * 200} for _ in range(40)], 2000)
    assert sum(len(m["content"]) for m in clipped) <= 2000
    assert all(m["content"].endswith(" cut]") for m in clipped)
    assert all(m["content"] == "y" * 36 + "\n[... 164 cut]" for m in clipped)
    # a share too small for even the short notice: a bare prefix
    clipped = clip_observation([{"role": "tool", "content": "z" * 100} for _ in range(400)], 2000)
    assert [m["content"] for m in clipped] == ["z" * 5] * 400


def test_unparseable_calls_are_capped_too():
    env = Demo()
    env.reset(seed=0)
    turn = AssistantTurn(content="", parse_errors=tuple(f"bad call {i}" for i in range(1000)))
    messages, *_, info = env.step(turn)
    assert len(messages) == 1 + 16 + 1  # the nudge, 16 errors, one line for the rest
    assert messages[-1]["content"] == "Error: 984 more calls could not be read."
    assert info["signals"]["tool_ok"] is False
