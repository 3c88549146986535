"""Tool arguments are validated strictly: no value changes type on the way in (issue 32).

Attack: `true` or `"3"` sent for an integer argument (lax pydantic reads them as 1 and 3), `3.0` for an
integer, a number or `true` for a string. Control: the same call with the right types is the model.
"""

from typing import Annotated, ClassVar

import pydantic
import pytest

from rlgym_llm import AssistantTurn, Env, Step, StepSignals, Task, Tool, ToolCall, ToolError, function_tool, parse_call
from rlgym_llm.core.dispatch import tool_from_function


class Pick(Tool):
    """Pick an element."""

    name: ClassVar[str] = "pick"
    id: int = pydantic.Field(ge=0)
    weight: float = 1.0
    label: str = ""
    limit: int | None = None


class Lax(Tool):
    """A model that tries to turn strictness off: the boundary stays strict."""

    model_config = pydantic.ConfigDict(strict=False)
    name: ClassVar[str] = "lax"
    id: int
    count: Annotated[int, pydantic.Field(strict=False)] = 0


def parsed(tool: type[Tool], **arguments):
    return parse_call(ToolCall(tool.name, arguments), [tool])


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": True},
        {"id": False},
        {"id": "3"},
        {"id": " 3 "},
        {"id": 3.0},
        {"id": [3]},
        {"id": 1, "weight": True},
        {"id": 1, "weight": "1.5"},
        {"id": 1, "label": 7},
        {"id": 1, "label": True},
        {"id": 1, "limit": True},
        {"id": 1, "limit": "2"},
    ],
)
def test_attack_coercible_values_are_refused(arguments):
    result = parsed(Pick, **arguments)
    assert isinstance(result, ToolError), result
    assert result.message.startswith("Error: invalid arguments for pick:") and "Expected arguments:" in result.message


def test_the_error_names_the_value_received():
    assert "id: Input should be a valid integer, got true." in parsed(Pick, id=True).message
    assert 'got "3"' in parsed(Pick, id="3").message


def test_control_well_typed_calls_validate():
    assert parsed(Pick, id=3) == Pick(id=3)
    assert parsed(Pick, id=0, weight=0.5, label="x", limit=None) == Pick(id=0, weight=0.5, label="x")
    # JSON has one number type: an integer is a valid float (the one widening kept), and stays a float
    result = parsed(Pick, id=1, weight=2)
    assert isinstance(result, Pick) and result.weight == 2.0 and isinstance(result.weight, float)


@pytest.mark.parametrize("arguments", [{"id": True}, {"id": "3"}, {"id": 1, "count": "2"}, {"id": 1, "count": True}])
def test_attack_a_model_or_field_that_turns_strictness_off_is_strict_at_the_boundary(arguments):
    assert isinstance(parsed(Lax, **arguments), ToolError)


def test_control_the_lax_model_takes_well_typed_calls():
    assert parsed(Lax, id=1, count=2) == Lax(id=1, count=2)


def test_direct_construction_is_strict_too():
    with pytest.raises(pydantic.ValidationError):
        Pick(id=True)
    with pytest.raises(pydantic.ValidationError):
        Pick.model_validate({"id": "3"})


def pick(id: int, flag: bool = False, ratio: float = 0.5) -> str:
    """Pick an element.

    Args:
        id: the element
        flag: a switch
        ratio: a share
    """
    return f"{id} {flag} {ratio}"


@pytest.mark.parametrize(
    "arguments",
    [{"id": True}, {"id": "3"}, {"id": 3.0}, {"id": 1, "flag": 1}, {"id": 1, "flag": "true"}, {"id": 1, "ratio": True}],
)
def test_attack_function_tools_are_strict(arguments):
    assert isinstance(parse_call(ToolCall("pick", arguments), [tool_from_function(pick)]), ToolError)


def test_control_function_tools_take_well_typed_calls():
    model = tool_from_function(pick)
    result = parse_call(ToolCall("pick", {"id": 3, "flag": True, "ratio": 1}), [model])
    assert isinstance(result, model) and (result.id, result.flag, result.ratio) == (3, True, 1.0)


class Counter(Env):
    """An env with one method tool: a refused call is an error observation and a failed call."""

    def sample_task(self, options):
        return Task(id="t", prompt="add")

    def opening(self, task):
        return [{"role": "user", "content": task.prompt}]

    def outcome(self):
        return {"reward": 0.0, "components": {}}

    def new_episode(self, task):
        self.total = 0

    @function_tool
    def add(self, amount: Annotated[int, pydantic.Field(ge=1, le=3)]) -> str:
        """Add to the total.

        Args:
            amount: 1 to 3
        """
        self.total += amount
        return str(self.total)

    def respond(self, turn):
        run = self.run_tools(turn)
        return Step(run.messages, signals=StepSignals(tool_ok=run.ok))


def test_attack_and_control_through_an_env_method_tool():
    env = Counter()
    env.reset(seed=0)
    for bad in (True, "2", 2.0):
        messages, _, terminated, _, info = env.step(AssistantTurn(tool_calls=(ToolCall("add", {"amount": bad}),)))
        assert messages[0]["content"].startswith("Error: invalid arguments for add: amount:")
        assert info["signals"]["tool_ok"] is False and not terminated and env.total == 0
    messages, _, _, _, info = env.step(AssistantTurn(tool_calls=(ToolCall("add", {"amount": 2}),)))
    assert messages[0]["content"] == "2" and info["signals"]["tool_ok"] is True and env.total == 2
