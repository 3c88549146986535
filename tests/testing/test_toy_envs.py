"""The shipped toy envs: their optimal policies reach the known optimal return on every task."""

import math

import pytest

from rlgym_llm import TurnLimit
from rlgym_llm.core.splits import split_of
from rlgym_llm.testing import Bisector, CounterEnv, CounterPlayer, GuessNumberEnv
from rlgym_llm.testing.toy import GUESS_BUDGET, HIGH, LOW, counter_key


def play(env, player, options, seed=0):
    observation, _ = env.reset(seed=seed, options=options)
    total, turns = 0.0, 0
    while True:
        observation, reward, terminated, truncated, info = env.step(player.act(observation))
        total, turns = total + reward, turns + 1
        if terminated or truncated:
            return total, turns, info


def test_bisection_solves_every_number_within_the_budget():
    assert GUESS_BUDGET == 10  # ceil(log2(900 + 1)): 900 numbers, the last guess must also be answered
    env = TurnLimit(GuessNumberEnv(), GUESS_BUDGET)
    worst = 0
    for n in range(LOW, HIGH + 1):
        total, turns, info = play(env, Bisector(), {"number": n})
        assert (total, info["outcome"]["reward"]) == (1.0, 1.0), n
        assert info["signals"]["state_key"] == "solved" and "truncated_by" not in info
        worst = max(worst, turns)
    assert worst == GUESS_BUDGET  # the budget is tight: some number needs every guess


def test_hints_narrow_the_interval_and_raise_progress():
    env = GuessNumberEnv()
    env.reset(options={"number": 700})
    guess = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "a", "name": "guess", "arguments": {"value": 500}}],
    }
    messages, reward, terminated, _, info = env.step(guess)
    assert messages == [{"role": "tool", "content": "higher", "tool_call_id": "a", "name": "guess"}]
    assert (reward, terminated) == (0.0, False)
    assert info["signals"]["state_key"] == "501-999"
    assert info["signals"]["progress"] == pytest.approx(1 - math.log2(499) / math.log2(900))


def test_a_bad_guess_is_an_error_message_not_an_exception():
    env = GuessNumberEnv()
    env.reset(seed=1)
    bad = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "b", "name": "guess", "arguments": {"value": "hi"}}],
    }
    messages, reward, _, _, info = env.step(bad)
    assert messages[0]["content"].startswith("Error: invalid arguments for guess")
    assert reward == 0.0 and info["signals"]["tool_ok"] is False


def test_the_number_never_appears_in_the_prompt():
    env = GuessNumberEnv()
    for n in range(LOW, HIGH + 1):
        opening, _ = env.reset(options={"number": n})
        assert str(n) not in opening[0]["content"]


@pytest.mark.parametrize("target", range(1, 21))
def test_the_counter_player_is_optimal(target):
    env = CounterEnv(split=split_of(counter_key(0, target)))  # each target is a task of one split
    total, turns, info = play(env, CounterPlayer(), {"target": target})
    assert total == 1.0 and turns == math.ceil(target / CounterEnv.STEP) + 1
    assert info["outcome"] == {"reward": 1.0, "components": {"hit": 1.0, "overshoot": 0.0}}
    assert info["signals"]["subgoals"] == [1, 1] and info["signals"]["progress"] == 1.0


@pytest.mark.parametrize("split", ["train", "val", "test"])
def test_the_counter_player_is_optimal_from_any_start(split):
    env = CounterEnv(max_target=5, max_start=249, split=split)  # the demo's tasks (configs/env/counter.yaml)
    for seed in range(30):
        total, turns, _ = play(env, CounterPlayer(), None, seed)
        climb = env.target - env.start
        assert total == 1.0 and turns == math.ceil(climb / CounterEnv.STEP) + 1, (env.start, env.target)


def test_the_counter_says_how_far_the_target_is():
    env = CounterEnv(max_target=5, max_start=249)
    opening, _ = env.reset(seed=3)
    start, target = env.start, env.target
    assert opening[0]["content"].startswith(f"A counter starts at {start}. Bring it to exactly {target} ")
    add3 = {"role": "assistant", "tool_calls": [{"id": "x", "name": "add", "arguments": {"amount": 3}}]}
    messages, *_, info = env.step(add3)
    left = target - start - 3
    assert messages[0]["content"] == f"counter = {start + 3}, " + (
        f"{left} to go" if left >= 0 else f"{-left} past the target"
    )
    assert info["signals"]["progress"] == min(3, target - start) / (target - start)


def test_overshooting_the_counter_ends_with_zero():
    env = CounterEnv()
    env.reset(options={"target": 2})
    add3 = {"role": "assistant", "tool_calls": [{"id": "x", "name": "add", "arguments": {"amount": 3}}]}
    submit = {"role": "assistant", "tool_calls": [{"id": "y", "name": "submit", "arguments": {}}]}
    _, _, _, _, info = env.step(add3)
    assert info["signals"]["state_key"] == "counter=3" and info["signals"]["progress"] == 1.0
    _, reward, terminated, _, info = env.step(submit)
    assert (reward, terminated) == (0.0, True)
    assert info["outcome"] == {"reward": 0.0, "components": {"hit": 0.0, "overshoot": 1.0}}


def test_state_keys_repeat_across_samples_of_a_group():
    keys = []
    for _ in range(2):
        env = CounterEnv()
        observation, _ = env.reset(seed=5)
        player = CounterPlayer()
        for _ in range(2):
            observation, *_, info = env.step(player.act(observation))
            keys.append(info["signals"]["state_key"])
    assert keys[:2] == keys[2:]
