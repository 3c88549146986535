"""Length effects: two successes that differ only in length must not be ranked by length alone, except
where a method's authors build a length effect in (IGPO's summed z-scores, G-RA's accumulation); those
are pinned on hand cases here and said in docs/credit.md."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import compute_advantages, gated_advantages, igpo_advantages, spa_advantages
from tests.credit.trajfactory import make_trajectory

value = st.floats(-1, 1, allow_nan=False)
steps = st.lists(st.tuples(value, st.booleans()), min_size=0, max_size=4)


@settings(deadline=None, max_examples=60)
@given(value, st.booleans(), steps, st.integers(1, 4), st.lists(steps, min_size=0, max_size=3))
def test_spa_does_not_rank_by_length(c0, ok0, tail, extra, others):
    # success A: its first step, then `tail`; success B: the same, with `extra` neutral steps inserted
    # (contribution 0, action executed). Their first steps must get the same advantage.
    a = [(c0, ok0), *tail, (1.0, True)]
    b = [(c0, ok0), *([(0.0, True)] * extra), *tail, (1.0, True)]
    group = [a, b, *[[*o, (0.0, True)] for o in others]]
    adv = spa_advantages([[c for c, _ in t] for t in group], [[ok for _, ok in t] for t in group])
    assert adv[0][0] == adv[1][0]


def test_spa_summed_returns_rank_by_length():
    # The sum over later steps (gamma > 0) is the length effect the default (gamma 0) avoids: rewards
    # A [0.5, 1.5], B [0.5, 0.5, 0.5, 1.5], C [0, 0.5] (c + g; the last step always gets g = 0.5),
    # pooled mean 5.5 / 8 = 0.6875, so B's extra steps (0.5 < mean) lower its first-step sum.
    contributions, tool_ok = [[0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0]], [[True] * 2, [True] * 4, [False] * 2]
    own = spa_advantages(contributions, tool_ok)
    summed = spa_advantages(contributions, tool_ok, gamma=1.0)
    assert own[0][0] == own[1][0]
    assert summed[0][0] > summed[1][0]


def _traj(oks, outcome):
    return make_trajectory([0.0] * len(oks), outcome, signals=[{"tool_ok": o} for o in oks])


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 5), st.lists(st.tuples(st.lists(st.booleans(), min_size=1, max_size=6), st.booleans())))
def test_turn_grpo_and_outcome_methods_do_not_rank_by_length(extra, others):
    # two successes that make only valid calls, one `extra` turns longer, among random other rollouts
    trajs = [_traj([True, True], 1.0), _traj([True] * (2 + extra), 1.0)]
    trajs += [_traj(oks, float(win)) for oks, win in others]
    for method in ("grpo", "drgrpo", "rloo", "turn_grpo", "gigpo"):
        adv = compute_advantages(trajs, method).turn_advantages
        assert adv[0][0] == adv[1][0], method
        assert adv[0][-1] == adv[1][-1], method


def test_igpo_length_effect_is_the_authors_by_design():
    # IGPO (paper and code) z-scores every turn reward of the group in one pool, then sums them from the
    # turn on (gamma 1). Two successes that raise p(answer) from 0.2 to 0.6, one in one turn, the other
    # in three (0.2 -> 0.4 -> 0.6 -> 0.6), and a failure that learns nothing:
    #   rewards A [0.4, 1], B [0.2, 0.2, 0.0, 1], C [0.0, 0]; pooled mean 2.8 / 8 = 0.35,
    #   squared deviations sum 1.26, population std sqrt(1.26 / 8) = 0.3968627
    #   A_0 = (0.05 + 0.65) / 0.3968627 = 1.7638342;  B_0 = (-0.15 - 0.15 - 0.35 + 0.65) / 0.3968627 = 0
    adv = igpo_advantages([[0.2, 0.6], [0.2, 0.4, 0.6, 0.6], [0.2, 0.2]], [1.0, 1.0, 0.0], eps=0.0)
    np.testing.assert_allclose([adv[0][0], adv[1][0]], [1.7638342, 0.0], atol=1e-6)
    np.testing.assert_allclose([adv[0][-1], adv[1][-1]], [0.65 / 0.3968627] * 2, atol=1e-6)  # same outcome term


def test_gated_accumulation_length_effect_is_the_papers_by_design():
    # G-RA accumulates the immediate rewards of the turns before the last when the gate holds: a success
    # with three valid calls before its answer returns 1 + 3, one with one valid call 1 + 1 (D-RA likewise).
    # returns [2, 4, 0]: mean 2, population std sqrt(8 / 3) = 1.6329932 -> A = [0, 1.2247449, -1.2247449]
    adv = gated_advantages([[1.0, 1.0], [1.0] * 4, [0.0, 0.0]], [1.0, 1.0, 0.0], tau=0.5, eps=0.0)
    np.testing.assert_allclose([adv[0][0], adv[1][0], adv[2][0]], [0.0, 1.2247449, -1.2247449], atol=1e-6)
