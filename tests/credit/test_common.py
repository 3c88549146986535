"""Shared numerics (discounted sums, pooled / per-index normalisation) and reading arrays from trajectories."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_llm.credit import discounted_returns, normalize, normalize_per_index, normalize_pooled
from rlgym_llm.credit.trajectories import anchor_keys, group_indices, outcome_value, turn_channel, turn_matrix
from tests.credit.trajfactory import make_trajectory


def test_discounted_returns_by_hand():
    # gamma 0.5: G_2 = 4; G_1 = 2 + 0.5 * 4 = 4; G_0 = 1 + 0.5 * 4 = 3
    np.testing.assert_allclose(discounted_returns([1, 2, 4], 0.5), [3, 4, 4])
    np.testing.assert_allclose(discounted_returns([1, 2, 4], 1.0), [7, 6, 4])
    assert discounted_returns([], 0.9).size == 0


@settings(deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), max_size=8), st.floats(0, 1))
def test_discounted_returns_match_loop(rewards, gamma):
    want = [sum(gamma ** (k - t) * rewards[k] for k in range(t, len(rewards))) for t in range(len(rewards))]
    np.testing.assert_allclose(discounted_returns(rewards, gamma), want, rtol=1e-9, atol=1e-12)


def test_normalisations_by_hand():
    # pooled over [1, 3 | 5]: mean 3, std sqrt(8 / 3) = 1.6329932
    pooled = normalize_pooled([[1.0, 3.0], [5.0]], eps=0.0)
    np.testing.assert_allclose(np.concatenate(pooled), [-1.2247449, 0.0, 1.2247449], atol=1e-7)
    # per index: turn 0 compares 1 with 5 -> [-1, 1]; turn 1 has one value -> 0
    per_index = normalize_per_index([[1.0, 3.0], [5.0]], eps=0.0)
    np.testing.assert_allclose(per_index[0], [-1.0, 0.0])
    np.testing.assert_allclose(per_index[1], [1.0])
    np.testing.assert_allclose(normalize([1.0, 3.0], scale="none"), [-1.0, 1.0])
    with pytest.raises(ValueError, match="scale"):
        normalize([1.0, 2.0], scale="max")


def test_reading_trajectories():
    sig = [{"tool_ok": True, "progress": 0.5, "reward_components": {"fmt": 0.2}, "state_key": "a"}, {"tool_ok": None}]
    traj = make_trajectory([0.1, 0.9], 1.0, signals=sig, components={"f1": 0.7})
    assert [turn_channel(t, "tool_ok") for t in traj.turns] == [1.0, 0.0]  # None: no tool called
    assert turn_channel(traj.turns[0], "fmt") == 0.2 and turn_channel(traj.turns[1], "reward") == 0.9
    np.testing.assert_array_equal(turn_matrix(traj, ["progress", "fmt"]), [[0.5, 0.2], [0.0, 0.0]])
    assert outcome_value(traj) == 1.0 and outcome_value(traj, "f1") == 0.7
    with pytest.raises(KeyError, match="no outcome component"):
        outcome_value(traj, "em")
    keys = anchor_keys(traj)  # turn 0 starts from the reset state, turn 1 from turn 0's reported state
    assert keys[0].startswith("opening:") and keys[1] == "a"
    bad = make_trajectory([0.0], signals=[{"progress": "half"}])
    with pytest.raises(TypeError, match="not a number"):
        turn_channel(bad.turns[0], "progress")
    groups, failed = group_indices([traj, make_trajectory([0.0], failed=True), make_trajectory([0.0], group="h")])
    assert groups == {"g": [0], "h": [2]} and failed == [1]
