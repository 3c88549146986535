"""Math-v0 pays one reading of an answer: a percentage `p%` is `p/100`, never also `p` (issue 32).

Attack: a policy answers `p%` so that the answer would pass whether the reference is `p` or `p/100`.
Control: the same answer is paid where its one reading, `p/100`, is the reference.
"""

import pytest

from rlgym_envs.math.env import SYSTEM_PROMPT, MathEnv
from rlgym_envs.math.verify import check
from rlgym_llm import AssistantTurn, Task, ToolCall


class OneTask(MathEnv):
    """Math-v0 asking one question whose reference answer is `reference`."""

    def __init__(self, reference: str):
        super().__init__()
        self.reference = reference

    def sample_task(self, options):
        return Task(id="percent", prompt="What is the value asked for?", answer=self.reference)


def submit(answer: str) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall("submit_answer", {"answer": answer}, id="id_submit"),))


def graded(reference: str, answer: str) -> float:
    """The reward of one submission of `answer` to a task whose reference answer is `reference`."""
    env = OneTask(reference)
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(submit(answer))
    assert terminated
    return reward


@pytest.mark.parametrize("answer", ["40%", r"40\%", r"\boxed{40\%}", "40 percent", "The answer is 40%."])
def test_attack_a_percentage_hedge_is_not_paid_when_the_reference_is_p(answer):
    assert graded("40", answer) == 0.0


@pytest.mark.parametrize("answer", ["40%", r"\boxed{40\%}", "40 percent"])
def test_control_a_percentage_is_paid_for_its_one_reading_p_over_100(answer):
    assert graded("2/5", answer) == 1.0
    assert graded("0.4", answer) == 1.0


def test_control_the_plain_number_is_still_paid():
    assert graded("40", "40") == 1.0 and graded("40%", "0.4") == 1.0


def test_attack_a_percentage_cannot_hedge_on_the_slow_path_either():
    # math-verify on its own reads `50\%` as 50; the slow path reads it as 50/100 like the fast one.
    assert not check(r"\boxed{50\%, x}", "50, x").correct
    assert check(r"\boxed{1/2, x}", r"50\%, x").correct


def test_the_prompt_says_how_a_percentage_is_read():
    assert "p% means p/100" in SYSTEM_PROMPT
