"""IGPO information-gain rewards and advantages: probes, hand-computed cases, a loop reference, properties."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import (
    answer_prob,
    answer_probes,
    build_answer_probe,
    igpo_advantages,
    info_gain_turn_rewards,
    probe_prefixes,
)
from tests.credit.trajfactory import make_trajectory

prob = st.floats(0.001, 1.0)
group_st = st.integers(1, 5).flatmap(
    lambda g: st.tuples(
        st.lists(st.lists(prob, min_size=0, max_size=5), min_size=g, max_size=g),
        st.lists(st.floats(-2, 2, allow_nan=False), min_size=g, max_size=g),
    )
)


def z(values, eps=1e-6):
    """Population z-scores, exactly 0 for a constant list."""
    if not values or all(v == values[0] for v in values):
        return [0.0] * len(values)
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / len(values))
    return [(v - m) / (s + eps) for v in values]


def loop_igpo(probs, outcomes, kind, norm, gamma):
    """The reference file's IGPO, written turn by turn."""
    rewards = []
    for p, o in zip(probs, outcomes):
        row = []
        for t in range(len(p)):
            if t == len(p) - 1:
                row.append(o)
            elif kind == "prob_diff":
                row.append(p[t + 1] - p[t])
            else:
                row.append(math.log(p[t + 1]) - math.log(p[t]))
        rewards.append(row)
    normed = [[0.0] * len(r) for r in rewards]
    cells = [(i, t) for i, r in enumerate(rewards) for t in range(len(r))]
    if norm == "joint":
        parts = [cells]
    elif norm == "separate":
        parts = [
            [c for c in cells if c[1] == len(rewards[c[0]]) - 1],
            [c for c in cells if c[1] < len(rewards[c[0]]) - 1],
        ]
    else:
        parts = [[c for c in cells if c[1] == t] for t in range(max(map(len, rewards)))]
    for part in parts:
        for (i, t), v in zip(part, z([rewards[i][t] for i, t in part])):
            normed[i][t] = v
    return [[sum(gamma ** (k - t) * r[k] for k in range(t, len(r))) for t in range(len(r))] for r in normed]


def test_turn_rewards_by_hand():
    # p = [0.1, 0.3, 0.6] before turns 0, 1, 2: turn 0 raised p by 0.2, turn 1 by 0.3, the last gets the outcome
    np.testing.assert_allclose(info_gain_turn_rewards([0.1, 0.3, 0.6], 1.0), [0.2, 0.3, 1.0])
    np.testing.assert_allclose(
        info_gain_turn_rewards([0.1, 0.3, 0.6], 1.0, kind="log_prob_diff"), [math.log(3), math.log(2), 1.0]
    )
    np.testing.assert_array_equal(info_gain_turn_rewards([0.4], -2.0), [-2.0])  # one turn: the outcome only
    assert info_gain_turn_rewards([], 1.0).size == 0


def test_joint_advantages_by_hand():
    # rewards: traj 0 [0.2, 0.3, 1.0], traj 1 [0.1 -> 0.05: -0.05, outcome 0.0]
    # pooled: mean 1.45 / 5 = 0.29; squared deviations 0.0081 + 0.0001 + 0.5041 + 0.1156 + 0.0841 = 0.712;
    # population std sqrt(0.712 / 5) = 0.3773592 -> z = [-0.2384995, 0.0264999, 1.8814962 | -0.9009982, -0.7684985]
    # gamma = 1, reward-to-go: traj 0 [1.6694967, 1.9079962, 1.8814962], traj 1 [-1.6694967, -0.7684985]
    adv = igpo_advantages([[0.1, 0.3, 0.6], [0.1, 0.05]], [1.0, 0.0], eps=0.0)
    np.testing.assert_allclose(adv[0], [1.6694967, 1.9079962, 1.8814962], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-1.6694967, -0.7684985], atol=1e-6)
    # gamma = 0: each turn keeps its own z-score
    adv0 = igpo_advantages([[0.1, 0.3, 0.6], [0.1, 0.05]], [1.0, 0.0], gamma=0.0, eps=0.0)
    np.testing.assert_allclose(
        np.concatenate(adv0), [-0.2384995, 0.0264999, 1.8814962, -0.9009982, -0.7684985], atol=1e-6
    )


def test_separate_advantages_by_hand():
    # outcomes [1, 0] -> z = [1, -1]; gains [0.2, 0.3 | -0.05]: mean 0.15, std 0.1471960
    #   -> z = [0.3396831, 1.0190493 | -1.3587324]; gamma = 0 keeps them in place
    adv = igpo_advantages([[0.1, 0.3, 0.6], [0.1, 0.05]], [1.0, 0.0], norm="separate", gamma=0.0, eps=0.0)
    np.testing.assert_allclose(adv[0], [0.3396831, 1.0190493, 1.0], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-1.3587324, -1.0], atol=1e-6)


@settings(deadline=None)
@given(group_st, st.sampled_from(["prob_diff", "log_prob_diff"]), st.sampled_from(["joint", "separate", "per_index"]))
def test_matches_loop(group, kind, norm):
    probs, outcomes = group
    for gamma in (1.0, 0.7):
        got = igpo_advantages(probs, outcomes, kind=kind, norm=norm, gamma=gamma)
        want = loop_igpo(probs, outcomes, kind, norm, gamma)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)


@settings(deadline=None)
@given(group_st, st.floats(-0.5, 0.5), st.floats(-10, 10))
def test_separate_mode_is_shift_invariant(group, prob_shift, outcome_shift):
    probs, outcomes = group
    gains = [float(v) for p in probs for v in np.diff(p)]
    assume(np.std(outcomes) > 1e-2 or np.ptp(outcomes) == 0)
    assume(not gains or np.std(gains) > 1e-2 or np.ptp(gains) == 0)
    base = igpo_advantages(probs, outcomes, norm="separate")
    shifted = igpo_advantages(
        [[x + prob_shift for x in p] for p in probs], [o + outcome_shift for o in outcomes], norm="separate"
    )
    for a, b in zip(base, shifted):
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(deadline=None)
@given(group_st, st.floats(-0.5, 0.5))
def test_joint_mode_ignores_a_common_probability_shift(group, shift):
    # information gain is a difference of probabilities: a constant offset changes no reward
    probs, outcomes = group
    base = igpo_advantages(probs, outcomes)
    for a, b in zip(base, igpo_advantages([[x + shift for x in p] for p in probs], outcomes)):
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(deadline=None)
@given(st.integers(1, 6), st.lists(prob, min_size=1, max_size=5), st.floats(-2, 2, allow_nan=False))
def test_identical_rollouts(g, probs, outcome):
    # identical rollouts get identical advantages; with no information gain (flat p) and one shared
    # outcome the separate normalisation gives exactly zero
    adv = igpo_advantages([probs] * g, [outcome] * g)
    for a in adv[1:]:
        np.testing.assert_array_equal(a, adv[0])
    flat = igpo_advantages([[probs[0]] * len(probs)] * g, [outcome] * g, norm="separate")
    assert all(np.all(a == 0.0) for a in flat)


def test_collapsed_outcomes_still_carry_signal():
    # every rollout fails (outcome 0): GRPO would give all zeros, IGPO still rewards the turn that
    # raised the answer's probability
    adv = igpo_advantages([[0.1, 0.5], [0.1, 0.1]], [0.0, 0.0], norm="separate", gamma=0.0)
    assert adv[0][0] > 0 > adv[1][0]
    assert adv[0][1] == adv[1][1] == 0.0


def test_probe_layout_by_hand():
    # context [5, 6] + template prefix [1] + answer [7, 8] + suffix [2]: the answer sits at [3, 5)
    probe = build_answer_probe([5, 6], [7, 8], template_prefix_ids=[1], template_suffix_ids=[2])
    assert probe.input_ids == (5, 6, 1, 7, 8, 2)
    assert (probe.answer_start, probe.answer_end) == (3, 5)
    # log-probs aligned with input_ids: the answer tokens' are -1 and -3 -> p = exp(-2)
    assert probe.answer_prob([0, -9, -9, -1, -3, -9]) == pytest.approx(math.exp(-2))
    assert answer_prob([math.log(0.25), math.log(1.0)]) == pytest.approx(0.5)  # geometric mean
    with pytest.raises(ValueError, match="log-probs"):
        probe.answer_prob([0.0] * 5)
    with pytest.raises(ValueError, match="empty"):
        build_answer_probe([1], [])


def test_probe_prefixes_end_where_each_completion_starts():
    # prompt 3 tokens; turn 0: completion 2; turn 1: observation 1 + completion 2; turn 2: obs 1 + completion 2
    traj = make_trajectory([0, 0, 0], completion_lens=[2, 2, 2], obs_lens=[0, 1, 1])
    ids = traj.token_ids
    prefixes = probe_prefixes(traj)
    assert [len(p) for p in prefixes] == [3, 3 + 2 + 1, 3 + 2 + 1 + 2 + 1]
    for prefix, (start, _) in zip(prefixes, traj.turn_spans):
        assert list(prefix) == ids[:start]  # p_t holds turn t-1's tool response, not turn t's completion
    probes = answer_probes(traj, [99], template_prefix_ids=[98])
    assert [p.input_ids[-2:] for p in probes] == [(98, 99)] * 3


def test_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="probability arrays"):
        igpo_advantages([[0.1]], [1.0, 0.0])
    with pytest.raises(ValueError, match="kind"):
        info_gain_turn_rewards([0.1, 0.2], 1.0, kind="bogus")
    with pytest.raises(ValueError, match="norm"):
        igpo_advantages([[0.1]], [1.0], norm="bogus")


def test_f1_outcome_and_format_penalty_by_hand():
    # The last turn's reward is the outcome component `f1` (the paper's); with format_penalty -2 (the
    # authors' code) an episode that did not end with an accepted answer gets -2 instead.
    # single-turn rollouts: F1 [1, 0, 0 (its answer call failed)] -> rewards [1, 0, -2]:
    #   mean -1/3, population std sqrt(14 / 9) = 1.2472191 -> z = [1.0690450, 0.2672612, -1.3363062]
    from rlgym_llm.credit import compute_advantages

    trajs = [
        make_trajectory([0.0], 0.0, components={"f1": f1}, signals=[{"tool_ok": ok}])
        for f1, ok in [(1.0, True), (0.0, True), (0.0, False)]
    ]
    probs = [[0.5]] * 3
    adv = compute_advantages(trajs, "igpo", outcome="f1", format_penalty=-2.0, eps=0.0, answer_probs=probs)
    np.testing.assert_allclose(np.concatenate(adv.turn_advantages), [1.0690450, 0.2672612, -1.3363062], atol=1e-6)
    plain = compute_advantages(trajs, "igpo", outcome="f1", eps=0.0, answer_probs=probs)  # no penalty: [1, 0, 0]
    np.testing.assert_allclose(np.concatenate(plain.turn_advantages), [1.4142136, -0.7071068, -0.7071068], atol=1e-6)
