"""Pictures return figures whose content can be inspected."""

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

import pstutor


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_draw_cluster_shows_every_task_with_its_address_and_the_connections():
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
               "ps": ["10.0.0.4:2222"], "evaluator": ["10.0.0.5:2222"]}
    fig = pstutor.draw_cluster(cluster)
    assert isinstance(fig, Figure)
    boxes = [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
    assert len(boxes) == 5
    texts = _texts(fig)
    for name in ("chief (coordinator)", "worker 0", "worker 1", "ps 0", "evaluator 0"):
        assert name in texts
    for addresses in cluster.values():
        assert addresses[0] in texts
    arrows = [t for t in fig.axes[0].texts if getattr(t, "arrow_patch", None) is not None]
    assert len(arrows) == 2 + 2 * 1 + 1  # chief->workers, workers->ps, chief->ps


def test_draw_cluster_accepts_a_cluster_spec_like_object():
    class Spec:
        def as_dict(self):
            return {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2", "127.0.0.1:3"]}

    class Resolver:
        def cluster_spec(self):
            return Spec()

    texts = _texts(pstutor.draw_cluster(Resolver()))
    assert "this process" in texts and "ps 1" in texts


def test_plot_curves_draws_one_labelled_line_per_curve():
    fig = pstutor.plot_curves({"train": [3, 2, 1], "eval": [3.5, 2.5, 2]}, title="loss")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["train", "eval"]
    assert list(ax.get_lines()[1].get_ydata()) == [3.5, 2.5, 2]
    assert ax.get_title() == "loss"


def test_toy_data_is_deterministic_and_balanced_enough():
    x1, y1 = pstutor.toy_classification(500, 4, seed=3)
    x2, y2 = pstutor.toy_classification(500, 4, seed=3)
    assert (x1 == x2).all() and (y1 == y2).all()
    assert x1.shape == (500, 4) and x1.dtype == "float32"
    assert 0.3 < y1.mean() < 0.7


def test_draw_timeline_marks_named_moments():
    steps = [pstutor.Step(0, 0, 0.0, 0.1), pstutor.Step(1, 1, 0.05, 0.2), pstutor.Step(2, 0, 0.1, 0.3)]
    fig = pstutor.draw_timeline(steps, marks={"worker 1 killed": 0.12})
    ax = fig.axes[0]
    assert len(ax.patches) == 3
    assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 0", "worker 1"]
    assert list(ax.lines[0].get_xdata()) == [0.12, 0.12]
    assert "worker 1 killed" in [t.get_text() for t in ax.texts]
