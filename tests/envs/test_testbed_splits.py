"""Content splits and "no shortcuts" for the credit testbeds and the toy Counter (docs/testbeds.md, Splits).

Splits: each shipped learning tier (`configs/env/<name>.yaml`) draws from three pools that share no
task key (Ladder's and Counter's (start, target) pair, TwentyQ's secret number, BugFix's bug set),
each with at least 200 distinct tasks; a seed fixes the task; a task named in `reset(options=...)`
must belong to the env's split.

No shortcuts: the best *blind* strategy, a fixed sequence of calls that never reads an observation,
chosen to maximise its success over the train split, scores no better than chance on the test split.
Chance is the best any fixed sequence can score on the task distribution before splitting: it can
match one climb of Ladder's 9 (1/9) or Counter's 5 (1/5), one number of TwentyQ's 1,280, one bug set
of BugFix (a one-bug set: 1/2 x 1/9 lines x 1/10 digits = 1/180). The tolerance is three standard
deviations of a success rate of `chance` measured on the test episodes, widened for Ladder and
Counter by the test pool's own draw (which tasks the hash puts in the pool moves each climb's share).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest

import rlgym_llm
from rlgym_envs.testbeds.bugfix import DIGITS, LINES
from rlgym_llm.config import load_config
from rlgym_llm.core.errors import ConfigError
from rlgym_llm.core.splits import SPLITS, split_of
from rlgym_llm.core.types import AssistantTurn, ToolCall
from rlgym_llm.testing.splits import assert_disjoint, overlaps, split_pools
from rlgym_llm.testing.toy import CounterEnv

SEEDS = range(3000)  # episodes per split: each pool's tasks are nearly all drawn (Ladder's val pool: 261 of 261)
BLIND_EPISODES = 1500
# name -> the opening names the task (Ladder, Counter: prompts must be disjoint too) or not (TwentyQ names
# a block of candidates shared by numbers of every split; BugFix's prompt is the same for every task)
TIERS = {"ladder": False, "twentyq": True, "bugfix": True, "counter": False}


@functools.cache
def tier(name: str) -> tuple[str, dict[str, Any]]:
    """The env id and kwargs of a shipped tier, as `rlgym train env=<name>` makes it."""
    env = load_config("train", [f"env={name}"]).env
    return str(env.id), dict(env.kwargs)


@functools.cache
def pools(name: str) -> dict:
    env_id, kwargs = tier(name)
    return split_pools(env_id, SEEDS, **kwargs)


def make(name: str, split: str = "train") -> Any:
    env_id, kwargs = tier(name)
    return rlgym_llm.make(env_id, split=split, **kwargs)


def call(name: str, **arguments: Any) -> AssistantTurn:
    return AssistantTurn(content="", tool_calls=(ToolCall(name, arguments, id="c"),))


# --- splits ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TIERS))
def test_the_learning_tiers_pools_are_disjoint_and_each_holds_200_tasks(name):
    found = pools(name)
    assert_disjoint(found, shared_prompt=TIERS[name])
    sizes = {split: len(pool.keys) for split, pool in found.items()}
    assert all(pool.episodes == len(SEEDS) for pool in found.values())
    assert all(size >= 200 for size in sizes.values()), sizes
    for split, pool in found.items():  # every key drawn in a pool belongs to it
        assert {split_of(k) for k in pool.keys} == {split}


@pytest.mark.parametrize(
    ("env_id", "kwargs", "shared_prompt"),
    [
        ("rlgym/Ladder-v0", {}, False),
        ("rlgym/TwentyQ-v0", {}, True),
        ("rlgym/BugFix-v0", {"max_bugs": 4}, True),
        ("toy/Counter-v0", {}, False),  # the library's toy as tests use it: targets 1..20 from 0 (14, 4, 2)
    ],
)
def test_the_env_defaults_are_split_too(env_id, kwargs, shared_prompt):
    found = split_pools(env_id, range(600), **kwargs)
    assert_disjoint(found, shared_prompt=shared_prompt)
    assert all(pool.keys for pool in found.values())


def test_the_check_finds_an_overlap():  # control: the same pool twice is not disjoint
    a = pools("bugfix")["train"]
    assert overlaps({"train": a, "again": a}, shared_prompt=True)


@pytest.mark.parametrize("name", list(TIERS))
def test_a_seed_gives_the_same_task_in_its_own_split(name):
    for split in SPLITS:
        first, again = make(name, split), make(name, split)
        for seed in (0, 17, 123):
            a, b = first.reset(seed=seed)[0], again.reset(seed=seed)[0]
            assert a == b and first.unwrapped.task.key == again.unwrapped.task.key
            assert split_of(first.unwrapped.task.key) == split


@pytest.mark.parametrize("name", list(TIERS))
def test_an_unknown_split_is_refused_at_make(name):
    env_id, kwargs = tier(name)
    with pytest.raises(ConfigError, match="split must be one of"):
        rlgym_llm.make(env_id, split="holdout", **kwargs)


def named(env: Any) -> dict[str, Any]:
    """The `reset` options that name the env's current task."""
    task = env.unwrapped.task
    if "bugs" in task.hidden:
        return {"bugs": dict(task.hidden["bugs"])}
    if "start" in task.meta:
        return {"start": task.meta["start"], "target": task.meta["target"]}
    return {"number": task.answer}


@pytest.mark.parametrize("name", list(TIERS))
def test_a_task_named_from_another_split_is_refused(name):
    test_env = make(name, "test")
    test_env.reset(seed=5)
    options, key = named(test_env), test_env.unwrapped.task.key
    for split in ("train", "val"):
        with pytest.raises(ValueError, match=f"belongs to the 'test' split, not '{split}'"):
            make(name, split).reset(seed=0, options=options)
    test_env.reset(seed=6, options=options)  # within its own split a named task is fine
    assert test_env.unwrapped.task.key == key


def test_a_space_too_small_for_a_split_is_refused_at_make():
    # Counter's targets 1 and 2 from 0 both fall in train; TwentyQ's numbers 1 and 2 both in test
    assert {split_of(f"counter:0->{t}") for t in (1, 2)} == {"train"}
    with pytest.raises(ConfigError, match=r"none of the 2 \(start, target\) pairs falls in split 'test'"):
        CounterEnv(max_target=2, split="test")
    CounterEnv(max_target=2)  # control: the train pool holds both
    with pytest.raises(ConfigError, match=r"none of the numbers 1\.\.2 falls in split 'train'"):
        rlgym_llm.make("rlgym/TwentyQ-v0", size=2, ranges=1)
    rlgym_llm.make("rlgym/TwentyQ-v0", size=2, ranges=1, split="test")


# --- no shortcuts: the best blind strategy on train scores chance on test ----------------------


def tolerance(chance: float, episodes: int, pool: int | None = None) -> float:
    """Three standard deviations of a success rate of `chance` over `episodes` (plus, for a share that
    also depends on which `pool` tasks the hash put in the split, the pool's own draw)."""
    var = chance * (1 - chance) * (1 / episodes + (1 / pool if pool else 0.0))
    return 3 * math.sqrt(var)


def blind_score(name: str, split: str, plan: list[AssistantTurn], seeds: range) -> float:
    """Mean reward of playing `plan` as it is, whatever the observations say."""
    env, total = make(name, split), 0.0
    for seed in seeds:
        env.reset(seed=seed)
        for turn in plan:
            _, reward, terminated, truncated, _ = env.step(turn)
            total += reward
            if terminated or truncated:
                break
    return total / len(seeds)


def train_counts(name: str, what: Callable[[Any], Any]) -> Counter:
    """How often each `what(env)` occurs over the train draws."""
    env, counts = make(name), Counter()
    for seed in SEEDS:
        env.reset(seed=seed)
        counts[what(env.unwrapped)] += 1
    return counts


def climb_plan(climb: int) -> list[AssistantTurn]:
    """Add 3 while 3 or more are left of `climb`, then the rest, then submit (no observation read)."""
    return [call("add", amount=3)] * (climb // 3) + [call("add", amount=climb % 3)] * (climb % 3 > 0) + [call("submit")]


@pytest.mark.parametrize(("name", "climbs"), [("ladder", 9), ("counter", 5)])
def test_a_blind_climb_scores_chance(name, climbs):
    # blind: a fixed climb c, the one most frequent on train (a fixed sequence succeeds only where the
    # climb is c); chance: 1 / the number of climbs, all equally likely before splitting
    counts = train_counts(name, lambda e: e.target - e.start)
    assert len(counts) == climbs
    best = counts.most_common(1)[0][0]
    seeds = range(10_000, 10_000 + BLIND_EPISODES)
    score = blind_score(name, "test", climb_plan(best), seeds)
    chance = 1 / climbs
    assert score <= chance + tolerance(chance, len(seeds), len(pools(name)["test"].keys)), (best, score)
    assert score > 0  # control: the plan does hit its own climb


def test_a_blind_answer_scores_chance_on_twentyq():
    # blind: answer the number most frequent on train (no question asked, or none read); chance: the
    # best fixed answer before splitting, 1 / (size * ranges) = 1/1280
    kwargs = tier("twentyq")[1]
    counts = train_counts("twentyq", lambda e: e.task.answer)
    best = counts.most_common(1)[0][0]
    seeds = range(10_000, 10_000 + BLIND_EPISODES)
    plan = [call("ask", lo=1, hi=640), call("answer", n=best)]
    score = blind_score("twentyq", "test", plan, seeds)
    chance = 1 / (kwargs["size"] * kwargs["ranges"])
    assert score <= chance + tolerance(chance, len(seeds)), (best, score)
    assert blind_score("twentyq", "train", plan, range(BLIND_EPISODES)) > 0  # control: it does pay on train


def solves(hidden: Mapping[str, Any], patch: Mapping[int, int]) -> bool:
    """Whether setting the lines of `patch` to its digits makes every test pass (BugFix's rule)."""
    values = list(hidden["program"])
    for line, digit in patch.items():
        values[line - 1] = digit
    return bool(patch) and values == list(hidden["correct"])


def patch_plan(patch: Mapping[int, int]) -> list[AssistantTurn]:
    calls = tuple(ToolCall("fix", {"line": line, "value": digit}, id=f"c{line}") for line, digit in patch.items())
    return [AssistantTurn(content="", tool_calls=calls), call("submit")]


def test_a_blind_patch_scores_chance_on_bugfix():
    # blind: a fixed patch, written without reading the test output. Candidates: every one-line patch
    # (the best family before splitting: 1/180), the old shortcut's shape (every line set to one digit),
    # and the 50 bug sets most frequent on train; the best on train is played on test.
    env = make("bugfix")
    train = []
    for seed in SEEDS:
        env.reset(seed=seed)
        train.append(env.unwrapped.task.hidden)
    frequent = Counter(tuple(sorted(h["bugs"].items())) for h in train).most_common(50)
    candidates = [{line: d} for line in range(1, LINES + 1) for d in range(DIGITS)]
    candidates += [dict.fromkeys(range(1, LINES + 1), d) for d in range(DIGITS)]
    candidates += [dict(bugs) for bugs, _ in frequent]
    rate = {i: sum(solves(h, p) for h in train) / len(train) for i, p in enumerate(candidates)}
    best = candidates[max(rate, key=rate.get)]
    # the rule above is the env's: the best patch played through the env on train scores what it computes
    seeds = range(300)
    assert blind_score("bugfix", "train", patch_plan(best), seeds) == pytest.approx(
        sum(solves(h, best) for h in train[:300]) / 300
    )
    assert rate[max(rate, key=rate.get)] > 0  # control: on train it does pay
    seeds = range(10_000, 10_000 + BLIND_EPISODES)
    chance = 1 / (2 * LINES * DIGITS)
    score = blind_score("bugfix", "test", patch_plan(best), seeds)
    assert score <= chance + tolerance(chance, len(seeds)), (best, score)
    old_shortcut = blind_score("bugfix", "test", patch_plan(dict.fromkeys(range(1, LINES + 1), 0)), seeds)
    assert old_shortcut <= chance + tolerance(chance, len(seeds))
