"""Gated reward accumulation (G-RA) and its ungated baseline (D-RA)."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit import (
    compute_advantages,
    gated_advantages,
    gated_return,
    gated_turn_rewards,
    grpo_advantages,
    priority_gates,
    resolve_params,
)
from tests.credit.trajfactory import make_trajectory

imm_st = st.integers(0, 6).flatmap(
    lambda t: st.lists(st.lists(st.floats(-2, 2, allow_nan=False), min_size=2, max_size=2), min_size=t, max_size=t)
)


def loop_gated_return(outcome, immediate, tau, weights, gated=True, include_final=False):
    """G = R + 1[R >= tau] * sum_{t < T} sum_c w_c r_{t,c}, as the paper writes it."""
    total = outcome
    if not gated or outcome >= tau:
        for row in immediate if include_final else immediate[:-1]:
            total += sum(w * r for w, r in zip(weights, row))
    return total


def test_by_hand():
    # tau = 0.5, one channel (valid tool call) worth w = 0.1 per turn; the paper sums the turns before
    # the last (which carries R):
    #   R = 1.0, 2 valid calls   -> G = 1.0 + 0.1 = 1.1 (per turn: [0.1, 1.0])
    #   R = 0.5, 3 valid calls   -> G = 0.5 + 0.2 = 0.7 (R >= tau: the gate holds at equality)
    #   R = 0.0, 2 valid calls   -> G = 0.0 gated; D-RA would give 0.1
    assert gated_return(1.0, [1, 1], tau=0.5, weights=0.1) == pytest.approx(1.1)
    assert gated_return(0.5, [1, 1, 1], tau=0.5, weights=0.1) == pytest.approx(0.7)
    assert gated_return(0.0, [1, 1], tau=0.5, weights=0.1) == 0.0
    assert gated_return(0.0, [1, 1], tau=0.5, weights=0.1, gated=False) == pytest.approx(0.1)
    np.testing.assert_allclose(gated_turn_rewards(1.0, [1, 1], tau=0.5, weights=0.1), [0.1, 1.0])
    np.testing.assert_allclose(gated_turn_rewards(1.0, [1, 1], tau=0.5, weights=0.1, include_final=True), [0.1, 1.1])
    np.testing.assert_allclose(gated_turn_rewards(0.0, [1, 1], tau=0.5, weights=0.1), [0.0, 0.0])
    # the group's returns [1.1, 0.7, 0.0]: mean 0.6, population std sqrt(0.62 / 3) = 0.4546061
    #   -> z = [1.0998533, 0.2199707, -1.3198240]
    adv = gated_advantages([[1, 1], [1, 1, 1], [1]], [1.0, 0.5, 0.0], tau=0.5, weights=0.1, eps=0.0)
    for a, want, n in zip(adv, [1.0998533, 0.2199707, -1.3198240], [2, 3, 1]):
        np.testing.assert_allclose(a, np.full(n, want), atol=1e-6)


def test_swe_levels_by_hand():
    # The paper's SWE gate sits between "empty patch" and "patch fails tests": levels no submission 0 <
    # empty patch 1 < fails tests 2 < tests pass 3, tau = 2; R = 1 only when the tests pass; w = 0.1.
    #   L0, R 0, calls [1, 1, 1, 1] -> 0        L1, R 0, [1, 1, 1] -> 0 (an empty patch farms nothing)
    #   L2, R 0, [1, 1, 1] -> 0.2               L3, R 1, [1, 1] -> 1.1
    # returns [0, 0, 0.2, 1.1]: mean 0.325, population std sqrt(0.8275 / 4) = 0.4548351
    #   -> z = [-0.7145446, -0.7145446, -0.2748249, 1.7039141]
    imm = [[1, 1, 1, 1], [1, 1, 1], [1, 1, 1], [1, 1]]
    adv = gated_advantages(imm, [0, 0, 0, 1.0], tau=2, gate_levels=[0, 1, 2, 3], weights=0.1, eps=0.0)
    want = [-0.7145446, -0.7145446, -0.2748249, 1.7039141]
    for a, w, i in zip(adv, want, imm):
        np.testing.assert_allclose(a, np.full(len(i), w), atol=1e-6)
    # the default gate reads the env's `outcome_level` signal (tau 2); D-RA is a registered name
    trajs = [
        make_trajectory([0.0] * len(i), r, signals=[{"tool_ok": True, "outcome_level": lv}] * len(i))
        for i, r, lv in zip(imm, [0, 0, 0, 1.0], [0, 1, 2, 3])
    ]
    got = compute_advantages(trajs, "gated", immediate={"tool_ok": 0.1}, eps=0.0)
    for a, w in zip(got.turn_advantages, want):
        np.testing.assert_allclose(a, w, atol=1e-6)
    assert got.stats.n_grpo_equal_groups == 0
    dra = compute_advantages(trajs, "dra", immediate={"tool_ok": 0.1}).turn_advantages
    ungated = gated_advantages(imm, [0, 0, 0, 1.0], tau=2, weights=0.1, gated=False)
    for a, b in zip(dra, ungated):
        np.testing.assert_allclose(a, b)
    same = compute_advantages(trajs, "gated", immediate={"tool_ok": 0.1}, gated=False).turn_advantages
    for a, b in zip(dra, same):
        np.testing.assert_array_equal(a, b)


def test_without_levels_and_equal_valid_calls_it_is_grpo_and_counted():
    # Counter-like: no outcome level (gate on R >= 0.5), binary R, every success makes the same number of
    # valid calls: G = R * (1 + k w) is an affine map of R, so z(G) = z(R): exactly GRPO. The statistics
    # say so (the learning report then gives no verdict).
    specs = [([True, True, True], 1.0), ([True, True, True], 1.0), ([True, False], 0.0), ([False] * 4, 0.0)]
    trajs = [make_trajectory([0.0] * len(ok), r, signals=[{"tool_ok": o} for o in ok]) for ok, r in specs]
    res = compute_advantages(trajs, "gated")
    grpo = compute_advantages(trajs, "grpo")
    for a, b in zip(res.turn_advantages, grpo.turn_advantages):
        np.testing.assert_allclose(a, b, rtol=1e-5)  # up to the std's eps
    assert res.stats.n_grpo_equal_groups == 1
    # a success with more valid calls breaks the tie with GRPO
    trajs[1] = make_trajectory([0.0] * 5, 1.0, signals=[{"tool_ok": True}] * 5)
    assert compute_advantages(trajs, "gated").stats.n_grpo_equal_groups == 0


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
    # without channel thresholds both channels are gated on R alone: 2 * 1 on the turn before the last
    np.testing.assert_allclose(gated_turn_rewards(1.0, immediate, tau=0.5, weights=[1.0, 2.0]), [2.0, 1.0])
    both = gated_turn_rewards(1.0, immediate, tau=0.5, weights=[1.0, 2.0], include_final=True)
    np.testing.assert_allclose(both, [2.0, 3.0])


@settings(deadline=None)
@given(st.floats(-2, 2, allow_nan=False), imm_st, st.floats(-1, 1), st.booleans(), st.booleans())
def test_matches_loop(outcome, immediate, tau, gated, include_final):
    weights = [0.3, 1.5]
    imm = np.array(immediate).reshape(len(immediate), 2)
    got = gated_return(outcome, imm, tau=tau, weights=weights, gated=gated, include_final=include_final)
    want = loop_gated_return(outcome, immediate, tau, weights, gated, include_final)
    assert got == pytest.approx(want, abs=1e-9)


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
    assert dra[0][0] > 0 > dra[1][0]  # returns 1.8 vs 1.0
    assert gra[0][0] < 0 < gra[1][0]  # returns 0.0 vs 1.0


def test_turn_level_returns():
    # per-turn gated rewards [0.1, 1.0] and [0.0]; gamma 1 returns [1.1, 1.0] and [0.0], pooled z-scores
    adv = gated_advantages([[1, 1], [1]], [1.0, 0.0], tau=0.5, weights=0.1, level="turn", eps=0.0)
    flat = np.array([1.1, 1.0, 0.0])
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


def test_tau_on_trajectories_without_levels_is_an_error_not_a_no_op():
    # an env with no `outcome_level` (Counter, Math, Ladder, TwentyQ) gates on R >= outcome_tau: a tau set
    # for it would change nothing, so it is refused (at the run's first credit assignment), saying what to do
    plain = [make_trajectory([0.0] * 2, r, signals=[{"tool_ok": True}] * 2) for r in (1.0, 0.0)]
    for t in plain:
        t.env_id = "toy/Counter-v0"
    with pytest.raises(ConfigError, match=r"tau=3 has no effect: toy/Counter-v0 reports no `outcome_level`"):
        compute_advantages(plain, "gated", tau=3)
    assert resolve_params("gated", {}).tau is None  # unset: the default gate, on the outcome here
    default = compute_advantages(plain, "gated").turn_advantages
    on_outcome = compute_advantages(plain, "gated", outcome_tau=0.5).turn_advantages
    for a, b in zip(default, on_outcome):
        np.testing.assert_array_equal(a, b)
    compute_advantages(plain, "dra", tau=3)  # D-RA gates nothing: tau is not read
    # control: an env with levels takes tau, and it moves the gate (level 2 shut at tau 3, open at 2)
    leveled = [
        make_trajectory([0.0] * 3, r, signals=[{"tool_ok": True, "outcome_level": lv}] * 3)
        for r, lv in ((1.0, 3), (0.0, 2), (0.0, 0))
    ]
    strict = compute_advantages(leveled, "gated", tau=3).turn_advantages
    default = compute_advantages(leveled, "gated").turn_advantages
    assert strict[1][0] < default[1][0]
    np.testing.assert_array_equal(default[1], compute_advantages(leveled, "gated", tau=2).turn_advantages[1])
