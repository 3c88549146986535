"""Caught forgery is visible in training (issue 32): the step record counts the voided trajectories of
its batch (`voided`), and they stay in the loss with the reward the env paid."""

import pytest

pytest.importorskip("torch")

from rlgym_llm.train.credit_inputs import CreditAssigner
from rlgym_llm.train.loop import _select, episode_metrics
from tests.credit.trajfactory import make_trajectory


def _batch():
    honest = make_trajectory([1.0], outcome=1.0)
    voided = make_trajectory([0.0], outcome=0.0)
    voided.record_void({"voided": True, "void_reason": "canaries passed"})
    broken = make_trajectory([0.0], outcome=0.0, failed=True)
    return [honest, voided, broken]


def test_the_metrics_row_counts_voided_trajectories():
    batch = _batch()
    row = episode_metrics(batch)
    assert row["voided"] == 1 and row["trajectories"] == 3
    # the voided episode is no failure: it is one of the two whose reward (as paid: 0) is averaged
    assert row["reward"] == pytest.approx(0.5) and row["success"] == pytest.approx(0.5)
    control = episode_metrics([batch[0], batch[2]])
    assert control["voided"] == 0 and isinstance(control["voided"], int)


def test_voided_trajectories_are_trained_on():
    batch = _batch()
    credit = CreditAssigner("grpo", {})(batch)
    chosen, _, keep = _select(batch, credit, filter_zero=False)
    assert [t.voided for t in chosen] == [False, True] and list(keep) == [True, True, False]
    assert credit.turn_advantages[1][0] < 0  # its reward of 0 against the honest 1 is learned from
