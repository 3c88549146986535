from rlgym_llm import ActionSpace, AssistantTurn, ChatSpace


def test_chat_space_contains_messages_only():
    space = ChatSpace()
    assert space.contains([{"role": "user", "content": "hi"}])
    assert space.contains([{"role": "tool", "content": "2", "name": "calc", "tool_call_id": "c0"}])
    assert space.contains([])
    assert not space.contains([{"role": "assistant", "content": "x"}])  # envs do not speak for the model
    assert not space.contains([{"role": "user"}])
    assert not space.contains([{"role": "user", "content": "x", "secret": 1}])
    assert not space.contains("hi")
    assert not space.contains([{"role": "user", "content": "x"}] * 65)


def test_samples_are_members_and_seeded():
    space = ChatSpace(seed=3)
    samples = [space.sample() for _ in range(50)]
    assert all(space.contains(s) for s in samples)
    space.seed(3)
    assert [space.sample() for _ in range(50)] == samples


def test_action_space_samples_tool_calls_to_known_and_unknown_tools():
    space = ActionSpace(["calc", "submit"], seed=0)
    samples = [space.sample() for _ in range(200)]
    assert all(isinstance(s, AssistantTurn) and space.contains(s) for s in samples)
    names = {c.name for s in samples for c in s.tool_calls}
    assert {"calc", "submit", "no_such_tool"} <= names
    assert any(not s.tool_calls for s in samples)
    assert space.contains("text") and not space.contains(3)
