"""Pictures return figures whose content can be inspected, in the course's language, legibly."""

import ast
import io
import re
import subprocess
import sys
import types
import warnings
from itertools import pairwise

import matplotlib
import numpy as np
import pytest
from conftest import ROOT
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.text import Text

import pstutor
from pstutor import compare, glossary, literals, pictures
from pstutor.build import read_lesson
from pstutor.language import say, set_language
from pstutor.tables import text_width

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def zh():
    set_language("zh")
    yield
    set_language("en")


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


class _Shard:
    """Just what `shard_rows` reads from a variable: name, device, shape and dtype."""

    def __init__(self, name: str, rows: int, cols: int, task: int):
        self.name, self.device = f"{name}:0", f"/job:ps/replica:0/task:{task}/device:CPU:0"
        self.shape = types.SimpleNamespace(as_list=lambda: [rows, cols], num_elements=lambda: rows * cols)
        self.dtype = types.SimpleNamespace(size=4)


def _sharded(*shards: _Shard):
    return types.SimpleNamespace(variables=list(shards))


def _steps():
    return [pstutor.Step(n, n % 3 if n else 0, 0.03 * n, 0.03 * n + 0.01) for n in range(31)]


def _every_picture() -> dict[str, Figure]:
    """Every picture helper, drawn with the words the lessons give them (in Chinese, as their
    strings tables translate them)."""
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
               "ps": ["10.0.0.4:2222"], "evaluator": ["10.0.0.5"]}
    fixed = [_sharded(_Shard("embedding/part_0", 512, 64, 0), _Shard("embedding/part_1", 512, 64, 1)),
             _sharded(_Shard("bias/part_0", 32, 1, 0), _Shard("bias/part_1", 32, 1, 1))]
    results = [{"strategy": s, "training": t, "examples_per_s": e, "startup_s": u, "loss": loss}
               for s, t, e, u, loss in [("none", "-", 4e4, 2.7, 0.4771), ("ps", "async", 4e3, 3.9, 0.4781)]]
    train_loss, train_accuracy = say("training loss", "训练损失"), say("training accuracy", "训练准确率")
    first = say("first run (interrupted)", "第一次训练（被中断）")
    resumed = say("resumed run", "恢复后的训练")
    nan = float("nan")
    return {
        "cluster": pstutor.draw_cluster(cluster),
        "shards": pstutor.draw_shards(fixed),
        "curves": pstutor.plot_curves({train_loss: [0.7, 0.5, 0.4]},
                                      xlabel=say("scheduled step", "步骤编号（按调度顺序）")),
        "resumed": pstutor.plot_curves({first: [0.7, 0.5, nan], resumed: [nan, nan, 0.45]},
                                       marks={say("interrupted after epoch 2", "第 2 个周期之后中断"): 2.5},
                                       levels={say("a fresh model", "新模型"): 0.8}),
        "timeline": pstutor.draw_timeline(_steps(), epoch_starts=[1, 11, 21], retried=[30],
                                          marks={say("worker 1 killed", "1 号工作进程被杀掉"): 0.5},
                                          down={1: (0.5, 0.7)}),
        "examples": pstutor.draw_examples_seen({say("sharded by worker index", "按工作进程编号分片"):
                                                [[1, 0] * 8, [0, 2] * 8]}),
        "train_eval": pstutor.plot_train_eval(
            {train_loss: [(10, 0.6), (20, 0.5)], train_accuracy: [(10, 0.6), (20, 0.7)]},
            {say("sidecar evaluation loss", "边车评估损失"): [(10, 0.62), (20, 0.49)]},
            panels=("loss", "accuracy"),
            title=say("Training (per epoch) and sidecar evaluation (per checkpoint)",
                      "训练（每个周期）与边车评估（每个检查点）")),
        "comparison": pstutor.draw_comparison(results),
    }


def _all_text(fig: Figure) -> list[Text]:
    fig.draw_without_rendering()  # creates the tick labels
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_in_chinese_every_picture_speaks_chinese_and_has_a_glyph_for_every_character(zh):
    with matplotlib.rc_context({"font.family": ["sans-serif"]}), \
            warnings.catch_warnings(record=True) as caught:  # as if no font had been added yet
        warnings.simplefilter("always")
        figures = _every_picture()
        for fig in figures.values():
            fig.savefig(io.BytesIO(), format="png")
    tofu = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert not tofu, tofu[:3]
    for name, fig in figures.items():
        assert any(CJK.search(t.get_text()) for t in _all_text(fig)), f"{name} has no Chinese text"


def test_in_english_no_picture_has_chinese_text():
    for name, fig in _every_picture().items():
        assert not any(CJK.search(t.get_text()) for t in _all_text(fig)), name


def test_tofu_is_caught_without_the_course_font(zh):
    """The check above can fail: the same Chinese text in matplotlib's own font is tofu."""
    fig = Figure()
    fig.text(0.5, 0.5, "工作进程", family="DejaVu Sans")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(io.BytesIO(), format="png")
    assert any("missing from font" in str(w.message) for w in caught)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_picture_fits_the_notebook_width_and_its_text_is_at_least_9_points(lang):
    set_language(lang)
    try:
        for name, fig in _every_picture().items():
            box = fig.get_tightbbox()
            assert box.width <= pictures.WIDTH + 0.05, f"{name} is {box.width:.1f} in wide"
            small = {t.get_text(): t.get_fontsize() for t in _all_text(fig)
                     if t.get_fontsize() < pictures.MIN_POINTS}
            assert not small, f"{name}: text under {pictures.MIN_POINTS} pt: {small}"
    finally:
        set_language("en")


def test_a_figure_shows_the_course_words_in_chinese_and_leaves_api_names_and_lesson_phrases(zh):
    """The helpers' words come from the one table (glossary.WORDS); a lesson's own phrases reach
    the helper already translated by its strings table, so the helper leaves what it does not know."""
    assert pictures.words("custom loop") == "自定义训练循环"
    assert pictures.words("FixedShardsPartitioner(num_shards=2)") == "FixedShardsPartitioner(num_shards=2)"
    assert pictures.words("训练损失") == "训练损失"
    fig = pstutor.plot_curves({"Model.fit": [0.7, 0.5], "custom loop": [0.7, 0.4]},
                              title="Training loss per epoch")  # the demo's figure
    assert {"自定义训练循环", "每个周期的训练损失", "Model.fit"} <= set(pictures.figure_words(fig))
    set_language("en")
    assert pictures.words("custom loop") == "custom loop"


def _picture_words(source: str) -> list[str]:
    """The strings a code cell gives a picture helper: keyword values and dict-literal keys."""
    found = []
    for call in ast.walk(ast.parse(source)):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and re.match(r"(draw|plot)_", call.func.attr)):
            continue
        values = [k.value for k in call.keywords if k.arg in {"title", "xlabel", "ylabel", "marks", "panels"}]
        for node in [*call.args, *values]:
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node.value)
            if isinstance(node, ast.Dict | ast.Tuple | ast.List):
                keys = node.keys if isinstance(node, ast.Dict) else node.elts
                found += [k.value for k in keys if isinstance(k, ast.Constant)]
    return found


def test_every_phrase_a_lesson_gives_a_picture_has_chinese_words_or_is_an_api_name():
    """A new English title in a lesson would show in the Chinese notebook: translate it in the
    lesson's strings table (or, for a word the helpers show too, in glossary.WORDS)."""
    prose = re.compile(r"[a-z]{2,} [a-z]{2,}|^[a-z]+$")  # "training loss", "round"; not "Model.fit"
    missing = []
    for path in sorted((ROOT / "lessons").rglob("*.md")):
        cells = read_lesson(path)
        strings = {k for c in cells if c.kind == "strings" for k in literals.parse_table(c.source)}
        for cell in cells:
            if cell.kind == "code":
                missing += [(path.name, w) for w in _picture_words(cell.source)
                            if prose.search(w) and w not in glossary.WORDS and w not in strings]
    assert not missing


def test_draw_cluster_shows_every_task_with_its_address_and_routes_coordinator_links_round_workers():
    cluster = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"],
               "ps": ["10.0.0.4:2222"], "evaluator": ["10.0.0.5:2222"]}
    fig = pstutor.draw_cluster(cluster)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch) and p.get_facecolor()[3] > 0]
    assert len(boxes) == 5  # the tasks (the training cluster's frame is empty)
    texts = _texts(fig)
    for name in ("coordinator (chief)", "worker 0", "worker 1", "ps 0", "evaluator 0"):
        assert name in texts
    for addresses in cluster.values():
        assert addresses[0] in texts
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 2 + 2 * 1 + 1 + 1  # chief->workers, workers->ps, chief->ps, evaluator's checkpoints
    worker_boxes = [b for b in boxes if b.get_x() + b.get_width() / 2 == pytest.approx(5.0)]
    [detour] = [a for a in arrows if a.get_linestyle() == "--"]  # chief->ps: above every worker box
    lane = max(y for _, y in detour.get_path().vertices)
    assert all(lane > b.get_y() + b.get_height() for b in worker_boxes)
    assert len(ax.get_legend().get_texts()) == 3 + 1  # and the evaluator's


def test_draw_cluster_accepts_a_cluster_spec_like_object():
    class Spec:
        def as_dict(self):
            return {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2", "127.0.0.1:3"]}

    class Resolver:
        def cluster_spec(self):
            return Spec()

    texts = _texts(pstutor.draw_cluster(Resolver()))
    assert "this process" in texts and "ps 1" in texts


def test_draw_shards_gives_each_variable_its_own_scale_and_labels_every_shard():
    fixed = [_sharded(_Shard("embedding/part_0", 512, 64, 0), _Shard("embedding/part_1", 512, 64, 1)),
             _sharded(_Shard("bias/part_0", 32, 1, 0), _Shard("bias/part_1", 32, 1, 1))]
    whole = [_sharded(_Shard("embedding/part_0", 512, 64, 0), _Shard("embedding/part_1", 512, 64, 1)),
             _sharded(_Shard("bias", 64, 1, 0))]
    split_fig, whole_fig = pstutor.draw_shards(fixed), pstutor.draw_shards(whole)
    assert [ax.get_title() for ax in split_fig.axes] == ["embedding (256 KiB)", "bias (256 B)"]
    assert _texts(split_fig.axes[1].figure) and [t.get_text() for t in split_fig.axes[1].texts] == [
        "shard 0 · 128 B", "shard 1 · 128 B"]
    assert [t.get_text() for t in whole_fig.axes[1].texts] == ["whole · 256 B", "nothing"]
    assert split_fig.axes[1].get_xlim()[1] < 300  # bytes, not on the table's KiB scale


def test_plot_curves_draws_one_labelled_line_per_curve_from_the_first_x():
    fig = pstutor.plot_curves({"train": [3, 2, 1], "eval": [3.5, 2.5, 2]}, title="loss", first=0)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["train", "eval"]
    assert list(ax.get_lines()[1].get_ydata()) == [3.5, 2.5, 2]
    assert list(ax.get_lines()[0].get_xdata()) == [0, 1, 2]
    assert ax.get_title() == "loss"


def test_plot_curves_draws_marks_and_levels_as_named_lines_in_a_legend_below_the_axes():
    fig = pstutor.plot_curves({"first run": [0.7, 0.5, float("nan")], "resumed": [float("nan"), 0.5, 0.4]},
                              marks={"interrupted": 2.5}, levels={"a fresh model": 0.9})
    ax = fig.axes[0]
    vertical, horizontal = ax.get_lines()[2:]
    assert list(vertical.get_xdata()) == [2.5, 2.5] and vertical.get_linestyle() == "--"
    assert list(horizontal.get_ydata()) == [0.9, 0.9] and horizontal.get_linestyle() == ":"
    assert ax.get_legend() is None  # the legend is the figure's, below the axes, covering no line
    legend = fig.legends[0]
    names = ["first run", "resumed", "interrupted", "a fresh model"]
    assert [t.get_text() for t in legend.get_texts()] == names
    fig.draw_without_rendering()
    assert legend.get_window_extent().y1 < ax.get_window_extent().y0
    assert pstutor.plot_curves({"loss": [1, 2]}).axes[0].get_legend() is not None  # without: as before


def test_draw_timeline_shades_only_the_pauses_between_epochs_and_names_earlier_steps():
    steps = [pstutor.Step(0, 0, 0.0, 0.01),  # an earlier section's lone step, then two epochs
             pstutor.Step(1, 0, 0.10, 0.11), pstutor.Step(2, 1, 0.12, 0.13),
             pstutor.Step(3, 1, 0.30, 0.31), pstutor.Step(4, 0, 0.32, 0.33)]
    fig = pstutor.draw_timeline(steps, epoch_starts=[1, 3], before="section 7")
    ax = fig.axes[0]
    bands = [p for p in ax.patches if p.get_height() != 0.5]  # axvspan: the full height
    assert len(bands) == 1  # between epoch 1 and epoch 2 only, not before epoch 1
    (band,) = bands
    assert band.get_x() == pytest.approx(0.13) and band.get_width() == pytest.approx(0.30 - 0.13)
    assert {"section 7", "epoch 1", "epoch 2"} <= set(_texts(fig))
    unnamed = pstutor.draw_timeline(steps, epoch_starts=[1, 3])
    assert "section 7" not in _texts(unnamed) and "epoch 1" in _texts(unnamed)


def test_plot_train_eval_puts_each_curve_in_the_panel_of_its_word():
    fig = pstutor.plot_train_eval({"training loss": [(1, 0.5)], "training accuracy": [(1, 0.7)]},
                                  {"evaluation loss": [(1, 0.6)]}, panels=("loss", "accuracy"))
    labels = [[line.get_label() for line in ax.get_lines()] for ax in fig.axes]
    assert labels == [["training loss", "evaluation loss"], ["training accuracy"]]
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss", "accuracy"]


def test_toy_data_is_deterministic_and_balanced_enough():
    x1, y1 = pstutor.toy_classification(500, 4, seed=3)
    x2, y2 = pstutor.toy_classification(500, 4, seed=3)
    assert (x1 == x2).all() and (y1 == y2).all()
    assert x1.shape == (500, 4) and x1.dtype == "float32"
    assert 0.3 < y1.mean() < 0.7


def test_draw_timeline_marks_moments_epochs_retried_steps_and_a_dead_worker():
    steps = [pstutor.Step(0, 0, 0.0, 0.1), pstutor.Step(1, 1, 0.05, 0.2), pstutor.Step(2, 0, 0.3, 0.4)]
    fig = pstutor.draw_timeline(steps, marks={"worker 1 killed": 0.12}, epoch_starts=[2], retried=[2],
                                down={1: (0.12, 0.35)})
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_height() == 0.5 and p.get_width() > 0]
    assert len(bars) == 1 + 3  # worker 1's time down, then the three steps
    assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 0", "worker 1"]
    assert list(ax.lines[0].get_xdata()) == [0.12, 0.12]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "worker 1 killed (0.12 s)" in legend and "worker 1 down" in legend
    assert any(t.startswith("retried") for t in legend)
    assert "epoch 1" in _texts(fig) and bars[3].get_hatch() == "///" and "retried" in _texts(fig)
    assert {"0", "1", "2"} <= set(_texts(fig))


def test_draw_timeline_leaves_out_step_numbers_that_would_overlap():
    crowded = [pstutor.Step(n, 0, n * 1e-4, n * 1e-4 + 5e-5) for n in range(200)]
    numbers = [t for t in pstutor.draw_timeline(crowded).axes[0].texts if t.get_text().isdigit()]
    boxes = sorted((t.get_window_extent() for t in numbers), key=lambda b: b.x0)
    assert 5 < len(numbers) < 200
    assert all(a.x1 <= b.x0 for a, b in pairwise(boxes))


def test_draw_comparison_names_the_cores_of_this_machine_and_zooms_the_loss_axis():
    results = [{"strategy": s, "training": "sync", "examples_per_s": 100.0, "startup_s": 1.0, "loss": loss}
               for s, loss in (("none", 0.4771), ("mwms", 0.4780))]
    fig = pstutor.draw_comparison(results)
    assert f"({pictures.cpu_cores()} CPU cores)" in fig.get_suptitle()
    assert "(3 CPU cores)" in pstutor.draw_comparison(results, cores=3).get_suptitle()
    low, high = fig.axes[2].get_xlim()
    assert low > 0.47 and high < 0.49  # the 0.0009 difference spans much of the panel


def test_draw_comparison_shows_every_round_on_a_log_axis_with_the_lessons_row_labels():
    """All four strategies readable side by side: rounds, medians and spreads on a log axis."""
    rounds = {"none": [1.3e5, 1.2e5, 1.4e5], "mirrored": [5e4, 6e4, 5.5e4], "mwms": [1.4e4, 1.5e4, 1.3e4],
              "ps": [5e3, 6e3, 4e3]}
    results = [{"strategy": s, "training": t, "examples_per_s": rounds[s], "startup_s": [3.0, 4.0, 5.0],
                "loss": [0.46, 0.461, 0.462]} for s, t in (("none", "-"), ("mirrored", "sync"),
                                                            ("mwms", "sync"), ("ps", "async"))]
    labels = {"none": "no strategy", "mirrored": "MirroredStrategy", "mwms": "MultiWorkerMirroredStrategy",
              "ps": "ParameterServerStrategy"}
    fig = pstutor.draw_comparison(results, labels=labels, cores=2)
    _all_text(fig)  # draws the tick labels
    speed = fig.axes[0]
    assert speed.get_xscale() == "log"
    assert [t.get_text() for t in speed.get_yticklabels()] == list(labels.values())
    low, high = speed.get_xlim()
    assert low < 4e3 and high > 1.4e5  # every round of every strategy inside the panel
    ticks = [t.get_text() for t in speed.get_xticklabels() if t.get_text()]
    assert ticks and all(re.fullmatch(r"\d{1,3}(,\d{3})*", t) for t in ticks), ticks  # one format
    rings = [c for c in speed.collections if len(c.get_offsets()) == 3]
    assert len(rings) == 4  # one ring per round, for every strategy
    medians = [t.get_text() for t in speed.texts]
    assert medians == ["130,000", "55,000", "14,000", "5,000"]
    assert "(2 CPU cores)" in fig.get_suptitle()


def test_format_table_speaks_the_course_language_and_aligns_chinese(zh):
    rows = [{"strategy": "ps", "training": "async", "replicas": 1, "global_batch": 32,
             "examples_per_s": 4000.0, "steps_per_s": 125.0, "loss": 0.25, "startup_s": 3.0,
             "warmup_s": 1.0,
             "changed_lines": 4}]
    header, rule, row = compare.format_table(rows).splitlines()
    assert header.split()[:3] == ["策略", "训练方式", "副本数"] and row.split()[1] == "异步"
    assert text_width(header) == len(rule)  # wide characters counted twice: columns line up


def test_setup_in_chinese_registers_the_course_font_in_a_fresh_process():
    code = ("import pstutor, matplotlib; pstutor.setup(lang='zh'); "
            "print(matplotlib.rcParams['font.family'][-1])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "Noto Sans SC", out.stderr[-2000:]


def test_draw_timeline_zoom_adds_a_magnified_panel():
    fig = pstutor.draw_timeline(_steps(), retried=[30], zoom=(0.5, 0.95))
    assert len(fig.axes) == 2 and fig.axes[1].get_xlim() == (0.5, 0.95)
    assert "retried" in [t.get_text() for t in fig.axes[1].texts]


class _Table:
    """A per-worker variable as `TimelineRecorder.steps` reads it: one array per worker."""

    def __init__(self, *values):
        self.values = [np.asarray(v) for v in values]

    def read_all(self):
        return [types.SimpleNamespace(numpy=lambda v=v: v) for v in self.values]


def test_recorder_keeps_rows_it_read_from_a_worker_that_died_and_skips_unwritten_rows():
    recorder = object.__new__(pstutor.TimelineRecorder)
    recorder.capacity, recorder.dropped, recorder._read, recorder._traced = 4, 0, set(), True
    recorder._rows = _Table(2, 2)  # worker 1's second row is counted but not written yet
    recorder._table = _Table([[10.0, 10.1], [10.2, 10.3], [0, 0], [0, 0]],
                             [[10.05, 10.15], [0, 0], [0, 0], [0, 0]])
    assert [(s.worker, round(s.start, 2)) for s in recorder.steps()] == [(0, 0.0), (1, 0.05), (0, 0.2)]
    recorder._rows = _Table(3, 1)  # worker 1 was killed and restarted: a new, shorter table
    recorder._table = _Table([[10.0, 10.1], [10.2, 10.3], [10.4, 10.5], [0, 0]],
                             [[11.0, 11.1], [0, 0], [0, 0], [0, 0]])
    steps = recorder.steps()
    assert [(s.step, s.worker) for s in steps] == [(0, 0), (1, 1), (2, 0), (3, 0), (4, 1)]
    assert recorder.origin == 10.0


def test_draw_timeline_marks_a_retried_step_of_a_millisecond_visibly(zh):
    steps = [pstutor.Step(n, 0, n * 0.1, n * 0.1 + 0.05) for n in range(20)]
    steps.append(pstutor.Step(20, 0, 2.0, 2.001))  # a retried step one millisecond long
    fig = pstutor.draw_timeline(steps, retried=[20], marks={"1 号工作进程被杀掉": 0.5})  # lesson 07's
    ax = fig.axes[0]
    [marker] = [line for line in ax.lines if line.get_marker() == "v"]
    assert marker.get_xdata()[0] == pytest.approx(2.0005)  # above the bar, whatever its width
    texts = _texts(fig)
    assert "重试" in texts and "20" in texts
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "1 号工作进程被杀掉（0.50 秒）" in legend  # the unit of the axis, not "s"
    [retried_handle] = [h for h in fig.legends[0].legend_handles if getattr(h, "get_marker", None)
                        and h.get_marker() == "v"]
    assert retried_handle.get_color() == marker.get_color()  # the legend shows what the chart shows
    edges = {tuple(round(c, 3) for c in p.get_edgecolor()[:3]) for p in ax.patches if p.get_height() == 0.5}
    assert (0.0, 0.0, 0.0) not in edges  # thin bars keep their own colour's shade, not grey


def test_draw_cluster_keeps_the_evaluator_outside_the_training_cluster():
    plan = {"chief": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222"], "ps": ["10.0.0.4:2222"],
            "evaluator": ["10.0.0.5"]}
    fig = pstutor.draw_cluster(plan)
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    boundary = next(p for p in boxes if p.get_facecolor()[3] == 0)  # the dashed, empty frame
    evaluator = next(p for p in boxes if p.get_y() < boundary.get_y())  # below, outside the frame
    assert evaluator.get_y() + evaluator.get_height() < boundary.get_y()
    assert any("training cluster" in t.get_text() for t in ax.texts)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(text.startswith("evaluator: reads the checkpoints") for text in legend)
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert len(arrows) == 1 + 1 + 1 + 1  # schedule, variables, create, and the evaluator's checkpoints
    no_evaluator = pstutor.draw_cluster({k: v for k, v in plan.items() if k != "evaluator"})
    assert not any("training cluster" in t.get_text() for t in no_evaluator.axes[0].texts)


def test_draw_cluster_draws_the_task_links_both_ways_and_the_checkpoints_one_way():
    """Workers read variables and send updates back, the coordinator creates, reads and saves
    them, and gets back the results of the functions it schedules (two heads each); the
    evaluator only reads the checkpoints."""
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"], "evaluator": ["127.0.0.1:4"]}
    ax = pstutor.draw_cluster(cluster).axes[0]
    heads = {}
    for arrow in (p for p in ax.patches if isinstance(p, FancyArrowPatch)):
        heads.setdefault(arrow.get_edgecolor()[:3], set()).add(type(arrow.get_arrowstyle()).__name__)
    colour = matplotlib.colors.to_rgb
    assert heads[colour(pictures._LINKS["variables"])] == {"CurveFilledAB"}
    assert heads[colour(pictures._LINKS["schedule"])] == {"CurveFilledAB"}
    assert heads[colour(pictures._LINKS["create"])] == {"CurveFilledAB"}
    assert heads[colour(pictures._LINKS["checkpoints"])] == {"CurveFilledB"}


def test_draw_cluster_numbers_the_tasks_in_chinese_as_the_prose_does(zh):
    """Workers and ps alike read "0 号…" in Chinese, the form the lessons' prose uses."""
    texts = _texts(pstutor.draw_cluster({"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2", "127.0.0.1:3"]}))
    assert {"0 号工作进程", "0 号参数服务器", "1 号参数服务器"} <= set(texts)
    assert not any(t.startswith("参数服务器 ") for t in texts)


def test_draw_shards_names_the_rows_as_the_cluster_figure_does_and_titles_in_chinese(zh):
    """In Chinese the rows are 0 号参数服务器, 1 号… (the cluster figure's words), not "ps 0"."""
    fixed = [_sharded(_Shard("embedding/part_0", 512, 64, 0), _Shard("embedding/part_1", 512, 64, 1))]
    fig = pstutor.draw_shards(fixed)
    fig.draw_without_rendering()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["0 号参数服务器", "1 号参数服务器"]
    assert fig.axes[0].get_title() == "变量 embedding（256 KiB）"  # the name is the code's, the words Chinese
    set_language("en")
    fig = pstutor.draw_shards(fixed)
    fig.draw_without_rendering()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["ps 0", "ps 1"]


def test_a_figure_lists_its_words_in_its_text_form_with_digits_hidden():
    """Stored figures can be read as text: the words in the notebook's language, no run-specific digits."""
    set_language("zh")
    try:
        figure = pictures.plot_curves({"loss": [1.0, 0.5]}, title="Training loss per epoch", xlabel="epoch")
        text = repr(figure)
    finally:
        set_language("en")
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0].startswith("<Figure size ")
    assert "每个周期的训练损失" in lines and "周期" in lines
    assert not any(line.strip().isdigit() for line in lines[1:])
    english = repr(pictures.draw_cluster({"worker": ["127.0.0.1:1234"], "ps": ["127.0.0.1:99"]}))
    assert "worker #" in [line.strip() for line in english.splitlines()] and "1234" not in english


def test_draw_shards_spans_each_variable_whole_and_totals_every_ps():
    """The axis is the variable's whole size (a half is drawn half as long); a line totals each ps."""
    split = [_sharded(_Shard("embedding/part_0", 512, 64, 0), _Shard("embedding/part_1", 512, 64, 1))]
    whole = [_sharded(_Shard("embedding", 1024, 64, 0)), _sharded(_Shard("bias", 64, 1, 1))]
    split_fig, whole_fig = pstutor.draw_shards(split), pstutor.draw_shards(whole)
    assert split_fig.axes[0].get_xlim() == whole_fig.axes[0].get_xlim()
    assert split_fig.axes[0].get_xlim()[1] >= 256
    assert "bytes per ps: ps 0 128 KiB, ps 1 128 KiB" in [t.get_text() for t in split_fig.texts]
    assert "bytes per ps: ps 0 256 KiB, ps 1 256 B" in [t.get_text() for t in whole_fig.texts]


def test_draw_shards_shortens_a_label_that_is_wider_than_its_bar():
    """Three 85 KiB shards on one ps of a 256 KiB panel: "shard 0 · 85.5 KiB" would overflow."""
    three = [_sharded(*(_Shard(f"emb/part_{i}", 342, 64, 0) for i in range(3)),
                      _Shard("emb/part_3", 342, 64, 1)),
             _sharded(_Shard("bias/part_0", 32, 1, 0), _Shard("bias/part_1", 32, 1, 1))]
    fig = pstutor.draw_shards(three)
    ax = fig.axes[0]
    bars = [p for p in ax.patches if p.get_width() > 0]
    assert len(ax.texts) == len(bars) == 4
    for text, bar in zip(ax.texts, bars, strict=True):
        assert text.get_window_extent().width <= bar.get_window_extent().width
    assert ax.texts[0].get_text() != "shard 0 · 85.5 KiB"  # shortened
    assert ax.texts[0].get_text().startswith("0")  # still names its shard


def test_draw_timeline_has_no_row_tick_marks_that_read_as_a_minus_sign():
    """A step's number written next to the y-axis must not get a tick mark in front of it ("-4")."""
    fig = pstutor.draw_timeline([pstutor.Step(4, 1, 0.0, 0.05), pstutor.Step(5, 0, 0.0, 0.05)],
                                zoom=(0.0, 0.05))
    for ax in fig.axes:
        assert all(tick.tick1line.get_markersize() == 0 for tick in ax.yaxis.get_major_ticks())
        assert [t.get_text() for t in ax.get_yticklabels()] == ["worker 0", "worker 1"]


def test_plot_train_eval_leaves_room_for_a_diamond_at_the_last_step():
    """The evaluator's large hollow diamond at the last step and the top value is not clipped."""
    fig = pstutor.plot_train_eval(  # lesson 06's numbers: the diamond is the lowest loss
        {"training loss": [(5, 0.8), (10, 0.7), (15, 0.646)], "training accuracy": [(5, .33), (15, .61)]},
        {"validation loss": [(5, 0.708), (10, 0.629), (15, 0.59)],
         "validation accuracy": [(5, .58), (15, .76)],
         "sidecar evaluation loss": [(15, 0.59)], "sidecar evaluation accuracy": [(15, .76)]},
        panels=("loss", "accuracy"), title="title")
    fig.canvas.draw()
    ax = fig.axes[0]
    diamond = ax.lines[-1]
    box = ax.get_window_extent()
    x, y = ax.transData.transform((15, 0.59))
    # a diamond ("D") is a square of the marker's size turned by 45 degrees: its tips reach size / sqrt(2)
    half = (diamond.get_markersize() / 2 ** 0.5 + diamond.get_markeredgewidth() / 2) * fig.dpi / 72
    assert box.x0 <= x - half and x + half <= box.x1, (x, half, box)
    assert box.y0 <= y - half and y + half <= box.y1, (y, half, box)
