"""The Env base, the registry and the TurnLimit wrapper, on a minimal env defined here."""

import gymnasium
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.utils.env_checker import check_env as gym_check_env

import rlgym_llm
from rlgym_llm import (
    Env,
    RegistrationError,
    Step,
    StepSignals,
    Task,
    Tool,
    ToolError,
    TurnLimit,
    UnknownEnvError,
    parse_call,
)


class Pick(Tool):
    """Pick a number."""

    name = "pick"
    value: int


class PickEnv(Env):
    """Pick the hidden number in [0, size); ends on a correct pick."""

    tools = (Pick,)

    def __init__(self, size: int = 100):
        super().__init__()
        self.size = size
        self.solved = False

    def sample_task(self, options):
        n = int(self.np_random.integers(self.size))
        return Task(id=f"pick-{n}", prompt=f"Pick a number below {self.size}.", answer=n)

    def opening(self, task):
        self.solved = False
        return [{"role": "user", "content": task.prompt}]

    def respond(self, turn):
        messages, ok = [], True
        for call in turn.tool_calls:
            parsed = parse_call(call, self.tools)
            if isinstance(parsed, ToolError):
                ok = False
                messages.append({"role": "tool", "content": parsed.message, "tool_call_id": call.id, "name": call.name})
                continue
            self.solved = parsed.value == self.task.answer
            hint = "yes" if self.solved else ("higher" if parsed.value < self.task.answer else "lower")
            messages.append({"role": "tool", "content": hint, "tool_call_id": call.id, "name": call.name})
        if not turn.tool_calls:
            messages.append({"role": "user", "content": "Call pick."})
        return Step(messages, float(self.solved), terminated=self.solved, signals=StepSignals(tool_ok=ok))

    def outcome(self):
        return {"reward": float(self.solved), "components": {"solved": float(self.solved)}}


def pick(value, call_id="c0"):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "name": "pick", "arguments": {"value": value}}],
    }


@pytest.fixture(autouse=True, scope="module")
def _registered():
    rlgym_llm.register("test/Pick-v0", PickEnv, max_turns=3, size=100)
    rlgym_llm.register("test/PickString-v0", f"{__name__}:PickEnv")
    yield
    for env_id in ("test/Pick-v0", "test/PickString-v0"):
        gymnasium.registry.pop(env_id, None)
        rlgym_llm.core.registry._max_turns.pop(env_id, None)


def test_gymnasium_checker_accepts_the_base():
    gym_check_env(PickEnv())


def test_reset_returns_opening_and_tool_schemas():
    env = PickEnv()
    messages, info = env.reset(seed=1)
    assert messages == [{"role": "user", "content": "Pick a number below 100."}]
    assert info["task_id"] == env.task.id
    assert info["tools"][0]["function"]["name"] == "pick"


def test_step_before_reset_and_task_before_reset_raise():
    env = PickEnv()
    with pytest.raises(ResetNeeded):
        env.step("x")
    with pytest.raises(ResetNeeded):
        _ = env.task


def test_a_malformed_action_is_an_error_observation_not_an_exception():
    env = PickEnv()
    env.reset(seed=0)
    for action in (None, 3, {"role": "user", "content": "x"}, {"tool_calls": "pick"}):
        messages, reward, terminated, truncated, info = env.step(action)
        assert messages[0]["content"].startswith("Error:")
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert info["signals"]["tool_ok"] is False


def test_unparseable_calls_are_answered_after_the_good_ones():
    env = PickEnv()
    env.reset(seed=0)
    bad = {"name": "pick", "arguments": "{"}
    action = {"content": "", "tool_calls": [{"id": "a", "name": "pick", "arguments": {"value": -1}}, bad]}
    messages, *_, info = env.step(action)
    assert messages[0] == {"role": "tool", "content": "higher", "tool_call_id": "a", "name": "pick"}
    assert messages[1]["role"] == "user" and "not valid JSON" in messages[1]["content"]
    assert info["signals"]["tool_ok"] is False


def test_outcome_is_attached_when_the_episode_ends():
    env = PickEnv()
    env.reset(seed=5)
    _, reward, terminated, _, info = env.step(pick(env.task.answer))
    assert terminated and reward == 1.0
    assert info["outcome"] == {"reward": 1.0, "components": {"solved": 1.0}}


def test_make_applies_defaults_kwargs_and_turn_limit():
    env = rlgym_llm.make("test/Pick-v0")
    assert isinstance(env, TurnLimit) and env.max_turns == 3
    assert env.unwrapped.size == 100
    assert rlgym_llm.make("test/Pick-v0", size=7).unwrapped.size == 7
    env.reset(seed=0)
    wrong = (env.unwrapped.task.answer + 1) % 100
    results = [env.step(pick(wrong)) for _ in range(3)]
    assert [r[3] for r in results] == [False, False, True]
    assert results[-1][4]["truncated_by"] == "turn_limit"
    assert results[-1][4]["outcome"]["reward"] == 0.0
    assert rlgym_llm.make("test/Pick-v0", max_turns=1).max_turns == 1


def test_string_entry_points_are_imported_only_by_make():
    assert "test/PickString-v0" in rlgym_llm.list_envs()
    in_test = rlgym_llm.list_envs(namespace="test")
    # Other test modules register their own "test/..." ids in this process; only ours are pinned here.
    assert {"test/Pick-v0", "test/PickString-v0"} <= set(in_test)
    assert all(i.startswith("test/") for i in in_test) and in_test == sorted(in_test)
    env = rlgym_llm.make("test/PickString-v0")
    assert isinstance(env.unwrapped, PickEnv) and not isinstance(env, TurnLimit)


def test_same_seed_same_task_and_opening_across_instances():
    a, b = rlgym_llm.make("test/Pick-v0"), rlgym_llm.make("test/Pick-v0")
    assert a.reset(seed=11)[0] == b.reset(seed=11)[0]
    assert a.unwrapped.task == b.unwrapped.task
    tasks = {a.reset(seed=s)[1]["task_id"] for s in range(20)}
    assert len(tasks) > 10


def test_unknown_id_suggests_close_matches():
    with pytest.raises(UnknownEnvError, match="Did you mean 'test/Pick-v0'"):
        rlgym_llm.make("test/Pik-v0")


@pytest.mark.parametrize(
    ("env_id", "entry_point"),
    [("test/NoVersion", "a.b:C"), ("bad id-v0", "a.b:C"), ("test/Ok-v0", "not an entry point"), ("test/Ok-v1", 3)],
)
def test_register_rejects_bad_ids_and_entry_points(env_id, entry_point):
    with pytest.raises(RegistrationError):
        rlgym_llm.register(env_id, entry_point)


def test_turn_limit_validates_its_argument():
    with pytest.raises(ValueError, match="max_turns"):
        TurnLimit(PickEnv(), 0)


def test_builtin_math_env_is_registered_by_entry_point():
    assert "rlgym/Math-v0" in rlgym_llm.list_envs()
    assert not hasattr(rlgym_llm, "list")  # the builtin is not shadowed: `list_envs` is the name
