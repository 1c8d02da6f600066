"""The picture of lesson 5: which worker saw which example ids."""

import json

import numpy as np
import pytest
from conftest import run_python
from matplotlib.figure import Figure

import pstutor


def _panels(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_images()]


def test_draw_examples_seen_draws_one_grid_per_way_with_the_counts():
    counts = {"whole dataset": [[2, 2, 2, 2], [1, 1, 1, 1]], "sharded": [[3, 0, 3, 0], [0, 1, 0, 1]]}
    fig = pstutor.draw_examples_seen(counts, title="seen")
    assert isinstance(fig, Figure)
    panels = _panels(fig)
    assert [ax.get_title(loc="left") for ax in panels] == ["whole dataset", "sharded"]
    for ax, grid in zip(panels, counts.values(), strict=True):
        assert (ax.get_images()[0].get_array() == np.array(grid)).all()
        assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 0", "worker 1"]
    sharded = [t.get_text() for t in panels[1].texts]
    assert sharded.count("2 ids") == 2 and "3" in sharded and "0" not in sharded  # no zero labels
    assert fig.get_suptitle() == "seen"
    assert panels[-1].get_xlabel() == "example id"
    colourbar = [ax for ax in fig.axes if ax not in panels]
    assert len(colourbar) == 1 and colourbar[0].get_ylabel() == "times seen"


def test_all_panels_share_one_colour_scale():
    fig = pstutor.draw_examples_seen({"a": [[1, 1]], "b": [[5, 0]]})
    assert {ax.get_images()[0].get_clim() for ax in _panels(fig)} == {(0, 5)}


def test_the_colour_bar_counts_in_whole_numbers():
    fig = pstutor.draw_examples_seen({"a": [[4, 4], [3, 3]]})
    fig.draw_without_rendering()
    (colourbar,) = [ax for ax in fig.axes if not ax.get_images()]
    ticks = colourbar.get_yticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks


def test_never_read_has_its_own_colour_and_one_read_is_clearly_tinted():
    """A shard read once by a slow worker must stand out from the ids it never read (lesson 5)."""
    fig = pstutor.draw_examples_seen({"sharded": [[7, 0, 7, 0], [0, 1, 0, 1]]})
    (image,) = _panels(fig)[0].get_images()
    colour = {count: np.array(image.cmap(image.norm(count))[:3]) for count in range(8)}
    assert len({tuple(c) for c in colour.values()}) == 8  # one colour per count
    white = np.ones(3)
    assert np.abs(colour[1] - white).max() > 0.25 and np.abs(colour[1] - colour[0]).max() > 0.15
    assert np.ptp(colour[0]) < 0.02  # 0 is a grey, not a pale green


@pytest.mark.parametrize("bad", [{}, {"empty": []}, {"flat": [1, 2, 3]}])
def test_draw_examples_seen_rejects_what_is_not_a_table(bad):
    with pytest.raises(ValueError, match="2-D table"):
        pstutor.draw_examples_seen(bad)


def test_counts_from_real_tf_data_shards_show_disjoint_rows():
    """Real tf.data sharding by worker index, drawn: each row holds only its own ids."""
    code = """
import json
import pstutor
pstutor.setup()
import numpy as np
import tensorflow as tf
counts = np.zeros((2, 8), int)
for worker in range(2):
    for example_id in tf.data.Dataset.range(8).shard(2, worker).shuffle(8).repeat(3):
        counts[worker, int(example_id)] += 1
fig = pstutor.draw_examples_seen({"sharded": counts})
ax = [a for a in fig.axes if a.get_images()][0]
print(json.dumps({"grid": ax.get_images()[0].get_array().tolist(),
                  "labels": [t.get_text() for t in ax.texts if t.get_text().endswith("ids")]}))
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    drawn = json.loads(result.stdout.strip().splitlines()[-1])
    assert drawn["grid"] == [[3, 0] * 4, [0, 3] * 4]
    assert drawn["labels"] == ["4 ids", "4 ids"]
