"""SPA-RL step rewards (progress contributions + grounding), critic-free advantages, the estimator's loss."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import grounding_rewards, progress_estimator_loss, spa_advantages, spa_step_rewards

ok_st = st.sampled_from([True, False, None])
group_st = st.integers(1, 5).flatmap(
    lambda g: st.lists(
        st.integers(0, 5).flatmap(
            lambda t: st.tuples(
                st.lists(st.floats(-2, 2, allow_nan=False), min_size=t, max_size=t),
                st.lists(ok_st, min_size=t, max_size=t),
            )
        ),
        min_size=g,
        max_size=g,
    )
)


def loop_spa(contributions, tool_ok, bonus, gamma):
    rewards = []
    for c, ok in zip(contributions, tool_ok):
        rewards.append([c[t] + (bonus if (ok[t] is True or t == len(c) - 1) else 0.0) for t in range(len(c))])
    flat = [v for r in rewards for v in r]
    if not flat or all(v == flat[0] for v in flat):
        normed = [[0.0] * len(r) for r in rewards]
    else:
        m = sum(flat) / len(flat)
        s = math.sqrt(sum((v - m) ** 2 for v in flat) / len(flat))
        normed = [[(v - m) / (s + 1e-6) for v in r] for r in rewards]
    return [[sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))] for r in normed]


def test_grounding_by_hand():
    # executed, failed, no tool, executed: 0.5, 0, 0, 0.5 -- and the last step always gets the bonus
    np.testing.assert_array_equal(grounding_rewards([True, False, None, True]), [0.5, 0, 0, 0.5])
    np.testing.assert_array_equal(grounding_rewards([False, False]), [0.0, 0.5])
    np.testing.assert_array_equal(grounding_rewards([None], bonus=2.0), [2.0])
    assert grounding_rewards([]).size == 0


def test_step_rewards_and_advantages_by_hand():
    # traj 0: c = [0.2, 0.8], tool_ok [True, None] -> g = [0.5, 0.5 (last)] -> r = [0.7, 1.3]
    # traj 1: c = [0.1], tool_ok [False] -> g = [0.5 (last)] -> r = [0.6]
    np.testing.assert_allclose(spa_step_rewards([0.2, 0.8], [True, None]), [0.7, 1.3])
    # pooled: mean 2.6 / 3 = 0.8666667, population std 0.3091206 -> z = [-0.5391639, 1.4018261, -0.8626622]
    # gamma 0.5: traj 0 turn 0 = -0.5391639 + 0.5 * 1.4018261 = 0.1617492
    adv = spa_advantages([[0.2, 0.8], [0.1]], [[True, None], [False]], gamma=0.5, eps=0.0)
    np.testing.assert_allclose(adv[0], [0.1617492, 1.4018261], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-0.8626622], atol=1e-6)


def test_estimator_loss_by_hand():
    # sums 1.0 and 0.5 against outcomes 1 and 0: ((1 - 1)^2 + (0.5 - 0)^2) / 2 = 0.125
    assert progress_estimator_loss([[0.2, 0.8], [0.5]], [1.0, 0.0]) == pytest.approx(0.125)
    assert progress_estimator_loss([[], [1.0]], [0.0, 1.0]) == 0.0  # an empty trajectory predicts 0
    with pytest.raises(ValueError, match="no trajectories"):
        progress_estimator_loss([], [])


@settings(deadline=None)
@given(group_st, st.floats(0, 1), st.floats(0, 2))
def test_matches_loop(group, gamma, bonus):
    contributions = [c for c, _ in group]
    tool_ok = [ok for _, ok in group]
    got = spa_advantages(contributions, tool_ok, bonus=bonus, gamma=gamma)
    for g, w in zip(got, loop_spa(contributions, tool_ok, bonus, gamma)):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)


@settings(deadline=None)
@given(group_st, st.floats(-20, 20))
def test_contribution_shift_invariance(group, shift):
    contributions = [c for c, _ in group]
    tool_ok = [ok for _, ok in group]
    rewards = [v for c, ok in group for v in spa_step_rewards(c, ok)]
    assume(not rewards or np.std(rewards) > 1e-2 or np.ptp(rewards) == 0)
    base = spa_advantages(contributions, tool_ok)
    shifted = spa_advantages([[v + shift for v in c] for c in contributions], tool_ok)
    for a, b in zip(base, shifted):
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(deadline=None)
@given(st.integers(1, 5), st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=5))
def test_identical_flat_group_gets_zero(g, c):
    # every step of every rollout with the same reward: no step is better than another
    flat = [c[0]] * len(c)
    adv = spa_advantages([flat] * g, [[True] * len(c)] * g)
    assert all(np.all(a == 0.0) for a in adv)


def test_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="contributions"):
        spa_step_rewards([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="tool_ok"):
        spa_advantages([[0.1]], [])
    with pytest.raises(ValueError, match="outcomes"):
        progress_estimator_loss([[0.1]], [1.0, 2.0])
