"""Gated reward accumulation (G-RA) and its ungated baseline (D-RA)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import gated_advantages, gated_return, gated_turn_rewards, grpo_advantages, priority_gates

imm_st = st.integers(0, 6).flatmap(
    lambda t: st.lists(st.lists(st.floats(-2, 2, allow_nan=False), min_size=2, max_size=2), min_size=t, max_size=t)
)


def loop_gated_return(outcome, immediate, tau, weights, gated=True):
    """G = R + 1[R >= tau] * sum_t sum_c w_c r_{t,c}, as the reference file writes it."""
    total = outcome
    if not gated or outcome >= tau:
        for row in immediate:
            total += sum(w * r for w, r in zip(weights, row))
    return total


def test_by_hand():
    # tau = 0.5, one channel (valid tool call) worth w = 0.1 per turn:
    #   R = 1.0, 2 valid calls   -> G = 1.0 + 0.2 = 1.2 (per turn: [0.1, 0.1 + 1.0])
    #   R = 0.5, 3 valid calls   -> G = 0.5 + 0.3 = 0.8 (R >= tau: the gate holds at equality)
    #   R = 0.0, 1 valid call    -> G = 0.0 gated; D-RA would give 0.1
    assert gated_return(1.0, [1, 1], tau=0.5, weights=0.1) == pytest.approx(1.2)
    assert gated_return(0.5, [1, 1, 1], tau=0.5, weights=0.1) == pytest.approx(0.8)
    assert gated_return(0.0, [1], tau=0.5, weights=0.1) == 0.0
    assert gated_return(0.0, [1], tau=0.5, weights=0.1, gated=False) == pytest.approx(0.1)
    np.testing.assert_allclose(gated_turn_rewards(1.0, [1, 1], tau=0.5, weights=0.1), [0.1, 1.1])
    np.testing.assert_allclose(gated_turn_rewards(0.0, [1, 1], tau=0.5, weights=0.1), [0.0, 0.0])
    # the group's returns [1.2, 0.8, 0.0]: mean 2/3, population std 0.4988877 -> z = [1.069045, 0.267261, -1.336306]
    adv = gated_advantages([[1, 1], [1, 1, 1], [1]], [1.0, 0.5, 0.0], tau=0.5, weights=0.1, eps=0.0)
    for a, want, n in zip(adv, [1.069045, 0.267261, -1.336306], [2, 3, 1]):
        np.testing.assert_allclose(a, np.full(n, want), atol=1e-6)


def test_priority_gates_by_hand():
    # channels in priority order with levels [1, 0, 5] and thresholds [0.5, 1, 0]:
    # channel 0 always counts; channel 1 needs 1 >= 0.5 (yes); channel 2 also needs 0 >= 1 (no)
    np.testing.assert_array_equal(priority_gates([1, 0, 5], [0.5, 1, 0]), [True, True, False])
    np.testing.assert_array_equal(priority_gates([0, 9, 9], [0.5, 0, 0]), [True, False, False])


def test_multi_level_channels_by_hand():
    # R = 1 >= tau = 0.5. Channel 0 ("tests run") sums to 0 over the turns, below its threshold 1,
    # so channel 1 ("file modified") is gated off even though R passed: only channel 0 counts.
    immediate = [[0.0, 1.0], [0.0, 1.0]]
    rewards = gated_turn_rewards(1.0, immediate, tau=0.5, weights=[1.0, 2.0], channel_thresholds=[1.0])
    np.testing.assert_allclose(rewards, [0.0, 1.0])
    # without channel thresholds both channels are gated on R alone: 2 * 1 per turn
    np.testing.assert_allclose(gated_turn_rewards(1.0, immediate, tau=0.5, weights=[1.0, 2.0]), [2.0, 3.0])


@settings(deadline=None)
@given(st.floats(-2, 2, allow_nan=False), imm_st, st.floats(-1, 1), st.booleans())
def test_matches_loop(outcome, immediate, tau, gated):
    weights = [0.3, 1.5]
    got = gated_return(outcome, np.array(immediate).reshape(len(immediate), 2), tau=tau, weights=weights, gated=gated)
    assert got == pytest.approx(loop_gated_return(outcome, immediate, tau, weights, gated), abs=1e-9)


@settings(deadline=None)
@given(st.floats(-2, 2, allow_nan=False), imm_st, st.floats(0, 1))
def test_gate_never_lets_immediate_rewards_through_below_threshold(outcome, immediate, tau):
    imm = np.array(immediate).reshape(len(immediate), 2)
    rewards = gated_turn_rewards(outcome, imm, tau=tau, weights=[1.0, 1.0])
    if outcome < tau:
        want = np.zeros(len(immediate))
        if len(immediate):
            want[-1] = outcome
        np.testing.assert_array_equal(rewards, want)  # exactly: nothing of the immediate rewards leaks
    else:
        np.testing.assert_allclose(rewards, gated_turn_rewards(outcome, imm, tau=tau, weights=[1.0, 1.0], gated=False))


@settings(deadline=None)
@given(st.lists(imm_st, min_size=3, max_size=3), st.sampled_from(["episode", "turn"]))
def test_failing_trajectories_cannot_farm(immediate, level):
    # Two groups that differ only in the immediate rewards of the trajectories below tau: the gate
    # makes those rewards invisible, so every advantage of the group is unchanged.
    outcomes = [0.0, 0.2, 1.0]
    imm = [np.array(i).reshape(len(i), 2) for i in immediate]
    farmed = [imm[0] * -3 + 7, imm[1] * 5 + 2, imm[2]]
    a = gated_advantages(imm, outcomes, tau=0.5, weights=[1.0, 1.0], level=level)
    b = gated_advantages(farmed, outcomes, tau=0.5, weights=[1.0, 1.0], level=level)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_ungated_baseline_can_be_farmed():
    # D-RA: a failing trajectory with many "valid call" rewards overtakes a succeeding one
    immediate, outcomes = [[1.0] * 10, [1.0]], [0.0, 1.0]
    dra = gated_advantages(immediate, outcomes, tau=0.5, weights=0.2, gated=False)
    gra = gated_advantages(immediate, outcomes, tau=0.5, weights=0.2)
    assert dra[0][0] > 0 > dra[1][0]  # returns 2.0 vs 1.2
    assert gra[0][0] < 0 < gra[1][0]  # returns 0.0 vs 1.2


def test_turn_level_returns():
    # per-turn gated rewards [0.1, 1.1] and [0.0]; gamma 1 returns [1.2, 1.1] and [0.0], pooled z-scores
    adv = gated_advantages([[1, 1], [1]], [1.0, 0.0], tau=0.5, weights=0.1, level="turn", eps=0.0)
    flat = np.array([1.2, 1.1, 0.0])
    want = (flat - flat.mean()) / flat.std()
    np.testing.assert_allclose(np.concatenate(adv), want)


@settings(deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=8))
def test_no_immediate_rewards_reduces_to_grpo(outcomes):
    adv = gated_advantages([[0.0, 0.0]] * len(outcomes), outcomes, tau=0.5)
    for a, g in zip(adv, grpo_advantages(outcomes)):
        np.testing.assert_allclose(a, [g, g])


def test_rejects_mismatched_thresholds():
    with pytest.raises(ValueError, match="channel thresholds"):
        gated_turn_rewards(1.0, [[1.0, 1.0, 1.0]], tau=0.5, channel_thresholds=[0.0])


@settings(deadline=None)
@given(st.lists(imm_st, min_size=1, max_size=5), st.lists(st.floats(-1, 1), min_size=5, max_size=5), st.floats(-5, 5))
def test_shifting_outcomes_and_threshold_together_changes_nothing(immediate, outcomes, shift):
    # the gate compares R with tau, so moving both keeps every gate; the group normalisation removes the rest
    imm = [np.array(i).reshape(len(i), 2) for i in immediate]
    outs = outcomes[: len(imm)]
    assume(all(abs(o) > 1e-6 for o in outs))  # o + shift must not round across the threshold
    returns = [gated_return(o, i, tau=0.0) for o, i in zip(outs, imm)]
    assume(np.std(returns) > 1e-2 or np.ptp(returns) == 0)
    base = gated_advantages(imm, outs, tau=0.0)
    moved = gated_advantages(imm, [o + shift for o in outs], tau=shift)
    for a, b in zip(base, moved):
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(deadline=None)
@given(st.integers(1, 6), imm_st, st.floats(-1, 1), st.booleans())
def test_identical_group_gets_zero(g, immediate, outcome, gated):
    imm = np.array(immediate).reshape(len(immediate), 2)
    adv = gated_advantages([imm] * g, [outcome] * g, tau=0.0, gated=gated)
    assert all(np.all(a == 0.0) for a in adv)


def test_no_immediate_channels():
    # a (T, 0) matrix (no channel configured): the outcome on the last turn, nothing else
    np.testing.assert_array_equal(gated_turn_rewards(1.0, np.zeros((3, 0)), tau=0.5), [0.0, 0.0, 1.0])
    assert gated_turn_rewards(1.0, np.zeros((0, 2)), tau=0.5).size == 0
