import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_agents.tool_calling import ToolCallingAgent, parse_tool_calls
from rlgym_llm import ToolCall
from rlgym_llm.rollout.policy import Completion

TOOLS = [{"type": "function", "function": {"name": "calc", "description": "d", "parameters": {"type": "object"}}}]


def test_hermes_calls_are_parsed_and_removed_from_content():
    turn = parse_tool_calls(
        'Let me compute.<tool_call>{"name": "calc", "arguments": {"e": "1+1"}}</tool_call>'
        '<tool_call>{"name": "submit", "arguments": "{\\"answer\\": \\"2\\"}"}</tool_call>'
    )
    assert turn.content == "Let me compute."
    assert turn.tool_calls == (ToolCall("calc", {"e": "1+1"}, "call_0"), ToolCall("submit", {"answer": "2"}, "call_1"))
    assert turn.parse_errors == ()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('<tool_call>{"name": "calc", "arguments": {"e": }</tool_call>', "not valid JSON"),
        ("<tool_call>[1, 2]</tool_call>", "must be a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', "no tool name"),
        ('<tool_call>{"name": "calc", "arguments": [1]}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "calc", "arguments": {"e": "1"', "not closed"),
    ],
)
def test_malformed_calls_become_parse_errors(text, fragment):
    turn = parse_tool_calls(text)
    assert turn.tool_calls == ()
    assert len(turn.parse_errors) == 1 and fragment in turn.parse_errors[0]


def test_good_calls_survive_next_to_a_bad_one():
    turn = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{bad}</tool_call>')
    assert [c.name for c in turn.tool_calls] == ["a"] and len(turn.parse_errors) == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calc", "arguments": {"e": "2*3"}}',
        'Sure.\n```json\n{"name": "calc", "arguments": {"e": "2*3"}}\n```',
    ],
)
def test_plain_json_fallback(text):
    turn = parse_tool_calls(text)
    assert turn.tool_calls == (ToolCall("calc", {"e": "2*3"}, "call_0"),)


def test_text_without_calls_is_content():
    assert parse_tool_calls("  The answer is 4.  ").content == "The answer is 4."
    assert parse_tool_calls('I like {"name": braces}').tool_calls == ()


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('<>/{}[]":,tool_cal namergs 01\\')), max_size=120))
def test_parsing_never_raises(text):
    turn = parse_tool_calls(text)
    assert isinstance(turn.content, str)


def _decoded(tokenizer, ids):
    return tokenizer.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("closed", [True, False])
def test_continuation_extends_the_context_to_a_fresh_rendering(tiny_tokenizer, closed):
    agent = ToolCallingAgent(tiny_tokenizer, system_prompt="Be brief.")
    history = agent.prepare([{"role": "user", "content": "What is 6*7?"}])
    assert history[0] == {"role": "system", "content": "Be brief."}
    ids = agent.render_prompt(history, TOOLS)
    text = '<tool_call>{"name": "calc", "arguments": {"e": "6*7"}}</tool_call>'
    completion = tiny_tokenizer.encode(text, add_special_tokens=False)
    if closed:
        completion.append(tiny_tokenizer.eos_token_id)
    done = Completion(tuple(completion), (0.0,) * len(completion), text, "stop" if closed else "length")
    history.append(agent.assistant_message(done))
    assert history[-1] == {"role": "assistant", "content": text}
    reply = [{"role": "tool", "content": "42", "name": "calc", "tool_call_id": "call_0"}]
    ids += completion + agent.render_continuation(history, reply, TOOLS, done)
    history += reply
    assert _decoded(tiny_tokenizer, ids) == agent.render_text(history, TOOLS, generation_prompt=True)
