"""Turn-level GRPO (MT-GRPO): hand-computed cases, a loop reference, properties."""

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import grpo_advantages, normalize_turn_rewards, turn_grpo_advantages

value = st.floats(-5, 5, allow_nan=False)
group_st = st.integers(1, 6).flatmap(
    lambda g: st.tuples(
        st.lists(st.lists(value, min_size=0, max_size=5), min_size=g, max_size=g),
        st.lists(value, min_size=g, max_size=g),
    )
)


def z(values, eps=1e-4, ddof=1):
    if all(v == values[0] for v in values):
        return [0.0] * len(values)
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - ddof))
    return [(v - m) / (s + eps) for v in values]


def loop_turn_grpo(turn_rewards, outcomes, turn_coef, gamma, norm, final_turn_reward=False, fallback=True):
    """The authors' assignment, written out turn by turn (sample std, eps 1e-4)."""
    a_o = z(outcomes)
    a_t = [[0.0] * len(r) for r in turn_rewards]
    # which (trajectory, turn) carry a turn reward; a single-turn rollout counts as R^T = 0 at index 0
    slots = []
    for i, r in enumerate(turn_rewards):
        n = len(r) if final_turn_reward else len(r) - 1
        slots += [(i, t, r[t]) for t in range(n)]
        if not final_turn_reward and len(r) == 1:
            slots.append((i, None, 0.0))
    if norm == "pooled":
        buckets = [slots]
    else:
        buckets = [[s for s in slots if (s[1] or 0) == t] for t in range(max(map(len, turn_rewards), default=0))]
    for bucket in buckets:
        if bucket:
            for (i, t, _), v in zip(bucket, z([s[2] for s in bucket])):
                if t is not None:
                    a_t[i][t] = v
    out = []
    for i, r in enumerate(turn_rewards):
        out.append(
            [a_o[i] + turn_coef * sum(gamma ** (k - t) * a_t[i][k] for k in range(t, len(r))) for t in range(len(r))]
        )
    if fallback:
        combined = z([sum(r[:-1]) + o for r, o in zip(turn_rewards, outcomes)])
        out = [[combined[i]] if len(r) == 1 else a for i, (r, a) in enumerate(zip(turn_rewards, out))]
    return out


def test_authors_two_turn_case_by_hand():
    # MT-GRPO's code (mt_grpo_env_trainer.py): turn reward R^T = 0.2 tool success + 0.5 answer in the
    # results; outcome R^O = exact match 1 + answer present 0.5; z-scores with the sample std + 1e-4.
    # Rollout 4 answered without calling the tool: R^T = 0, and it gets A^C = z(R^T + R^O).
    #   R^T = [0.7, 0.2, 0.7, 0]: mean 0.4, var 0.38 / 3, std 0.3559026 -> z = [0.8426905, -0.5617936, 0.8426905, .]
    #   R^O = [1.5, 0, 0.5, 0]: mean 0.5, var 1.5 / 3, std 0.7071068 -> z = [1.4140136, -0.7070068, 0, -0.7070068]
    #   R^T + R^O = [2.2, 0.2, 1.2, 0]: mean 0.9, var 3.08 / 3, std 1.0132456 -> z_4 = -0.9 / 1.0133456 = -0.8881471
    # tool turn: A^O + A^T; answer turn: A^O.
    adv = turn_grpo_advantages([[0.7, 1.0], [0.2, 1.0], [0.7, 0.0], [1.0]], [1.5, 0.0, 0.5, 0.0])
    np.testing.assert_allclose(adv[0], [1.4140136 + 0.8426905, 1.4140136], atol=1e-6)
    np.testing.assert_allclose(adv[1], [-0.7070068 - 0.5617936, -0.7070068], atol=1e-6)
    np.testing.assert_allclose(adv[2], [0.8426905, 0.0], atol=1e-6)
    np.testing.assert_allclose(adv[3], [-0.8881471], atol=1e-6)


def test_answer_turn_gets_the_outcome_advantage():
    # The review's case: a tool turn then an answer turn, the channel 1 on the tool turn and absent (0)
    # on the answer turn. Pooling the answer turn's absent reward with the real ones (the old default)
    # gave the winner's answer turn 1 - 0.5774 * ... = 0.32 instead of its outcome advantage; the
    # authors' assignment gives it A^O exactly.
    rewards, outcomes = [[1.0, 0.0], [0.0, 0.0]], [1.0, 0.0]
    adv = turn_grpo_advantages(rewards, outcomes, ddof=0, eps=0.0)
    np.testing.assert_allclose([adv[0][1], adv[1][1]], [1.0, -1.0])
    old = turn_grpo_advantages(rewards, outcomes, norm="pooled", final_turn_reward=True, ddof=0, eps=0.0)
    np.testing.assert_allclose(old[0][1], 1 - 0.5773503, atol=1e-6)  # the named option keeps the old numbers


def test_pooled_by_hand():
    # turn rewards [[1, 0], [0, 0]] with every turn scored, pooled: mean 0.25, std sqrt(0.75 / 4) = 0.4330127
    #   z(1) = 0.75 / 0.4330127 = 1.7320508, z(0) = -0.25 / 0.4330127 = -0.5773503
    # outcomes [1, 0] -> A^O = [1, -1]; lambda = gamma = 1:
    #   traj 0: turn 0 = 1 + 1.7320508 - 0.5773503 = 2.1547005, turn 1 = 1 - 0.5773503 = 0.4226497
    #   traj 1: turn 0 = -1 - 2 * 0.5773503 = -2.1547005, turn 1 = -1.5773503
    adv = turn_grpo_advantages(
        [[1, 0], [0, 0]], [1, 0], gamma=1.0, norm="pooled", final_turn_reward=True, ddof=0, eps=0.0
    )
    np.testing.assert_allclose(adv[0], [2.1547005, 0.4226497], atol=1e-7)
    np.testing.assert_allclose(adv[1], [-2.1547005, -1.5773503], atol=1e-7)


def test_papers_two_turn_assignment():
    # MT-GRPO: turn reward on the tool turn only, per-turn-index z-scores, no discount:
    # turn 1 gets A^O + lambda A^T, the answer turn gets A^O.
    adv = turn_grpo_advantages([[0.7, 0.0], [0.2, 0.0]], [1, 0], ddof=0, eps=0.0)
    np.testing.assert_allclose(adv[0], [1 + 1, 1])
    np.testing.assert_allclose(adv[1], [-1 - 1, -1])


@settings(deadline=None)
@given(
    group_st, st.floats(0, 2), st.floats(0, 1), st.sampled_from(["pooled", "per_index"]), st.booleans(), st.booleans()
)
def test_matches_loop(group, turn_coef, gamma, norm, final_turn_reward, fallback):
    turn_rewards, outcomes = group
    got = turn_grpo_advantages(
        turn_rewards,
        outcomes,
        turn_coef=turn_coef,
        gamma=gamma,
        norm=norm,
        final_turn_reward=final_turn_reward,
        no_tool_fallback=fallback,
    )
    want = loop_turn_grpo(turn_rewards, outcomes, turn_coef, gamma, norm, final_turn_reward, fallback)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)


@settings(deadline=None)
@given(group_st, st.floats(-50, 50), st.floats(-50, 50))
def test_shift_invariance(group, turn_shift, outcome_shift):
    turn_rewards, outcomes = group
    flat = [v for r in turn_rewards for v in r]
    assume(
        (not flat or np.std(flat) > 1e-2 or np.ptp(flat) == 0) and (np.std(outcomes) > 1e-2 or np.ptp(outcomes) == 0)
    )
    # every turn scored and no fallback: a single-turn rollout's virtual R^T = 0 does not shift
    kw = {"final_turn_reward": True, "no_tool_fallback": False}
    shifted = turn_grpo_advantages(
        [[v + turn_shift for v in r] for r in turn_rewards], [o + outcome_shift for o in outcomes], **kw
    )
    for a, b in zip(shifted, turn_grpo_advantages(turn_rewards, outcomes, **kw)):
        np.testing.assert_allclose(a, b, atol=1e-6)


@settings(deadline=None)
@given(st.integers(1, 6), st.integers(0, 5), value, value)
def test_identical_group_gets_zero(g, turns, turn_reward, outcome):
    adv = turn_grpo_advantages([[turn_reward] * turns] * g, [outcome] * g)
    assert all(np.all(a == 0.0) for a in adv)


@settings(deadline=None)
@given(group_st)
def test_without_turn_term_it_is_grpo(group):
    turn_rewards, outcomes = group
    grpo = grpo_advantages(outcomes)
    adv = turn_grpo_advantages(turn_rewards, outcomes, turn_coef=0.0, no_tool_fallback=False, ddof=0, eps=1e-6)
    for a, r, g in zip(adv, turn_rewards, grpo):
        np.testing.assert_allclose(a, np.full(len(r), g))


def test_pooled_and_per_index_differ_when_lengths_differ():
    # a trajectory that stops early: per-index compares its only turn with the others' first turns
    rewards = [[1.0], [0.0, 1.0], [0.0, 0.0]]
    pooled = normalize_turn_rewards(rewards, norm="pooled", final_turn_reward=True)
    per_index = normalize_turn_rewards(rewards, norm="per_index", final_turn_reward=True)
    assert not np.allclose(np.concatenate(pooled), np.concatenate(per_index))
    assert abs(np.concatenate(pooled).mean()) < 1e-12  # pooled z-scores are centred over all turns


def test_default_does_not_reward_episode_length():
    # Regression: with gamma = 1 every valid turn's positive z-score was summed over the rest of the
    # episode, so a failed rollout that kept making valid calls (overshooting a Counter target) got
    # a larger opening-turn advantage than a short successful one, and RL learned to make episodes long.
    from rlgym_llm.credit import compute_advantages
    from tests.credit.trajfactory import make_trajectory

    specs = [([True, True], 1.0), ([True] * 6, 0.0), ([False, True], 0.0)]  # success, long failure, bad call
    trajs = [
        make_trajectory([0.0] * len(ok), r, signals=[{"tool_ok": o} for o in ok], completion_lens=[2] * len(ok))
        for ok, r in specs
    ]
    adv = compute_advantages(trajs, "turn_grpo").turn_advantages
    assert (adv[1] < 1e-9).all()  # a failed episode gets no positive credit for its length
    assert adv[1].max() < adv[0].min()
    assert adv[2][0] < adv[1][0]  # the invalid call is the worst turn
