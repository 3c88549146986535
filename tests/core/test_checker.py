"""`check_env`: passes the shipped toy envs and names the failure of each deliberately broken env here."""

import random
from contextlib import contextmanager
from itertools import islice

import gymnasium
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlgym_llm
from rlgym_llm import EnvCheckError, Step, StepSignals, TurnLimit, UnknownEnvError, check_env
from rlgym_llm.core.checker import CheckReport, run_checks
from rlgym_llm.core.fuzz import hostile_actions
from rlgym_llm.testing import CounterEnv, GuessNumberEnv

CHECKS = ["gymnasium", "api", "determinism", "secrets", "fuzz"]


@contextmanager
def registered(env_id, entry_point, **kwargs):
    rlgym_llm.register(env_id, entry_point, **kwargs)
    try:
        yield env_id
    finally:
        gymnasium.registry.pop(env_id, None)
        rlgym_llm.core.registry._max_turns.pop(env_id, None)


def failures_of(env, **kwargs) -> list[str]:
    report = run_checks(env, n_fuzz=kwargs.pop("n_fuzz", 120), **kwargs)
    assert isinstance(report, CheckReport)
    return report.failures


# --- deliberately broken envs -------------------------------------------------------------------


class LeakyOpening(GuessNumberEnv):
    def opening(self, task):
        return [{"role": "user", "content": f"{task.prompt} (psst: it is {task.answer})"}]


class LeakyFeedback(GuessNumberEnv):
    def _judge(self, value):
        verdict = super()._judge(value)
        return verdict if verdict == "correct" else f"wrong, it was {self.task.answer}"


class RaisesOnBadArguments(GuessNumberEnv):
    def respond(self, turn):
        for call in turn.tool_calls:
            self._judge(int(call.arguments["value"]))  # trusts the model's arguments
        return Step([{"role": "user", "content": "ok"}], signals=self._signals(tool_ok=True))


class GlobalRandom(GuessNumberEnv):
    def sample_task(self, options):
        n = random.randint(100, 999)  # the global RNG: reset(seed=...) cannot reproduce it
        return rlgym_llm.Task(id=f"guess-{n}", prompt=f"Puzzle {random.random()}: find the number.", answer=n)


class PerInstanceSalt(GuessNumberEnv):
    def __init__(self):
        super().__init__()
        # differs between two envs made the same way; letters only, so it never contains the secret number
        self.salt = "".join(random.choice("abcdefgh") for _ in range(12))

    def opening(self, task):
        return [{"role": "user", "content": f"[{self.salt}] {task.prompt}"}]


class OneTask(GuessNumberEnv):
    def sample_task(self, options):
        return super().sample_task({"number": 512})


class RewardOutOfRange(GuessNumberEnv):
    def invalid_action(self, problem):
        return Step([{"role": "user", "content": problem}], reward=-1.0)


class NanReward(GuessNumberEnv):
    def respond(self, turn):
        step = super().respond(turn)
        return Step(step.messages, reward=float("nan"), signals=step.signals) if not turn.tool_calls else step


class BadSignals(GuessNumberEnv):
    def _signals(self, tool_ok):
        return StepSignals(tool_ok=tool_ok, progress=1.5, subgoals=(3, 2))


class NumpyInInfo(GuessNumberEnv):
    def respond(self, turn):
        step = super().respond(turn)
        return Step(step.messages, step.reward, step.terminated, signals=step.signals, info={"score": np.float32(0.5)})


class BadOutcome(GuessNumberEnv):
    def outcome(self):
        return {"reward": 2.0}


class AssistantInObservation(GuessNumberEnv):
    def respond(self, turn):
        step = super().respond(turn)
        return Step([{"role": "assistant", "content": "I speak for the model"}], signals=step.signals)


class NotAChatEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Discrete(3)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        return 1, 0.0, True, False, {}


# --- the good envs pass -------------------------------------------------------------------------


@pytest.mark.parametrize("env_cls", [GuessNumberEnv, CounterEnv])
def test_toy_envs_pass_every_check(env_cls):
    report = check_env(env_cls())
    assert report.ok and report.failures == []
    assert [c.name for c in report.checks] == CHECKS
    assert report.checks[-1].summary.startswith("300 hostile actions")


def test_an_id_is_made_twice_and_checked_through_its_wrappers():
    with registered("test/Guess-v0", "rlgym_llm.testing.toy:GuessNumberEnv", max_turns=10) as env_id:
        report = check_env(env_id, n_fuzz=80)
    assert report.env_id == env_id
    determinism, fuzz = report.checks[2], report.checks[4]
    assert "two instances" in determinism.summary
    assert "truncated" in fuzz.summary and " 0 truncated" not in fuzz.summary  # TurnLimit ended episodes
    assert "passed" in report.format()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_toy_envs_pass_for_any_seed(seed):
    for env in (TurnLimit(GuessNumberEnv(), 10), TurnLimit(CounterEnv(), 12)):
        assert failures_of(env, n_fuzz=60, seed=seed) == []


def test_hostile_actions_replay_for_a_seed():
    tools = GuessNumberEnv().reset(seed=0)[1]["tools"]

    def draw():
        return [(label, repr(a)) for label, a in islice(hostile_actions(GuessNumberEnv().action_space, tools, 3), 80)]

    first = draw()
    assert first == draw()
    labels = {label for label, _ in first}
    assert {
        "None",
        "1MB string",
        "unknown tool",
        "arguments: garbage JSON string",
        "AssistantTurn, many calls",
    } <= labels


# --- each broken env fails with the right named failure -----------------------------------------


def test_a_leak_in_the_opening_is_named():
    failures = failures_of(LeakyOpening())
    assert any(f.startswith("secrets: the opening of task 'guess-") and "ground truth" in f for f in failures)


def test_a_leak_in_a_step_is_found_by_the_fuzz():
    failures = failures_of(LeakyFeedback())
    assert any(f.startswith("fuzz: the observation after action") and "leaks the ground truth" in f for f in failures)


def test_step_raising_is_named_with_the_action():
    failures = failures_of(RaisesOnBadArguments())
    assert any(
        f.startswith("fuzz: step raised KeyError on action 18 (unknown tool) at test_checker.py") for f in failures
    )
    assert any(f.startswith("fuzz: step raised ValueError") for f in failures)  # int("not a number")
    assert any("more like it" in f for f in failures)  # repeats are counted, not listed 100 times


def test_the_global_rng_breaks_determinism_and_gymnasiums_checker():
    with registered("test/GlobalRandom-v0", GlobalRandom) as env_id:  # Gymnasium compares only envs with a spec
        failures = failures_of(env_id)
    assert any(f.startswith("determinism: reset(seed=0) twice gave different tasks") for f in failures)
    assert any(
        f.startswith("gymnasium: gymnasium.utils.env_checker.check_env failed: AssertionError") for f in failures
    )


def test_two_instances_made_from_one_id_must_agree():
    with registered("test/Salted-v0", PerInstanceSalt) as env_id:
        failures = failures_of(env_id, n_fuzz=10)
    assert len(failures) == 1
    assert failures[0].startswith("determinism: two envs made the same way gave different openings for seed 0")


def test_one_task_for_every_seed_is_a_warning_not_a_failure():
    report = check_env(OneTask(), n_fuzz=20)
    assert report.ok
    assert any(w.startswith("determinism: 10 different seeds all gave task 'guess-512'") for w in report.warnings)


def test_rewards_must_lie_in_reward_range_and_be_finite():
    assert any(
        f.startswith("fuzz: reward -1.0 after action") and "outside reward_range (0.0, 1.0)" in f
        for f in failures_of(RewardOutOfRange())
    )
    assert any(f.startswith("fuzz: reward after action") and "nan, not finite" in f for f in failures_of(NanReward()))


def test_signals_are_checked_with_signal_problems():
    failures = failures_of(BadSignals())
    assert any(f.startswith("fuzz: signals.progress must be a number in [0, 1]") for f in failures)
    assert any(f.startswith("fuzz: signals.subgoals must be [done, total]") for f in failures)


def test_info_must_stream_to_json():
    failures = failures_of(NumpyInInfo())
    assert any(f.startswith("fuzz: info after action") and "numpy.float32" in f for f in failures)


def test_an_ended_episode_needs_a_valid_outcome():
    failures = failures_of(TurnLimit(BadOutcome(), 3))
    assert any(f.startswith('fuzz: info["outcome"]["reward"] 2.0 is outside reward_range') for f in failures)
    assert any(f.startswith('fuzz: info["outcome"]["components"] must map names') for f in failures)


def test_observations_must_stay_in_the_space():
    failures = failures_of(AssistantInObservation())
    assert any("not in the observation space: message 0 has role 'assistant'" in f for f in failures)


def test_a_non_chat_env_fails_the_api_check_only_once():
    report = run_checks(NotAChatEnv())
    assert report.checks[0].ok  # Gymnasium's own checker is happy with it
    assert len(report.failures) == 1 and report.failures[0].startswith("api: NotAChatEnv is not an rlgym_llm.Env")
    assert all(c.summary.startswith("skipped") for c in report.checks[2:])


def test_the_error_lists_every_failure():
    class ManyBugs(LeakyOpening, RewardOutOfRange, BadSignals):
        pass

    with pytest.raises(EnvCheckError) as caught:
        check_env(ManyBugs(), n_fuzz=60)
    names = {f.split(":")[0] for f in caught.value.failures}
    assert names == {"secrets", "fuzz"}
    assert len(caught.value.failures) >= 3
    message = str(caught.value)
    assert message.startswith(f"ManyBugs failed {len(caught.value.failures)} env check(s)")
    assert all(f in message for f in caught.value.failures)


def test_an_env_that_cannot_be_built_fails_the_make_check():
    expected = r"make: rlgym_llm.make\('test/Missing-v0'\) raised ModuleNotFoundError"
    with (
        registered("test/Missing-v0", "no_such_module_anywhere:Env") as env_id,
        pytest.raises(EnvCheckError, match=expected),
    ):
        check_env(env_id)


def test_an_unknown_id_raises_at_once():
    with pytest.raises(UnknownEnvError, match="Did you mean"):
        check_env("rlgym/Mathh-v0")
