"""The credit testbeds (docs/testbeds.md): contract, oracles, noisy teachers, and the property each is built on."""

import re

import pytest

import rlgym_llm
from rlgym_agents.testbeds import (
    BugFixOracle,
    BugFixTeacher,
    LadderOracle,
    LadderTeacher,
    TwentyQOracle,
    TwentyQTeacher,
)
from rlgym_envs.testbeds.twenty_questions import task_key
from rlgym_llm.config import load_config
from rlgym_llm.core.splits import split_of
from rlgym_llm.core.types import AssistantTurn, ToolCall, Trajectory, Turn
from rlgym_llm.credit import compute_advantages
from rlgym_llm.recipes import parts

CASES = [
    ("rlgym/Ladder-v0", LadderOracle, LadderTeacher, 12),
    ("rlgym/TwentyQ-v0", TwentyQOracle, TwentyQTeacher, 6),
    ("rlgym/BugFix-v0", BugFixOracle, BugFixTeacher, 8),
]


def call(name, **arguments):
    return AssistantTurn(content="", tool_calls=(ToolCall(name, arguments, id="c"),))


def play(env, agent, seed, max_turns, options=None):
    """One episode as a Trajectory (the signals the credit methods read included); `agent(env)` is
    built after the reset (as the SFT warm-up builds its oracle) and returns the policy."""
    messages, _ = env.reset(seed=seed, options=options)
    act = agent(env)
    turns = []
    for i in range(max_turns):
        action = act(messages)
        messages, reward, terminated, truncated, info = env.step(action)
        turns.append(Turn(i, action, messages, reward, terminated, truncated, signals=info["signals"]))
        if terminated:
            break
    outcome = env.unwrapped.outcome()
    return Trajectory(env.spec.id, seed, env.unwrapped.task.id, "g", len(turns), turns=turns, outcome=outcome)


def success(env_id, cls, max_turns, n=200):
    env = rlgym_llm.make(env_id)
    return sum(play(env, lambda e: cls(e).act, s, max_turns).reward for s in range(n)) / n


@pytest.mark.parametrize(("env_id", "oracle", "teacher", "max_turns"), CASES)
def test_testbed_passes_check_env(env_id, oracle, teacher, max_turns):
    assert rlgym_llm.check_env(env_id).ok


@pytest.mark.parametrize(("env_id", "oracle", "teacher", "max_turns"), CASES)
def test_the_oracle_always_wins_and_the_noisy_teacher_sometimes_fails(env_id, oracle, teacher, max_turns):
    assert success(env_id, oracle, max_turns) == 1.0
    assert 0.4 < success(env_id, teacher, max_turns) < 0.95
    env = rlgym_llm.make(env_id)
    first, again = (
        play(env, lambda e: teacher(e).act, 7, max_turns) for _ in range(2)
    )  # the seed decides its mistakes
    assert [t.action for t in first.turns] == [t.action for t in again.turns]


@pytest.mark.parametrize("name", ["ladder", "twentyq", "bugfix"])
def test_the_env_config_wires_env_oracle_and_teacher(name):
    cfg = load_config("train", [f"env={name}"])
    # the honest start (issue 31): the oracle's successful episodes, no teacher built to fail
    assert (cfg.sft.successful_only, cfg.trainer.eval_temperature, cfg.trainer.steps) == (True, 1.0, 8)
    env = parts.env_factory(cfg.env, cfg.sandbox)()
    assert env.spec.id == cfg.env.id and cfg.env.oracle.endswith("Oracle")
    act = parts.oracle_factory(cfg.env.oracle)
    env.reset(seed=3)
    assert act(env)([]).tool_calls[0].name in {t["function"]["name"] for t in env.unwrapped.tool_schemas()}


# --- Ladder: long, sparse, recurring states; one bad turn at the top fails ---------------------


def test_ladder_overshoot_ends_the_episode_with_nothing():
    env = rlgym_llm.make("rlgym/Ladder-v0", split="val")  # start 0, target 20 is a val task
    opening, _ = env.reset(seed=0, options={"start": 0, "target": 20})
    assert opening[0]["content"].startswith("A counter starts at 0. Bring it to exactly 20 ")
    for _ in range(6):
        messages, *_ = env.step(call("add", amount=3))
    assert messages[0]["content"] == "counter = 18, 2 to go"
    messages, reward, terminated, _, info = env.step(call("add", amount=3))
    assert (reward, terminated, info["outcome"]["reward"]) == (0.0, True, 0.0)
    assert info["signals"]["state_key"] == "counter=21,over" and info["signals"]["progress"] == 0.0


def test_ladder_climbs_from_its_start():
    env = rlgym_llm.make("rlgym/Ladder-v0")
    env.reset(seed=4)
    start, target = env.unwrapped.start, env.unwrapped.target
    assert 19 <= target - start <= 27 and env.unwrapped.counter == start
    messages, _, _, _, info = env.step(call("add", amount=3))
    assert messages[0]["content"] == f"counter = {start + 3}, {target - start - 3} to go"
    assert info["signals"]["progress"] == 3 / (target - start)


def test_ladder_states_recur_across_a_group_and_gigpo_singles_out_the_bad_turn():
    env = rlgym_llm.make("rlgym/Ladder-v0")
    seed = next(s for s in range(5, 50) if env.reset(seed=s) and (env.unwrapped.target - env.unwrapped.start) % 3)
    good = play(env, lambda e: LadderOracle(e).act, seed, 12)
    climb = env.unwrapped.target - env.unwrapped.start
    plan = [3] * ((climb - 1) // 3) + [3]  # the oracle's path, except one overshoot at the top (climb % 3 > 0)
    steps = iter(plan)
    bad = play(env, lambda e: lambda m: call("add", amount=next(steps)), seed, 12)
    assert (good.reward, bad.reward) == (1.0, 0.0) and len(good.turns) >= 8
    keys_good = [t.signals["state_key"] for t in good.turns]
    keys_bad = [t.signals["state_key"] for t in bad.turns]
    shared = len([k for k in keys_bad if k in keys_good])
    assert shared >= len(keys_bad) - 2  # all but the last one or two states are shared
    group = [good, bad, good, bad]
    for i, t in enumerate(group):
        t.sample_index = i
    adv = compute_advantages(group, "gigpo").turn_advantages
    # the turns before the split get the same advantage in both; the overshoot turn is the most negative
    assert adv[1][-1] == min(adv[1]) and adv[1][-1] < adv[1][0]


# --- TwentyQ: the answer is hidden; questions inform -------------------------------------------


def test_twentyq_prompt_is_the_same_for_every_number_of_a_block():
    env = rlgym_llm.make("rlgym/TwentyQ-v0")
    numbers = [n for n in range(1, 17) if split_of(task_key(n)) == "train"]  # the train numbers of block 1..16
    openings = {env.reset(seed=0, options={"number": n})[0][0]["content"] for n in numbers}
    assert len(numbers) >= 4 and openings == {
        "I am thinking of a whole number from 1 to 16. Ask `ask(lo, hi)` to learn whether it is between lo and hi "
        "(inclusive), then give it with `answer(n)`."
    }
    blocks = {}
    for s in range(300):
        opening = env.reset(seed=s)[0][0]["content"]
        n = env.unwrapped.task.answer
        assert blocks.setdefault((n - 1) // 16, opening) == opening  # the prompt names the block, not the number
    assert len(blocks) > 40


def test_twentyq_questions_narrow_the_candidates_and_the_answer_ends_it():
    env = rlgym_llm.make("rlgym/TwentyQ-v0")
    env.reset(seed=0, options={"number": 7})
    messages, _, _, _, info = env.step(call("ask", lo=1, hi=8))
    assert messages[0]["content"] == "yes: the number is from 1 to 8." and info["signals"]["progress"] == 0.25
    messages, *_ = env.step(call("ask", lo=1, hi=4))
    assert messages[0]["content"] == "no: the number is from 5 to 8."
    messages, *_ = env.step(call("ask", lo=6, hi=6))  # not a split at an end: the candidates are no range
    assert messages[0]["content"] == "no." and env.unwrapped.candidates == {5, 7, 8}
    messages, reward, terminated, _, _ = env.step(call("answer", n=7))
    assert (messages[0]["content"], reward, terminated) == ("correct", 1.0, True)


def test_twentyq_huge_ranges_are_cheap():
    env = rlgym_llm.make("rlgym/TwentyQ-v0")
    env.reset(seed=0)
    messages, *_ = env.step(call("ask", lo=-(10**15), hi=10**15))
    lo, hi = env.unwrapped.task.meta["lo"], env.unwrapped.task.meta["hi"]
    assert hi - lo == 15 and messages[0]["content"] == f"yes: the number is from {lo} to {hi}."


# --- BugFix: the immediate reward is farmable, the gate is not ----------------------------------


def test_bugfix_farming_the_tests_out_earns_a_solver_under_dra_but_not_under_gra():
    env = rlgym_llm.make("rlgym/BugFix-v0")
    options = {"bugs": {3: 0, 7: 2}}  # a train bug set: line 3 must hold 0, line 7 must hold 2
    solver = play(env, lambda e: BugFixOracle(e).act, 1, 8, options)
    farmer = play(env, lambda e: lambda m: call("run_tests"), 1, 8, options)
    quitter = play(env, lambda e: lambda m: call("submit"), 1, 8, options)
    assert [t.action.tool_calls[0].name for t in solver.turns] == [
        "run_tests", "fix", "run_tests", "fix", "run_tests", "submit",
    ]  # fmt: skip
    assert re.fullmatch(
        r"failing: line 3 \(expected 0, got [1-9]\), line 7 \(expected 2, got [013-9]\)",
        solver.turns[0].observation[0]["content"],
    )
    assert [t.action.tool_calls[0].arguments for t in solver.turns if t.action.tool_calls[0].name == "fix"] == [
        {"line": 3, "value": 0},
        {"line": 7, "value": 2},
    ]
    assert (solver.reward, farmer.reward, quitter.reward) == (1.0, 0.0, 0.0)
    assert len(farmer.turns) == 8 and all(t.signals["tool_ok"] for t in farmer.turns)
    levels = [t.turns[-1].signals["outcome_level"] for t in (solver, farmer, quitter)]
    assert levels == [3, 0, 1]
    group = [solver, farmer, quitter, farmer]
    for i, t in enumerate(group):
        t.sample_index = i
    dra = compute_advantages(group, "dra").turn_advantages
    gra = compute_advantages(group, "gated").turn_advantages
    assert dra[1][0] > dra[0][0]  # D-RA: 7 valid calls beat 1 + 5
    assert gra[0][0] > 0 > gra[1][0]  # G-RA: the gate is shut for the farmer


def test_bugfix_levels_an_unhelpful_change_below_a_solution():
    env = rlgym_llm.make("rlgym/BugFix-v0")
    env.reset(seed=0, options={"bugs": {2: 5}})
    messages, _, _, _, info = env.step(call("fix", line=10, value=1))
    assert messages[0]["content"].startswith("Error") and info["signals"]["tool_ok"] is False
    env.step(call("fix", line=5, value=env.unwrapped.expected(5)))  # a right line set to its own digit
    _, reward, terminated, _, info = env.step(call("submit"))
    assert (reward, terminated, info["signals"]["outcome_level"]) == (0.0, True, 2)


def test_bugfix_an_edit_that_ignores_the_report_breaks_a_right_line():
    env = rlgym_llm.make("rlgym/BugFix-v0")
    env.reset(seed=0, options={"bugs": {2: 5}})
    wrong = (env.unwrapped.expected(4) + 1) % 10
    env.step(call("fix", line=2, value=5))
    both = AssistantTurn(
        content="", tool_calls=(ToolCall("fix", {"line": 4, "value": wrong}, id="a"), ToolCall("run_tests", {}, id="b"))
    )
    messages, _, _, _, info = env.step(both)
    assert messages[1]["content"] == f"failing: line 4 (expected {env.unwrapped.expected(4)}, got {wrong})"
    assert info["signals"]["state_key"] == "fixed=2,broken=4,tested" and info["signals"]["progress"] == 1.0
    _, reward, _, _, info = env.step(call("submit"))
    assert (reward, info["signals"]["outcome_level"]) == (0.0, 2)


def test_igpo_can_probe_the_answer_as_the_policys_own_tool_call():
    from rlgym_llm.core.errors import ConfigError
    from rlgym_llm.credit import resolve_params
    from rlgym_llm.train.credit_inputs import probe_template
    from rlgym_llm.train.sft import hermes_text

    t = probe_template("answer.n")
    assert t["prefix"] + "7" + t["suffix"] == hermes_text(call("answer", n=7)) + "<|im_end|>"
    assert probe_template("authors")["prefix"].startswith("<think>")
    with pytest.raises(ConfigError, match="probe must be"):
        resolve_params("igpo", {"probe": "answer"})


def test_gra_tau_is_refused_on_a_testbed_without_levels_and_taken_on_bugfix():
    from rlgym_llm.core.errors import ConfigError

    ladder = rlgym_llm.make("rlgym/Ladder-v0")
    group = [play(ladder, lambda e: LadderTeacher(e).act, s, 12) for s in (0, 0, 0, 0)]
    for i, t in enumerate(group):
        t.sample_index = i
    with pytest.raises(ConfigError, match="tau=2 has no effect: rlgym/Ladder-v0 reports no `outcome_level`"):
        compute_advantages(group, "gated", tau=2)
    compute_advantages(group, "gated")  # unset, it gates on the outcome
    bugfix = rlgym_llm.make("rlgym/BugFix-v0")
    group = [play(bugfix, lambda e: BugFixTeacher(e).act, s, 8) for s in (1, 1, 1, 1)]
    for i, t in enumerate(group):
        t.sample_index = i
    assert all(t.turns[-1].signals["outcome_level"] is not None for t in group)
    compute_advantages(group, "gated", tau=3)
