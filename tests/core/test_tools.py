from typing import ClassVar

from pydantic import Field

from rlgym_llm import Tool, ToolCall, ToolError, parse_call


class Calc(Tool):
    """Evaluate an expression."""

    name: ClassVar[str] = "calc"
    expression: str = Field(description="the expression")
    precision: int = 6


def test_spec_is_an_openai_function_schema():
    spec = Calc.spec().to_openai()
    fn = spec["function"]
    assert spec["type"] == "function" and fn["name"] == "calc"
    assert fn["description"] == "Evaluate an expression."
    params = fn["parameters"]
    assert params["type"] == "object" and params["required"] == ["expression"]
    assert params["properties"]["expression"] == {"description": "the expression", "type": "string"}
    assert params["additionalProperties"] is False


def test_parse_call_validates_and_returns_the_model():
    got = parse_call(ToolCall("calc", {"expression": "1+1"}), [Calc])
    assert isinstance(got, Calc) and got.expression == "1+1" and got.precision == 6


def test_unknown_tool_names_the_available_ones():
    got = parse_call(ToolCall("calculator", {}), [Calc])
    assert isinstance(got, ToolError)
    assert "unknown tool 'calculator'" in got.message and "calc" in got.message


def test_bad_arguments_say_what_is_wrong_and_what_is_expected():
    missing = parse_call(ToolCall("calc", {}), [Calc])
    assert isinstance(missing, ToolError)
    assert "expression: Field required" in missing.message and "expression (string)" in missing.message
    extra = parse_call(ToolCall("calc", {"expression": "1", "evil": 1}), [Calc])
    assert isinstance(extra, ToolError) and "evil" in extra.message
    wrong = parse_call(ToolCall("calc", {"expression": "1", "precision": "many"}), [Calc])
    assert isinstance(wrong, ToolError) and "precision" in wrong.message


def test_huge_bad_input_is_not_echoed_in_full():
    got = parse_call(ToolCall("x" * 10_000, {}), [Calc])
    assert isinstance(got, ToolError) and len(got.message) < 500
