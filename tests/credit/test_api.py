"""`compute_advantages`: grouping, failed trajectories, statistics, parameters, and agreement with the estimators."""

import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlgym_llm.core.errors import ConfigError
from rlgym_llm.credit import (
    METHODS,
    compute_advantages,
    drgrpo_advantages,
    gated_advantages,
    gigpo_advantages,
    grpo_advantages,
    igpo_advantages,
    resolve_params,
    rloo_advantages,
    spa_advantages,
    turn_grpo_advantages,
)
from rlgym_llm.credit.trajectories import anchor_keys
from tests.credit.trajfactory import make_trajectory


def batch():
    """Two interleaved groups (a, b) and a failed trajectory of group a with a wild reward."""
    specs = [
        ("a", [0.0, 1.0], 1.0, [True, False], ["x", "y"]),
        ("b", [0.5], 0.0, [None], ["z"]),
        ("a", [0.0, 0.0, 0.0], 0.0, [False, True, True], ["x", "w", "y"]),
        ("b", [0.2, 0.1], 1.0, [True, True], ["z", "q"]),
        ("a", [1.0], 100.0, [True], ["x"]),  # failed
        ("a", [0.3], 0.5, [True], ["v"]),
    ]
    trajs = []
    for k, (group, rewards, outcome, ok, keys) in enumerate(specs):
        signals = [
            {"tool_ok": o, "state_key": s, "reward_components": {"fmt": 0.1 * (t + 1)}}
            for t, (o, s) in enumerate(zip(ok, keys))
        ]
        trajs.append(make_trajectory(rewards, outcome, group=group, signals=signals, failed=k == 4))
    return trajs


GROUPS = {"a": [0, 2, 5], "b": [1, 3]}
PROBS = [[0.1, 0.2], [0.3], [0.1, 0.1, 0.4], [0.2, 0.6], [], [0.5]]
CONTRIB = [[0.5, 0.5], [0.0], [0.1, -0.1, 0.0], [0.4, 0.6], [], [0.5]]


def direct(method, trajs, idx):
    """The estimator called by hand on one group's arrays."""
    ts = [trajs[i] for i in idx]
    outs = [t.reward for t in ts]
    rewards = [[turn.reward for turn in t.turns] for t in ts]
    ok = [[turn.signals["tool_ok"] for turn in t.turns] for t in ts]
    if method in ("grpo", "drgrpo", "rloo"):
        fn = {"grpo": grpo_advantages, "drgrpo": drgrpo_advantages, "rloo": rloo_advantages}[method]
        return [np.full(len(t.turns), a) for t, a in zip(ts, fn(outs))]
    if method == "turn_grpo":
        return turn_grpo_advantages([[float(o is True) for o in row] for row in ok], outs)
    if method in ("gated", "dra"):
        imm = [[[float(o is True)] for o in row] for row in ok]
        return gated_advantages(imm, outs, tau=0.5, gated=method == "gated")
    if method == "igpo":
        return igpo_advantages([PROBS[i] for i in idx], outs)
    if method == "spa":
        return spa_advantages([CONTRIB[i] for i in idx], ok)
    return gigpo_advantages(rewards, outs, [anchor_keys(t) for t in ts])


PARAMS = {"gated": {"outcome_tau": 0.5}, "igpo": {"answer_probs": PROBS}, "spa": {"contributions": CONTRIB}}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_matches_its_estimator_per_group(method):
    trajs = batch()
    result = compute_advantages(trajs, method, **PARAMS.get(method, {}))
    for idx in GROUPS.values():
        for i, want in zip(idx, direct(method, trajs, idx)):
            np.testing.assert_allclose(result.turn_advantages[i], want, atol=1e-12)
    # the failed trajectory gets zeros, is counted, and its keep flag is off
    np.testing.assert_array_equal(result.turn_advantages[4], [0.0])
    assert result.stats.n_failed == 1 and result.stats.n_trajectories == 6 and result.stats.n_groups == 2
    assert not result.keep[4]
    assert [len(a) for a in result.turn_advantages] == [len(t.turns) for t in trajs]
    tokens = result.token_advantages(trajs)
    assert all(len(x) == len(t.token_ids) for x, t in zip(tokens, trajs))


@pytest.mark.parametrize("method", list(METHODS))
def test_failed_trajectories_do_not_enter_group_statistics(method):
    trajs = batch()
    with_failed = compute_advantages(trajs, method, **PARAMS.get(method, {}))
    kept = [i for i in range(len(trajs)) if i != 4]
    params = {k: [v[i] for i in kept] for k, v in PARAMS.get(method, {}).items() if isinstance(v, list)}
    params.update({k: v for k, v in PARAMS.get(method, {}).items() if not isinstance(v, list)})
    without = compute_advantages([trajs[i] for i in kept], method, **params)
    for i, a in zip(kept, without.turn_advantages):
        np.testing.assert_array_equal(with_failed.turn_advantages[i], a)
    assert without.stats.n_failed == 0
    assert with_failed.stats.reward_mean == without.stats.reward_mean  # the failed reward of 100 is not seen


def test_zero_variance_groups_are_counted_and_dropped():
    trajs = [make_trajectory([0.0], 1.0, group="same") for _ in range(3)]
    trajs += [make_trajectory([0.0], r, group="diff") for r in (0.0, 1.0)]
    trajs += [make_trajectory([0.0], 1.0, group="alone")]
    for method in ("grpo", "drgrpo", "rloo"):
        res = compute_advantages(trajs, method)
        assert res.stats.n_zero_variance_groups == 2  # "same" and the singleton "alone"
        assert res.stats.n_zero_advantage_groups == 2
        assert res.stats.n_singleton_groups == 1
        np.testing.assert_array_equal(res.keep, [False] * 3 + [True] * 2 + [False])
        assert all(np.all(res.turn_advantages[i] == 0.0) for i in (0, 1, 2, 5))
        assert res.stats.to_dict()["n_zero_variance_groups"] == 2


def test_igpo_keeps_collapsed_groups_that_still_carry_signal():
    # both rollouts fail (outcome 0): GRPO drops the group, IGPO's information gain keeps it
    trajs = [make_trajectory([0.0, 0.0], 0.0) for _ in range(2)]
    assert not compute_advantages(trajs, "grpo").keep.any()
    res = compute_advantages(trajs, "igpo", answer_probs=[[0.1, 0.5], [0.1, 0.1, 0.9]])  # T + 1 entries accepted
    assert res.keep.all() and res.stats.n_zero_variance_groups == 1 and res.stats.n_zero_advantage_groups == 0
    with pytest.raises(ValueError, match="answer probabilities"):
        compute_advantages(trajs, "igpo", answer_probs=[[0.1], [0.1, 0.2]])
    with pytest.raises(ValueError, match="one entry per trajectory"):
        compute_advantages(trajs, "igpo", answer_probs=[[0.1, 0.2]])


def test_gigpo_reports_step_group_sizes_and_warns_on_singletons(caplog):
    trajs = batch()
    res = compute_advantages(trajs, "gigpo")
    # anchors (the reset state, then each turn's reported state_key except the last):
    # group a (without the failed one): [open, x], [open, x, w], [open] -> open: 3, x: 2, w: 1
    # group b: [open], [open, z] -> open: 2, z: 1
    assert res.stats.step_group_sizes == {1: 2, 2: 2, 3: 1}
    assert res.stats.to_dict()["n_singleton_step_groups"] == 2
    lonely = [
        make_trajectory(
            [0.0, 1.0],
            float(i),
            signals=[{"state_key": f"{i}-{t}"} for t in range(2)],
            opening=[{"role": "user", "content": str(i)}],
        )
        for i in range(2)
    ]
    with caplog.at_level(logging.WARNING, logger="rlgym_llm.credit.api"):
        compute_advantages(lonely, "gigpo")
    assert "singletons" in caplog.text


def test_resolve_params_lists_every_problem():
    assert resolve_params("grpo", {}) == METHODS["grpo"].params()
    assert resolve_params("gated", {"tau": 0.75}).tau == 0.75
    with pytest.raises(ConfigError) as err:
        resolve_params("gated", {"bogus": 1, "gama": 0.9, "level": "turnn"})
    assert err.value.problems == [
        "unknown key `bogus`: valid keys: outcome, gate, tau, outcome_tau, immediate, channel_thresholds, gated, "
        "include_final, level, gamma, ddof, eps",
        "unknown key `gama`: did you mean `gamma`?",
        "`level=turnn` is not one of episode, turn (did you mean 'turn'?)",
    ]
    with pytest.raises(ConfigError) as err:  # range checks of the parameters' own dataclass, all at once
        resolve_params("turn_grpo", {"gamma": 1.5, "eps": -1.0, "norm": "pooled"})
    assert len(err.value.problems) == 2 and "gamma must be in [0, 1]" in str(err.value)
    with pytest.raises(ConfigError, match="unknown credit method 'gpro' \\(did you mean 'grpo'\\?\\)"):
        compute_advantages([], "gpro")


def test_per_step_inputs_are_arguments_not_settings():
    with pytest.raises(ConfigError, match="`answer_probs` is not a setting"):
        resolve_params("igpo", {"answer_probs": []})
    with pytest.raises(ValueError, match="igpo's input `answer_probs` must hold one entry per trajectory"):
        compute_advantages(batch(), "igpo")
    assert METHODS["igpo"].inputs == ("answer_probs",) and METHODS["spa"].inputs == ("contributions",)
    assert all(not m.inputs for name, m in METHODS.items() if name not in ("igpo", "spa"))


def test_empty_and_turnless_batches():
    res = compute_advantages([], "grpo")
    assert res.turn_advantages == [] and res.stats.n_groups == 0
    res = compute_advantages([make_trajectory([], 1.0), make_trajectory([0.0], 0.0)], "grpo")
    assert res.turn_advantages[0].size == 0 and res.turn_advantages[1][0] < 0


group_spec = st.lists(
    st.tuples(
        st.sampled_from("abc"),
        st.lists(st.floats(-1, 1, allow_nan=False), min_size=1, max_size=3),
        st.floats(-1, 1),
        st.booleans(),
    ),
    min_size=1,
    max_size=10,
)


@settings(deadline=None, max_examples=50)
@given(group_spec, st.floats(-10, 10), st.randoms(use_true_random=False))
def test_batch_properties(spec, shift, rnd):
    trajs = [make_trajectory(r, o, group=g, failed=f, signals=[{"tool_ok": v > 0} for v in r]) for g, r, o, f in spec]
    res = compute_advantages(trajs, "grpo")
    # failed trajectories: zero advantage, counted
    assert res.stats.n_failed == sum(f for *_, f in spec)
    for t, a in zip(trajs, res.turn_advantages):
        if t.failed:
            assert np.all(a == 0.0)
    # groups whose live outcomes are all equal are counted and get exactly zero
    live = {g: [o for gg, _, o, f in spec if gg == g and not f] for g in "abc"}
    constant = [g for g, v in live.items() if v and all(o == v[0] for o in v)]
    assert res.stats.n_zero_variance_groups == len(constant)
    for (g, *_), a in zip(spec, res.turn_advantages):
        if g in constant:
            assert np.all(a == 0.0)
    # reorder the batch: every trajectory keeps its advantages
    order = list(range(len(trajs)))
    rnd.shuffle(order)
    shuffled = compute_advantages([trajs[i] for i in order], "grpo")
    for k, i in enumerate(order):
        np.testing.assert_allclose(shuffled.turn_advantages[k], res.turn_advantages[i], atol=1e-12)
    # shift every outcome by a constant: normalised methods do not move (up to rounding)
    moved = [
        make_trajectory(r, o + shift, group=g, failed=f, signals=[{"tool_ok": v > 0} for v in r]) for g, r, o, f in spec
    ]
    for method in ("grpo", "drgrpo", "rloo", "turn_grpo"):
        base = compute_advantages(trajs, method)
        outs = {g: [o for gg, _, o, f in spec if gg == g and not f] for g in "abc"}
        if any(len(v) > 1 and 0 < np.std(v) < 1e-2 for v in outs.values()):
            continue  # near-constant groups amplify rounding
        for a, b in zip(base.turn_advantages, compute_advantages(moved, method).turn_advantages):
            np.testing.assert_allclose(a, b, atol=1e-6)
