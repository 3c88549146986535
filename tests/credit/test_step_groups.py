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


def centred(values, scale, ddof=1, of=None):
    """(v - mean) / (std + 1e-6) of each v in `values`, the statistics over `of` (default: `values`)."""
    pool = values if of is None else of
    if all(v == pool[0] for v in pool):
        return [0.0] * len(values)
    m = sum(pool) / len(pool)
    if scale == "none":
        return [v - m for v in values]
    s = math.sqrt(sum((v - m) ** 2 for v in pool) / (len(pool) - (ddof if len(pool) > ddof else 0)))
    return [(v - m) / (s + 1e-6) for v in values]


def loop_gigpo(rewards, outcomes, keys, gamma, omega, scale, cross_steps=True):
    """Eq. 3-8 of the paper, one step at a time: compare each step with every step from the same state.
    verl-agent's episode statistics (cross steps): every step row holds its trajectory's R."""
    rows = [o for o, r in zip(outcomes, rewards) for _ in r] if cross_steps else outcomes
    episode = centred(outcomes, scale, of=rows) if rows else [0.0] * len(outcomes)
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
    rewards, keys = [[0, 1], [0, 0], [0, 0, 1]], [["s0", "A"], ["s0", "B"], ["s0", "A", "C"]]
    adv = gigpo_advantages(rewards, [1, 0, 1], keys, gamma=0.5, scale="none", cross_steps=False)
    np.testing.assert_allclose(adv[0], [1 / 3 + 0.25, 1 / 3 + 0.25])
    np.testing.assert_allclose(adv[1], [-2 / 3 - 0.25, -2 / 3])
    np.testing.assert_allclose(adv[2], [1 / 3, 1 / 3 - 0.25, 1 / 3])
    # verl-agent's default (cross steps): the episode mean is over the 7 step rows [1, 1, 0, 0, 1, 1, 1] = 5/7
    adv = gigpo_advantages(rewards, [1, 0, 1], keys, gamma=0.5, scale="none")
    np.testing.assert_allclose(adv[1], [-5 / 7 - 0.25, -5 / 7])


def test_cross_step_episode_statistics_by_hand():
    # verl-agent's episode_norm_reward with compute_mean_std_cross_steps=True: a success with 3 steps and a
    # failure with 1; rows [1, 1, 1, 0]: mean 0.75, sample std sqrt((3 * 0.0625 + 0.5625) / 3) = 0.5
    #   -> A^E = [0.25 / 0.5, -0.75 / 0.5] = [0.5, -1.5]; per trajectory: [1, 0] -> +-0.7071068
    keys = [["a", "b", "c"], ["d"]]
    adv = gigpo_advantages([[0, 0, 0], [0]], [1, 0], keys, eps=0.0)
    np.testing.assert_allclose(adv[0], [0.5] * 3)
    np.testing.assert_allclose(adv[1], [-1.5])
    per_traj = gigpo_advantages([[0, 0, 0], [0]], [1, 0], keys, cross_steps=False, eps=0.0)
    np.testing.assert_allclose([per_traj[0][0], per_traj[1][0]], [0.7071068, -0.7071068], atol=1e-7)


def test_std_scaling_by_hand():
    # two rollouts from one state: outcomes [1, 0] -> A^E = [1, -1]; step returns (gamma 1) [2, 0] -> A^S = [1, -1]
    adv = gigpo_advantages([[1, 1], [0, 0]], [1, 0], [["s", "x"], ["s", "y"]], gamma=1.0, omega=0.5, ddof=0, eps=0.0)
    np.testing.assert_allclose(adv[0], [1 + 0.5, 1])
    np.testing.assert_allclose(adv[1], [-1 - 0.5, -1])


@settings(deadline=None)
@given(group_st, st.floats(0, 1), st.floats(0, 2), st.sampled_from(["std", "none"]), st.booleans())
def test_matches_loop(group, gamma, omega, scale, cross_steps):
    steps, outcomes = group
    rewards = [r for r, _ in steps]
    keys = [k for _, k in steps]
    got = gigpo_advantages(rewards, outcomes, keys, gamma=gamma, omega=omega, scale=scale, cross_steps=cross_steps)
    for g, w in zip(got, loop_gigpo(rewards, outcomes, keys, gamma, omega, scale, cross_steps)):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)


@settings(deadline=None)
@given(group_st)
def test_singleton_step_groups_fall_back_to_grpo(group):
    # every anchor key unique (a history-dependent key): no step has a peer, so A = the GRPO advantage
    steps, outcomes = group
    rewards = [r for r, _ in steps]
    keys = [[f"{i}-{t}" for t in range(len(r))] for i, r in enumerate(rewards)]
    grpo = grpo_advantages(outcomes)  # per-trajectory statistics, population std
    kw = {"cross_steps": False, "ddof": 0}
    for a, r, g in zip(gigpo_advantages(rewards, outcomes, keys, **kw), rewards, grpo):
        np.testing.assert_array_equal(a, np.full(len(r), g))
    assert set(step_group_sizes(keys)) <= {1}
    none_keys = [[None] * len(r) for r in rewards]  # no state reported: the same fallback
    for a, r, g in zip(gigpo_advantages(rewards, outcomes, none_keys, **kw), rewards, grpo):
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
