"""The learning curve says what the run did: no "after SFT warm-up" without a warm-up, whole-number
step ticks, and a held-out line that leaves the training lines visible where they meet."""

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from rlgym_llm.train.plots import curve_figure, learning_curve  # noqa: E402

RECORDS = [{"step": s, "success": 0.5, "reward": 0.5, "eval_success": 0.5 if s == 2 else None} for s in (1, 2, 3)]


@pytest.mark.parametrize(("after_sft", "label"), [(False, "RL step"), (True, "RL step (after SFT warm-up)")])
def test_the_x_axis_says_whether_rl_started_after_sft(after_sft, label):
    fig = curve_figure(RECORDS, "t", before=0.4, after=0.6, after_sft=after_sft)
    try:
        assert fig.axes[0].get_xlabel() == label
    finally:
        plt.close(fig)


def test_step_ticks_are_whole_numbers_and_held_out_stays_under_the_training_lines():
    fig = curve_figure(RECORDS, "t", before=0.5, after=0.5)
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        assert all(float(t).is_integer() for t in ax.get_xticks())
        lines = {line.get_label(): line for line in ax.get_lines()}
        held = next(line for name, line in lines.items() if name.startswith("held-out"))
        train = lines["train success (3-step mean)"]
        assert held.get_zorder() < train.get_zorder() and held.get_linestyle() == ":"
    finally:
        plt.close(fig)


def test_learning_curve_writes_a_png(tmp_path):
    path = learning_curve(RECORDS, tmp_path / "curve.png", "t", 0.4, 0.6)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
