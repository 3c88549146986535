"""`rlgym/Math-v0`: the episode rules, signals, determinism and robustness of the math env."""

import json

import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlgym_llm
from rlgym_envs.math.calculator import evaluate
from rlgym_envs.math.env import NO_TOOL_CALL, SHORT_PROMPT, SYSTEM_PROMPT, MathEnv
from rlgym_llm import AssistantTurn, ConfigError, ToolCall
from rlgym_llm.core.types import signal_problems


def call(name, **arguments):
    return AssistantTurn(tool_calls=(ToolCall(name, arguments, id=f"id_{name}"),))


def submit(answer):
    return call("submit_answer", answer=answer)


@pytest.fixture
def env():
    return rlgym_llm.make("rlgym/Math-v0", difficulty=[1, 2, 3])


def test_gymnasium_checker_passes():
    check_env(rlgym_llm.make("rlgym/Math-v0", difficulty=[1, 2, 3]).unwrapped)
    check_env(rlgym_llm.make("rlgym/Math-v0", dataset="sample").unwrapped)


def test_project_checker_passes():
    rlgym_llm.check_env("rlgym/Math-v0", n_fuzz=100)


def test_opening_is_system_prompt_then_question(env):
    messages, info = env.reset(seed=0)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "submit_answer" in messages[0]["content"] and "calculator" in messages[0]["content"]
    assert messages[1]["content"] == env.unwrapped.task.prompt
    assert {t["function"]["name"] for t in info["tools"]} == {"calculator", "submit_answer"}


def test_same_seed_same_task_and_opening():
    a, b = rlgym_llm.make("rlgym/Math-v0"), rlgym_llm.make("rlgym/Math-v0")
    for seed in range(20):
        (msgs_a, info_a), (msgs_b, info_b) = a.reset(seed=seed), b.reset(seed=seed)
        assert info_a["task_id"] == info_b["task_id"] and msgs_a == msgs_b
    assert len({a.reset(seed=s)[1]["task_id"] for s in range(20)}) >= 15


def test_correct_answer_earns_one_and_ends_the_episode(env):
    env.reset(seed=1)
    messages, reward, terminated, truncated, info = env.step(submit(env.unwrapped.task.answer))
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert messages == [
        {
            "role": "tool",
            "content": "Answer submitted. Correct.",
            "tool_call_id": "id_submit_answer",
            "name": "submit_answer",
        }
    ]
    assert info["outcome"] == {"reward": 1.0, "components": {"correct": 1.0, "format": 1.0}}
    signals = info["signals"]
    assert signals["tool_ok"] is True and signals["progress"] == 1.0 and signals["calls_made"] == 1
    assert signals["reward_components"] == {"correct": 1.0, "format": 1.0}
    assert not signal_problems(signals)


def test_wrong_answer_ends_the_episode_without_revealing_the_answer(env):
    for seed in range(30):
        messages, _ = env.reset(seed=seed)
        answer = env.unwrapped.task.answer
        wrong = str(evaluate(answer) + 1)
        obs, reward, terminated, _, info = env.step(submit(wrong))
        assert reward == 0.0 and terminated
        assert info["outcome"]["components"] == {"correct": 0.0, "format": 1.0}
        text = json.dumps(obs)
        assert answer not in text and "Incorrect" in text
        if len(answer) >= 3:  # short answers occur in ordinary text; longer ones must never show
            assert answer not in json.dumps(messages)


def test_garbage_submission_is_wrong_with_format_zero(env):
    env.reset(seed=2)
    _, reward, terminated, _, info = env.step(submit("no idea, sorry"))
    assert reward == 0.0 and terminated
    assert info["outcome"]["components"] == {"correct": 0.0, "format": 0.0}


def test_calculator_results_and_errors_come_back_per_call(env):
    env.reset(seed=3)
    turn = AssistantTurn(
        tool_calls=(
            ToolCall("calculator", {"expression": "12/36"}, id="a"),
            ToolCall("calculator", {"expression": "9**9**9**9"}, id="b"),
            ToolCall("calculator", {"expr": "1"}, id="c"),
            ToolCall("search", {"q": "1"}, id="d"),
        )
    )
    messages, reward, terminated, truncated, info = env.step(turn)
    assert [m["tool_call_id"] for m in messages] == ["a", "b", "c", "d"]
    assert messages[0]["content"].startswith("1/3 ≈ 0.333")
    assert messages[1]["content"].startswith("Error:") and "too large" in messages[1]["content"]
    assert messages[2]["content"].startswith("Error: invalid arguments for calculator")
    assert "unknown tool" in messages[3]["content"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["signals"]["tool_ok"] is False and info["signals"]["calls_made"] == 4
    assert info["signals"]["progress"] == 0.0


def test_numbers_are_accepted_as_tool_arguments(env):
    env.reset(seed=4)
    messages, *_ = env.step(call("calculator", expression=7))
    assert messages[0]["content"] == "7"


def test_empty_answer_is_a_tool_error_not_a_submission(env):
    env.reset(seed=5)
    messages, _, terminated, _, info = env.step(submit("   "))
    assert not terminated and messages[0]["content"].startswith("Error: invalid arguments for submit_answer")
    assert info["signals"]["tool_ok"] is False


def test_text_only_turn_gets_a_reminder(env):
    env.reset(seed=6)
    messages, _, terminated, _, info = env.step("I think it is 4")
    assert messages == [{"role": "user", "content": NO_TOOL_CALL}]
    assert info["signals"]["tool_ok"] is None and not terminated


def test_only_the_first_submission_counts(env):
    env.reset(seed=7)
    answer = env.unwrapped.task.answer
    turn = AssistantTurn(
        tool_calls=(
            ToolCall("submit_answer", {"answer": "nonsense"}, id="1"),
            ToolCall("submit_answer", {"answer": answer}, id="2"),
        )
    )
    messages, reward, terminated, _, info = env.step(turn)
    assert reward == 0.0 and terminated and "Ignored" in messages[1]["content"]
    assert info["signals"]["calls_made"] == 2


def test_turn_limit_truncates_with_an_outcome():
    env = rlgym_llm.make("rlgym/Math-v0")
    env.reset(seed=0)
    for turn in range(1, 7):
        _, _, terminated, truncated, info = env.step("thinking...")
        assert not terminated and truncated == (turn == 6)
    assert info["truncated_by"] == "turn_limit"
    assert info["outcome"] == {"reward": 0.0, "components": {"correct": 0.0, "format": 0.0}}


def test_dataset_tasks_by_index_and_by_rng(tmp_path):
    from rlgym_llm.core.splits import split_of

    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(json.dumps({"question": f"{i} + {i}?", "answer": 2 * i}) for i in range(12)))
    env = rlgym_llm.make("rlgym/Math-v0", dataset=str(path))  # the train pool: its rows, in file order
    pool = [i for i in range(12) if split_of(f"{i} + {i}?") == "train"]
    assert 0 < len(pool) < 12
    messages, info = env.reset(seed=0, options={"task_index": 1})
    i = pool[1]
    assert info["task_id"] == f"d-{i}" and messages[1]["content"] == f"{i} + {i}?"
    _, reward, *_ = env.step(submit(str(2 * i)))
    assert reward == 1.0
    ids = {env.reset(seed=s)[1]["task_id"] for s in range(60)}
    assert ids == {f"d-{i}" for i in pool}
    assert env.reset(seed=11)[1]["task_id"] == env.reset(seed=11)[1]["task_id"]
    with pytest.raises(ValueError, match="task_index"):
        env.reset(options={"task_index": len(pool)})


def test_bad_config_lists_every_problem():
    with pytest.raises(ConfigError) as err:
        MathEnv(difficulty=[0, 4], kinds=["algebra"])
    assert len(err.value.problems) == 3
    with pytest.raises(ValueError, match="needs a dataset"):
        MathEnv().reset(options={"task_index": 0})


def test_level_0_is_arithmetic_only_and_the_short_prompt_is_one_line():
    with pytest.raises(ConfigError, match="kinds=\\['arithmetic'\\] only"):
        MathEnv(difficulty=0)
    with pytest.raises(ConfigError, match="prompt"):
        MathEnv(prompt="tiny")
    messages, _ = MathEnv(difficulty=0, kinds=["arithmetic"], prompt="short").reset(seed=3)
    assert messages[0] == {"role": "system", "content": SHORT_PROMPT}
    assert MathEnv().reset(seed=3)[0][0]["content"] == SYSTEM_PROMPT


def test_kinds_and_difficulty_select_tasks():
    env = MathEnv(difficulty=3, kinds=["fraction"])
    for seed in range(10):
        env.reset(seed=seed)
        assert env.task.meta["kind"] == "fraction" and env.task.meta["difficulty"] == 3


tool_call_dicts = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=5), st.integers()),
        "function": st.fixed_dictionaries(
            {},
            optional={
                "name": st.one_of(
                    st.sampled_from(["calculator", "submit_answer", "x"]), st.text(max_size=8), st.none()
                ),
                "arguments": st.one_of(
                    st.text(max_size=30),
                    st.dictionaries(
                        st.sampled_from(["expression", "answer", "other"]),
                        st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.none(), st.booleans()),
                        max_size=3,
                    ),
                    st.integers(),
                ),
            },
        ),
    },
)
actions = st.one_of(
    st.text(max_size=100),
    st.builds(
        lambda calls, content: {"role": "assistant", "content": content, "tool_calls": calls},
        st.lists(tool_call_dicts, max_size=3),
        st.one_of(st.text(max_size=20), st.none()),
    ),
    st.integers(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(actions, min_size=1, max_size=4), st.integers(0, 50))
def test_step_never_raises_on_arbitrary_actions(action_list, seed):
    env = rlgym_llm.make("rlgym/Math-v0", difficulty=[1, 2, 3])
    env.reset(seed=seed)
    for action in action_list:
        messages, reward, terminated, truncated, info = env.step(action)
        assert env.observation_space.contains(messages)
        assert reward in (0.0, 1.0)
        assert not signal_problems(info["signals"])
        if terminated or truncated:
            assert "outcome" in info
            break
