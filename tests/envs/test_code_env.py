"""rlgym/Code-v0: tools, feedback, reward, signals, truncation, options (local backend; docker under -m docker)."""

import pytest

import rlgym_llm
from rlgym_agents.code import CodeOracleAgent
from rlgym_envs.code.splits import task_splits
from rlgym_envs.code.tasks import load_specs
from rlgym_llm import ConfigError
from rlgym_llm.sandbox import SandboxError

WRONG_DIGIT_SUM = "def digit_sum(n):\n    return n % 10\n"  # right on 0 and 9 only
# The content split of each shipped task: an env draws only from its own split's pool.
SPLIT = {spec.id: split for spec, (split, _) in zip(load_specs("builtin"), task_splits(load_specs("builtin")))}


def call(name, code, call_id="c1"):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "name": name, "arguments": {"code": code}}],
    }


@pytest.fixture(scope="module")
def env():
    env = rlgym_llm.make("rlgym/Code-v0", split=SPLIT["digit-sum"])  # the task most tests here use
    yield env
    env.close()


def test_opening_shows_task_and_examples_not_ground_truth(env):
    messages, info = env.reset(seed=3, options={"task_id": "digit-sum"})
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "run_examples" in messages[0]["content"] and "submit" in messages[0]["content"]
    assert "def digit_sum(n: int) -> int" in messages[1]["content"]
    assert "digit_sum(123) == 6" in messages[1]["content"]
    assert env.unwrapped.task.answer not in messages[1]["content"]
    assert [t["function"]["name"] for t in info["tools"]] == ["run_examples", "submit"]


def test_run_examples_reports_failures_for_the_next_turn(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    messages, reward, terminated, truncated, info = env.step(call("run_examples", WRONG_DIGIT_SUM))
    text = messages[0]["content"]
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert messages[0]["role"] == "tool" and messages[0]["tool_call_id"] == "c1"
    assert "1 passed, 1 failed" in text
    assert "Call: digit_sum(123)" in text and "expected: 6" in text and "got: 3" in text
    assert info["signals"]["examples"] == {"passed": 1, "total": 2, "vector": [False, True]}
    assert info["signals"]["progress"] == 0.5
    assert info["signals"]["tests"] is None  # hidden results only after the submission


def test_errors_and_stderr_are_fed_back(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    code = "import sys\ndef digit_sum(n):\n    print('debug', n, file=sys.stderr)\n    return 1 // 0\n"
    text = env.step(call("run_examples", code))[0][0]["content"]
    assert "ERROR" in text and "ZeroDivisionError" in text and "debug 123" in text
    text = env.step(call("run_examples", "def other(): pass\n"))[0][0]["content"]
    assert "no function named 'digit_sum'" in text
    text = env.step(call("run_examples", "def digit_sum(n):\n    return [n] * 10**6\n"))[0][0]["content"]
    assert "larger than the output limit" in text
    text = env.step(call("run_examples", "def digit_sum(n):\n    return {1, 2}\n"))[0][0]["content"]
    assert "not JSON data" in text


def test_a_loop_times_out_per_case():
    env = rlgym_llm.make("rlgym/Code-v0", test_timeout_s=0.3, split=SPLIT["digit-sum"])
    env.reset(seed=0, options={"task_id": "digit-sum"})
    text = env.step(call("run_examples", "def digit_sum(n):\n    while True: pass\n"))[0][0]["content"]
    assert text.count("TIMEOUT") == 2 and "time limit exceeded" in text
    env.close()


def test_stdio_feedback_shows_expected_and_actual_output():
    env = rlgym_llm.make("rlgym/Code-v0", split=SPLIT["sum-two"])
    env.reset(seed=0, options={"task_id": "sum-two"})
    text = env.step(call("run_examples", "a, b = map(int, input().split())\nprint(a - b)\n"))[0][0]["content"]
    assert "input:\n    1 2\n  expected output:\n    3\n  got:\n    -1" in text
    env.close()


def test_a_wrong_submission_ends_the_episode_with_the_pass_vector(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    messages, reward, terminated, _, info = env.step(call("submit", WRONG_DIGIT_SUM))
    n = len(env.unwrapped.task.hidden["tests"])
    assert terminated and reward == 0.0
    assert messages[0]["content"].startswith(f"Submitted. 1/{n} hidden tests passed.")
    tests = info["signals"]["tests"]
    assert tests == {"passed": 1, "total": n, "vector": [True] + [False] * (n - 1)}  # only digit_sum(9) is right
    outcome = info["outcome"]
    assert outcome["tests"] == tests
    comps = outcome["components"]
    assert comps["all_passed"] == 0.0 and comps["submitted"] == 1.0
    assert comps["tests_passed"] == 1.0 and comps["tests_total"] == n and comps["pass_rate"] == pytest.approx(1 / n)
    assert [comps[f"test/{i}"] for i in range(n)] == [1.0] + [0.0] * (n - 1)
    assert info["signals"]["reward_components"] == comps
    assert [r["status"] for r in info["test_results"]] == ["pass"] + ["wrong"] * (n - 1)
    assert info["test_results"][0]["id"] == "digit-sum/0"
    for test in env.unwrapped.task.hidden["tests"]:  # the hidden expectations stay hidden
        assert f"== {test['expected']!r}" not in messages[0]["content"]


def test_outcome_level_orders_no_submission_none_some_all_passing(env):
    # G-RA's gate reads this ordered level: 0 no submission < 1 nothing passes < 2 some pass < 3 all pass
    env.reset(seed=0, options={"task_id": "digit-sum"})
    _, _, _, _, info = env.step("thinking")
    assert info["signals"]["outcome_level"] == 0
    _, _, _, _, info = env.step(call("submit", WRONG_DIGIT_SUM))  # right on digit_sum(9) only
    assert info["signals"]["outcome_level"] == 2
    env.reset(seed=0, options={"task_id": "digit-sum"})
    _, _, _, _, info = env.step(call("submit", "def digit_sum(n):\n    return -1\n"))
    assert info["signals"]["outcome_level"] == 1
    env.reset(seed=0, options={"task_id": "digit-sum"})
    _, reward, _, _, info = env.step(call("submit", env.unwrapped.task.answer))
    assert reward == 1.0 and info["signals"]["outcome_level"] == 3


def test_one_submission_per_episode(env):
    env.reset(seed=0, options={"task_id": "digit-sum"})
    turn = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "a", "name": "submit", "arguments": {"code": WRONG_DIGIT_SUM}},
            {"id": "b", "name": "submit", "arguments": {"code": env.unwrapped.task.answer}},
        ],
    }
    messages, reward, terminated, _, _ = env.step(turn)
    assert terminated and reward == 0.0
    assert messages[1]["content"].startswith("Ignored")


def test_bad_calls_and_plain_text_get_messages_not_exceptions(env):
    env.reset(seed=0)
    messages, reward, terminated, _, info = env.step("def f(): pass")
    assert "call run_examples" in messages[0]["content"] and not terminated and reward == 0.0
    messages, _, _, _, info = env.step(call("submit", ""))
    assert messages[0]["content"].startswith("Error: invalid arguments for submit")
    assert info["signals"]["tool_ok"] is False
    messages, *_ = env.step(call("run_examples", "x" * 200_000))
    assert "Error: invalid arguments" in messages[0]["content"]


def test_idle_episode_is_truncated_with_zero_reward():
    env = rlgym_llm.make("rlgym/Code-v0", max_turns=3)
    env.reset(seed=1)
    for _ in range(3):
        _, reward, terminated, truncated, info = env.step("thinking...")
        assert reward == 0.0 and not terminated
    assert truncated and info["truncated_by"] == "turn_limit"
    assert info["outcome"]["reward"] == 0.0 and info["outcome"]["components"]["submitted"] == 0.0
    env.close()


def test_seeds_and_filters_choose_tasks():
    env = rlgym_llm.make("rlgym/Code-v0", difficulty=3, kinds="stdio")
    assert env.unwrapped.tasks and all(
        t.meta["difficulty"] == 3 and t.meta["kind"] == "stdio" for t in env.unwrapped.tasks
    )
    a, _ = env.reset(seed=5)
    b, _ = env.reset(seed=5)
    assert a == b
    with pytest.raises(ValueError, match="task_id"):
        env.reset(options={"task_id": "nope"})
    with pytest.raises(ConfigError, match="kind 'sql'"):
        rlgym_llm.make("rlgym/Code-v0", kinds=["sql"])
    with pytest.raises(ConfigError, match="sandbox_backend"):
        rlgym_llm.make("rlgym/Code-v0", sandbox_backend="vm")


def test_a_user_task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"id": "sq", "kind": "function", "entry_point": "sq", "prompt": "Square x.", '
        '"examples": [{"args": [3], "expected": 9}], "tests": [{"args": [4], "expected": 16}, '
        '{"args": [-2], "expected": 4}], "solution": "def sq(x):\\n    return x * x\\n"}\n'
    )
    env = rlgym_llm.make("rlgym/Code-v0", tasks=str(path))
    agent = CodeOracleAgent(env)
    messages, info = env.reset(seed=0)
    agent.reset(messages, info)
    messages, reward, terminated, _, info = env.step(agent.act(messages, info))
    assert "1 passed, 0 failed" in messages[0]["content"]
    _, reward, terminated, _, info = env.step(agent.act(messages, info))
    assert terminated and reward == 1.0 and info["signals"]["tests"]["vector"] == [True, True]
    env.close()


@pytest.mark.docker
def test_docker_backend_grades_a_handful_of_tasks():
    """Attacks on the docker backend: tests/envs/test_code_tampering.py under -m docker."""
    for split in ("train", "val", "test"):
        env = rlgym_llm.make("rlgym/Code-v0", sandbox_backend="docker", split=split)
        agent = CodeOracleAgent(env)
        try:
            for task_id in ("digit-sum", "merge-intervals", "word-break", "sum-two", "dijkstra"):
                if SPLIT[task_id] != split:
                    continue
                messages, info = env.reset(seed=0, options={"task_id": task_id})
                agent.reset(messages, info)
                while True:
                    messages, reward, terminated, truncated, info = env.step(agent.act(messages, info))
                    if terminated or truncated:
                        break
                assert reward == 1.0, (task_id, messages)
            env.reset(seed=0)
            env.unwrapped._sandbox()
            assert env.unwrapped.isolation["readable"] == []  # the package's task file is not in the container
        finally:
            env.close()


@pytest.mark.docker
def test_a_sandbox_that_cannot_start_raises_sandbox_error_and_is_not_kept():
    env = rlgym_llm.make("rlgym/Code-v0", sandbox_backend="docker", sandbox_options={"image": "no-such-image:1"})
    env.reset(seed=0)
    with pytest.raises(SandboxError, match="no-such-image"):
        env.step(call("submit", "x = 1"))
    assert env.unwrapped._box is None
    env.close()
