"""GiGPO step groups: grouping by anchor key, hand-computed advantages, a loop reference, properties."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import gigpo_advantages, grpo_advantages, step_group_sizes, step_groups

key_st = st.sampled_from(["s0", "s1", "s2", None])
group_st = st.integers(1, 5).flatmap(
    lambda g: st.tuples(
        st.lists(
            st.integers(0, 4).flatmap(
                lambda t: st.tuples(
                    st.lists(st.floats(-2, 2, allow_nan=False), min_size=t, max_size=t),
                    st.lists(key_st, min_size=t, max_size=t),
                )
            ),
            min_size=g,
            max_size=g,
        ),
        st.lists(st.floats(-2, 2, allow_nan=False), min_size=g, max_size=g),
    )
)


def centred(values, scale):
    if all(v == values[0] for v in values):
        return [0.0] * len(values)
    m = sum(values) / len(values)
    if scale == "none":
        return [v - m for v in values]
    s = math.sqrt(sum((v - m) ** 2 for v in values) / len(values))
    return [(v - m) / (s + 1e-6) for v in values]


def loop_gigpo(rewards, outcomes, keys, gamma, omega, scale):
    """Eq. 3-8 of the paper, one step at a time: compare each step with every step from the same state."""
    episode = centred(outcomes, scale)
    returns = [[sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))] for r in rewards]
    out = []
    for i, r in enumerate(rewards):
        row = []
        for t in range(len(r)):
            if keys[i][t] is None:
                members = [(i, t)]
            else:
                members = [
                    (j, u) for j in range(len(rewards)) for u in range(len(rewards[j])) if keys[j][u] == keys[i][t]
                ]
            step = 0.0
            if len(members) > 1:
                step = centred([returns[j][u] for j, u in members], scale)[members.index((i, t))]
            row.append(episode[i] + omega * step)
        out.append(row)
    return out


def test_step_groups_by_hand():
    keys = [["s0", "A"], ["s0", "B"], ["s0", "A", None]]
    assert step_groups(keys) == [[(0, 0), (1, 0), (2, 0)], [(0, 1), (2, 1)], [(1, 1)], [(2, 2)]]
    assert step_group_sizes(keys) == {1: 2, 2: 1, 3: 1}


def test_advantages_by_hand():
    # gamma 0.5, omega 1, scale none (mean-centred only):
    #   traj 0: keys [s0, A], rewards [0, 1], R = 1 -> returns [0.5, 1]
    #   traj 1: keys [s0, B], rewards [0, 0], R = 0 -> returns [0, 0]
    #   traj 2: keys [s0, A, C], rewards [0, 0, 1], R = 1 -> returns [0.25, 0.5, 1]
    # A^E = R - 2/3 = [1/3, -2/3, 1/3]
    # step group s0: returns [0.5, 0, 0.25], mean 0.25 -> A^S = [0.25, -0.25, 0]
    # step group A:  returns [1, 0.5], mean 0.75 -> A^S = [0.25, -0.25]; B and C are singletons -> 0
    adv = gigpo_advantages(
        [[0, 1], [0, 0], [0, 0, 1]], [1, 0, 1], [["s0", "A"], ["s0", "B"], ["s0", "A", "C"]], gamma=0.5, scale="none"
    )
    np.testing.assert_allclose(adv[0], [1 / 3 + 0.25, 1 / 3 + 0.25])
    np.testing.assert_allclose(adv[1], [-2 / 3 - 0.25, -2 / 3])
    np.testing.assert_allclose(adv[2], [1 / 3, 1 / 3 - 0.25, 1 / 3])


def test_std_scaling_by_hand():
    # two rollouts from one state: outcomes [1, 0] -> A^E = [1, -1]; step returns (gamma 1) [2, 0] -> A^S = [1, -1]
    adv = gigpo_advantages([[1, 1], [0, 0]], [1, 0], [["s", "x"], ["s", "y"]], gamma=1.0, omega=0.5, eps=0.0)
    np.testing.assert_allclose(adv[0], [1 + 0.5, 1])
    np.testing.assert_allclose(adv[1], [-1 - 0.5, -1])


@settings(deadline=None)
@given(group_st, st.floats(0, 1), st.floats(0, 2), st.sampled_from(["std", "none"]))
def test_matches_loop(group, gamma, omega, scale):
    steps, outcomes = group
    rewards = [r for r, _ in steps]
    keys = [k for _, k in steps]
    got = gigpo_advantages(rewards, outcomes, keys, gamma=gamma, omega=omega, scale=scale)
    for g, w in zip(got, loop_gigpo(rewards, outcomes, keys, gamma, omega, scale)):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)


@settings(deadline=None)
@given(group_st)
def test_singleton_step_groups_fall_back_to_grpo(group):
    # every anchor key unique (a history-dependent key): no step has a peer, so A = the GRPO advantage
    steps, outcomes = group
    rewards = [r for r, _ in steps]
    keys = [[f"{i}-{t}" for t in range(len(r))] for i, r in enumerate(rewards)]
    grpo = grpo_advantages(outcomes)
    for a, r, g in zip(gigpo_advantages(rewards, outcomes, keys), rewards, grpo):
        np.testing.assert_array_equal(a, np.full(len(r), g))
    assert set(step_group_sizes(keys)) <= {1}
    none_keys = [[None] * len(r) for r in rewards]  # no state reported: the same fallback
    for a, r, g in zip(gigpo_advantages(rewards, outcomes, none_keys), rewards, grpo):
        np.testing.assert_array_equal(a, np.full(len(r), g))


@settings(deadline=None)
@given(st.integers(1, 5), st.lists(st.floats(-2, 2, allow_nan=False), min_size=0, max_size=4), st.floats(-2, 2))
def test_identical_rollouts_get_zero(g, rewards, outcome):
    keys = [f"s{t}" for t in range(len(rewards))]
    adv = gigpo_advantages([rewards] * g, [outcome] * g, [keys] * g)
    assert all(np.all(a == 0.0) for a in adv)


@settings(deadline=None)
@given(group_st, st.floats(-20, 20))
def test_outcome_shift_invariance(group, shift):
    steps, outcomes = group
    assume(np.std(outcomes) > 1e-2 or np.ptp(outcomes) == 0)
    rewards = [r for r, _ in steps]
    keys = [k for _, k in steps]
    base = gigpo_advantages(rewards, outcomes, keys)
    for a, b in zip(base, gigpo_advantages(rewards, [o + shift for o in outcomes], keys)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="anchor keys"):
        gigpo_advantages([[0.0, 1.0]], [1.0], [["s"]])
    with pytest.raises(ValueError, match="outcomes"):
        gigpo_advantages([[0.0]], [1.0, 0.0], [["s"]])
