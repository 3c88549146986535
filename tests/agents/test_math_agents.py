"""The scripted math oracle solves nearly every task; the random agent almost never does."""

import rlgym_llm
from rlgym_agents.math import MathOracleAgent
from rlgym_agents.random_agent import RandomAgent

N_TASKS = 200


def run_episode(env, agent, seed):
    messages, info = env.reset(seed=seed)
    agent.reset(messages, info)
    while True:
        messages, _, terminated, truncated, info = env.step(agent.act(messages, info))
        if terminated or truncated:
            return info["outcome"]["reward"]


def success_rate(env, agent, n=N_TASKS):
    return sum(run_episode(env, agent, seed) for seed in range(n)) / n


def test_oracle_solves_generated_tasks():
    env = rlgym_llm.make("rlgym/Math-v0", difficulty=[1, 2, 3])
    rate = success_rate(env, MathOracleAgent(env))
    print(f"oracle success rate on {N_TASKS} generated tasks: {rate:.3f}")
    assert rate >= 0.99


def test_oracle_uses_the_calculator_then_submits():
    env = rlgym_llm.make("rlgym/Math-v0", difficulty=3, kinds=["fraction"])
    agent = MathOracleAgent(env)
    messages, info = env.reset(seed=0)
    agent.reset(messages, info)
    first = agent.act(messages, info)
    assert [c.name for c in first.tool_calls] == ["calculator"]
    messages, *_ = env.step(first)
    second = agent.act(messages, {})
    assert [c.name for c in second.tool_calls] == ["submit_answer"]
    assert second.tool_calls[0].arguments["answer"] == messages[0]["content"].split(" ≈ ")[0]


def test_oracle_solves_the_sample_dataset():
    env = rlgym_llm.make("rlgym/Math-v0", dataset="sample")
    agent = MathOracleAgent(env)
    n = len(env.unwrapped.dataset)
    rewards = []
    for i in range(n):
        messages, info = env.reset(seed=i, options={"task_index": i})
        agent.reset(messages, info)
        _, reward, terminated, _, _ = env.step(agent.act(messages, info))
        assert terminated
        rewards.append(reward)
    assert rewards == [1.0] * n


def test_random_agent_almost_never_succeeds():
    env = rlgym_llm.make("rlgym/Math-v0", difficulty=[1, 2, 3])
    rate = success_rate(env, RandomAgent(seed=0))
    print(f"random agent success rate on {N_TASKS} generated tasks: {rate:.3f}")
    assert rate < 0.05


def test_random_agent_is_seeded_and_follows_the_schemas():
    env = rlgym_llm.make("rlgym/Math-v0")
    _, info = env.reset(seed=0)
    a, b = RandomAgent(seed=3), RandomAgent(seed=3)
    a.reset(None, info)
    b.reset(None, info)
    turns_a = [a.act([], info) for _ in range(20)]
    assert turns_a == [b.act([], info) for _ in range(20)]
    calls = [c for t in turns_a for c in t.tool_calls]
    assert calls and {c.name for c in calls} <= {"calculator", "submit_answer"}
    assert any(set(c.arguments) in ({"expression"}, {"answer"}) for c in calls)
    assert all(isinstance(v, str) for c in calls for v in c.arguments.values())


def test_random_agent_without_tools_writes_text():
    agent = RandomAgent(seed=1)
    agent.reset([], {})
    assert all(not agent.act([], {}).tool_calls for _ in range(10))


def _first_call_and_reward(env, agent, seed):
    messages, info = env.reset(seed=seed)
    agent.reset(messages, info)
    first = None
    while True:
        turn = agent.act(messages, info)
        first = first or turn.tool_calls[0].name
        messages, _, terminated, truncated, info = env.step(turn)
        if terminated or truncated:
            return first, info["outcome"]["reward"]


def test_the_math_teacher_guesses_wrong_on_its_share_of_tasks_and_is_the_oracle_otherwise():
    from rlgym_agents.math import MathTeacher

    env = rlgym_llm.make("rlgym/Math-v0", difficulty=0, kinds=["arithmetic"], prompt="short")
    runs = [_first_call_and_reward(env, MathTeacher(env), seed) for seed in range(N_TASKS)]
    guesses = [reward for first, reward in runs if first == "submit_answer"]
    used_the_tool = [reward for first, reward in runs if first == "calculator"]
    assert 0.2 < len(guesses) / N_TASKS < 0.4, len(guesses)
    assert guesses and not any(guesses)  # a guess is off by one: always wrong
    assert used_the_tool and all(used_the_tool)  # otherwise the oracle's moves: always right
    # the episode's seed decides: the same seed, the same demonstration
    assert [_first_call_and_reward(env, MathTeacher(env), seed) for seed in range(N_TASKS)] == runs
    # control: the oracle never skips the calculator
    oracle = [_first_call_and_reward(env, MathOracleAgent(env), seed) for seed in range(N_TASKS)]
    assert {first for first, _ in oracle} == {"calculator"} and all(reward for _, reward in oracle)


def test_the_math_teacher_guesses_only_integer_answers():
    from rlgym_agents.math import MathTeacher

    env = rlgym_llm.make("rlgym/Math-v0", difficulty=3, kinds=["fraction"])
    firsts = {}
    for seed in range(100):
        first, reward = _first_call_and_reward(env, MathTeacher(env), seed)
        integer = "/" not in str(env.unwrapped.task.answer)
        firsts.setdefault(integer, set()).add(first)
        assert reward == (first == "calculator")
    # a fraction is never guessed (the oracle's moves); some integer results are
    assert firsts[False] == {"calculator"} and "submit_answer" in firsts[True]


def _calls_and_reward(env, agent, seed, max_turns=3):
    """The tool names an episode calls (at most `max_turns` turns, as `env.max_turns` caps a rollout)."""
    messages, info = env.reset(seed=seed)
    agent.reset(messages, info)
    names, reward = [], 0.0
    for _ in range(max_turns):
        turn = agent.act(messages, info)
        names += [c.name for c in turn.tool_calls]
        messages, reward, terminated, truncated, info = env.step(turn)
        if terminated or truncated:
            break
    return tuple(names), reward


def test_the_recheck_teacher_never_submits_on_its_share_of_tasks_and_is_the_oracle_otherwise():
    from rlgym_agents.math import MathRecheckTeacher

    env = rlgym_llm.make("rlgym/Math-v0", difficulty=0, kinds=["arithmetic"], prompt="short")
    runs = [_calls_and_reward(env, MathRecheckTeacher(env), seed) for seed in range(N_TASKS)]
    rechecks = [reward for names, reward in runs if names == ("calculator",) * 3]
    submits = [reward for names, reward in runs if names == ("calculator", "submit_answer")]
    assert len(rechecks) + len(submits) == N_TASKS  # the first turn is always the calculator call
    assert 0.6 < len(rechecks) / N_TASKS < 0.8, len(rechecks)
    assert not any(rechecks)  # out of turns, nothing submitted: always reward 0
    assert all(submits)  # otherwise the oracle's moves: always right
    # the episode's seed decides: the same seed, the same demonstration
    assert [_calls_and_reward(env, MathRecheckTeacher(env), seed) for seed in range(N_TASKS)] == runs
    # control: the oracle always submits after one calculator call
    oracle = {_calls_and_reward(env, MathOracleAgent(env), seed) for seed in range(N_TASKS)}
    assert oracle == {(("calculator", "submit_answer"), 1.0)}


def test_the_recheck_teacher_solves_dataset_tasks_as_the_oracle():
    from rlgym_agents.math import MathRecheckTeacher

    env = rlgym_llm.make("rlgym/Math-v0", dataset="sample")
    for i in range(len(env.unwrapped.dataset)):
        messages, info = env.reset(seed=i, options={"task_index": i})
        agent = MathRecheckTeacher(env)
        agent.reset(messages, info)
        _, reward, terminated, _, _ = env.step(agent.act(messages, info))
        assert terminated and reward == 1.0
