"""Pictures that make the course's ideas visible. Each returns a matplotlib `Figure`.

Figures are created without pyplot, so a notebook shows each exactly once (as the cell's
value) and the command line can save them without a display. They speak the course's
language (`pstutor.setup(lang=...)`): the helpers' own words are said in both languages, and
a title, label or curve name a lesson passes is looked up in `pstutor.glossary.WORDS` (a
lesson's own phrases come translated from its strings table); numbers and API names stay as
they are. In Chinese the CJK glyphs come from the font of `pstutor.fonts`.

Every figure is at most `WIDTH` inches wide and its text at least `MIN_POINTS` points, so
it is shown unscaled and legible in a JupyterLab or Colab output cell (about 800 pixels).
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path

from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch
from matplotlib.path import Path as CurvePath
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from pstutor.fonts import use_language_font
from pstutor.glossary import words
from pstutor.language import current_language, say

WIDTH = 8.0  # inches; at matplotlib's 100 dpi an 800-pixel image, shown unscaled
MIN_POINTS = 9.0
ROLE_COLOURS = {"chief": "#f4a259", "worker": "#5b8e7d", "ps": "#8cb369", "evaluator": "#e6a0a4"}


class CourseFigure(Figure):
    """A figure whose text form lists the words it shows, one per line.

    A notebook stores a figure as a picture and as text; with the words in the text, the
    tests can read a stored figure as they read printed lines (a Chinese figure with an
    English label fails, a figure that stops showing its marker changes). Digits are written
    `#`, so measured numbers in labels do not make the text change from run to run.
    """

    def __repr__(self) -> str:
        plain = super().__repr__().replace(type(self).__name__, "Figure", 1)  # <Figure size 800x400 ...>
        return "\n".join([plain, *(f"  {text}" for text in figure_words(self))])


def figure_words(fig: Figure) -> list[str]:
    """The texts a figure shows that contain a letter (titles, labels, legends, word ticks), in order."""
    fig.draw_without_rendering()  # tick labels and legends exist only once the figure is laid out
    found: list[str] = []
    for artist in fig.findobj(Text):
        text = artist.get_text().strip()
        if artist.get_visible() and re.search(r"[^\W\d_]", text):
            text = re.sub(r"\d+", "#", " ".join(text.split()))
            if text not in found:
                found.append(text)
    return found


def _figure(width: float, height: float, **kwargs) -> Figure:
    """A new figure, with the CJK font ready when the course speaks Chinese."""
    use_language_font()
    return CourseFigure(figsize=(min(width, WIDTH), height), **kwargs)


def cluster_jobs(cluster) -> dict[str, list[str]]:
    """Job -> addresses from a dict, a `tf.train.ClusterSpec` or a cluster resolver."""
    if hasattr(cluster, "cluster_spec"):
        cluster = cluster.cluster_spec()
    if hasattr(cluster, "as_dict"):
        cluster = cluster.as_dict()
    return {job: list(addresses) for job, addresses in dict(cluster).items()}


_HALF_W, _HALF_H = 1.05, 0.3  # half the size of a task's box, in data units (10 = the width)
_LINKS = {"schedule": "#555555", "variables": "#4f7f2a", "create": "#d9822b", "checkpoints": "#a23b40"}


def draw_cluster(cluster, title: str | None = None) -> Figure:
    """Topology: coordinator, workers and ps as boxes, arrows for who talks to whom.

    The coordinator's own links to the ps go round the workers, above or below them, so
    no arrow crosses a box it does not belong to.
    """
    jobs = cluster_jobs(cluster)
    chief = jobs.get("chief", [say("this process", "当前进程")])[0]
    workers, ps = jobs.get("worker", []), jobs.get("ps", [])
    evaluators = jobs.get("evaluator", [])
    rows = max(len(workers), len(ps), 1)
    chief_xy = (1.25, rows / 2)
    worker_xy = [(5.0, y) for y in _column(len(workers), rows)]
    ps_xy = [(8.75, y) for y in _column(len(ps), rows)]
    top = max((y for _, y in worker_xy + ps_xy), default=rows / 2) + _HALF_H + 0.35
    bottom = min((y for _, y in worker_xy + ps_xy), default=rows / 2) - _HALF_H - 0.35
    evaluator_y = bottom - 0.45 - _HALF_H * 2
    fig = _figure(WIDTH, 1.2 + 0.8 * (top - (evaluator_y - 0.5 if evaluators else bottom - 0.3)))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(evaluator_y - 0.5 if evaluators else bottom - 0.3, top + 0.4)
    ax.axis("off")
    ax.set_title(words(title) if title else say("Parameter server cluster", "参数服务器集群"))
    for xy in worker_xy:
        # both ways: the coordinator schedules functions, their results (RemoteValues) come back
        _link(ax, _edge(chief_xy, +1), _edge(xy, -1), _LINKS["schedule"], style="<|-|>")
        for target in ps_xy:  # both ways: a worker reads the variables and sends updates back
            _link(ax, _edge(xy, +1), _edge(target, -1), _LINKS["variables"], style="<|-|>")
    above = [xy for xy in ps_xy if xy[1] >= chief_xy[1]]
    below = [xy for xy in ps_xy if xy[1] < chief_xy[1]]
    for lane, targets, side in ((top, above, +1), (bottom, below, -1)):
        for k, target in enumerate(targets if side > 0 else targets[::-1]):
            _detour(ax, chief_xy, target, lane + side * 0.15 * k, side)
    _box(ax, chief_xy, say("coordinator (chief)", "协调器（chief）"), chief, ROLE_COLOURS["chief"])
    for i, (xy, address) in enumerate(zip(worker_xy, workers, strict=True)):
        _box(ax, xy, say(f"worker {i}", f"{i} 号工作进程"), address, ROLE_COLOURS["worker"])
    for i, (xy, address) in enumerate(zip(ps_xy, ps, strict=True)):
        _box(ax, xy, say(f"ps {i}", f"{i} 号参数服务器"), address, ROLE_COLOURS["ps"])
    for i, address in enumerate(evaluators):
        _box(ax, (1.25 + 2.5 * i, evaluator_y), say(f"evaluator {i}", f"评估器 {i}"), address,
             ROLE_COLOURS["evaluator"])
        _link(ax, (chief_xy[0] + 0.3 * i, chief_xy[1] - _HALF_H), (1.25 + 2.5 * i, evaluator_y + _HALF_H),
              _LINKS["checkpoints"], linestyle=":")
    if evaluators:  # the evaluator stays outside what TF_CONFIG's cluster lists
        ax.add_patch(FancyBboxPatch((0.08, bottom - 0.12), 9.84, top + 0.28 - bottom,
                                    boxstyle="round,pad=0.02", facecolor="none", edgecolor="#777777",
                                    linestyle="--", zorder=0))
        ax.text(9.85, bottom - 0.08, say("training cluster (TF_CONFIG's cluster)",
                                         "训练集群（TF_CONFIG 中的 cluster）"),
                ha="right", va="bottom", fontsize=MIN_POINTS, color="#555555")
    handles = [
        Line2D([], [], color=_LINKS["schedule"], label=say(
            "coordinator ↔ worker: schedules functions, gets their results",
            "协调器 ↔ 工作进程：调度函数，取回结果")),
        Line2D([], [], color=_LINKS["variables"], label=say(
            "worker ↔ ps: reads variables, sends updates", "工作进程 ↔ 参数服务器：读取变量、发回更新")),
        Line2D([], [], color=_LINKS["create"], linestyle="--", label=say(
            "coordinator ↔ ps: creates, reads, saves variables directly, not through the workers",
            "协调器 ↔ 参数服务器：直接创建、读取、保存变量，不经过工作进程")),
    ]
    if evaluators:
        handles.append(Line2D([], [], color=_LINKS["checkpoints"], linestyle=":", label=say(
            "evaluator: reads the checkpoints the coordinator writes (no connection to the cluster)",
            "评估器：读取协调器写出的检查点（不与集群建立连接）")))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=MIN_POINTS,
              frameon=False)
    fig.tight_layout()
    return fig


def _bold() -> str:
    """Bold in English; in Chinese regular, the only face of the CJK font (no half-bold labels)."""
    return "normal" if current_language() == "zh" else "bold"


def _column(count: int, rows: int) -> list[float]:
    """Heights of `count` boxes spread evenly over `rows`, the first at the top."""
    if not count:
        return []
    gap = rows / count
    return [rows - gap * (i + 0.5) for i in range(count)]


def _edge(xy: tuple[float, float], side: int) -> tuple[float, float]:
    """The middle of a box's right (+1) or left (-1) side."""
    return (xy[0] + side * _HALF_W, xy[1])


def _box(ax, xy: tuple[float, float], name: str, address: str, colour: str) -> None:
    x, y = xy
    ax.add_patch(FancyBboxPatch((x - _HALF_W, y - _HALF_H), 2 * _HALF_W, 2 * _HALF_H,
                                boxstyle="round,pad=0.04", facecolor=colour, edgecolor="black",
                                zorder=3))
    ax.text(x, y + 0.1, name, ha="center", va="center", fontsize=10, weight=_bold(), zorder=4)
    ax.text(x, y - 0.14, address, ha="center", va="center", fontsize=MIN_POINTS, zorder=4)


def _link(ax, start, end, colour: str, style: str = "-|>", linestyle: str = "-") -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=colour,
                                 lw=1.3, shrinkA=2, shrinkB=2, zorder=1, linestyle=linestyle))


def _detour(ax, chief_xy, ps_xy, lane: float, side: int) -> None:
    """The coordinator <-> ps arrow (it creates, reads and saves the variables, so both ways):
    up (or down) to a lane outside the workers, across, into the ps."""
    sx, sy = chief_xy[0] + 0.45, chief_xy[1] + side * _HALF_H
    ex, ey = ps_xy[0] - 0.45, ps_xy[1] + side * _HALF_H
    verts = [(sx, sy), (sx, lane), (sx + 0.4, lane), (ex - 0.4, lane), (ex, lane), (ex, ey)]
    codes = [CurvePath.MOVETO, CurvePath.CURVE3, CurvePath.CURVE3, CurvePath.LINETO,
             CurvePath.CURVE3, CurvePath.CURVE3]
    ax.add_patch(FancyArrowPatch(path=CurvePath(verts, codes), arrowstyle="<|-|>", mutation_scale=12,
                                 color=_LINKS["create"], lw=1.3, linestyle="--", zorder=1))


def plot_curves(
    curves: Mapping[str, Sequence[float]], xlabel: str = "epoch", ylabel: str = "loss",
    title: str = "", first: int = 1, *, marks: Mapping[str, float] | None = None,
    levels: Mapping[str, float] | None = None,
) -> Figure:
    """One line per named curve, for example training and evaluation loss; x counts from `first`.

    `marks` names moments on x (an interruption between two epochs: 3.5), drawn as dashed
    vertical lines; `levels` names values on y (a fresh model's loss), drawn as dotted
    horizontal lines. Both are listed in the legend with their names.
    """
    fig = _figure(6.5, 3.6)
    ax = fig.add_subplot()
    for name, values in curves.items():
        ax.plot(range(first, first + len(values)), list(values), marker="o", label=words(name))
    for (name, x), colour in zip((marks or {}).items(), _MARK_COLOURS, strict=False):
        ax.axvline(x, color=colour, linestyle="--", linewidth=1.5, label=words(name))
    for name, y in (levels or {}).items():
        ax.axhline(y, color="#555555", linestyle=":", linewidth=1.5, label=words(name))
    _finish(fig, ax, xlabel, ylabel, title)
    if marks or levels:  # more entries: below the axes, where they cover no line
        ax.get_legend().remove()
        fig.set_figheight(fig.get_figheight() + 0.5)
        fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=MIN_POINTS,
                   frameon=False)
        fig.tight_layout(rect=(0, 0.55 / fig.get_figheight(), 1, 1))
    return fig


def _finish(fig: Figure, ax, xlabel: str, ylabel: str, title: str) -> Figure:
    """Integer steps on x, labels, an optional title, a light grid and the legend."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(words(xlabel))
    ax.set_ylabel(words(ylabel))
    if title:
        ax.set_title(words(title))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=MIN_POINTS)
    fig.tight_layout()
    return fig


def shard_rows(variables) -> list[dict]:
    """One row per shard: variable, shard index, shape, device, bytes (plain variables: 1 row)."""
    rows = []
    for variable in variables:
        shards = getattr(variable, "variables", [variable])
        name = shards[0].name.split(":")[0].split("/part_")[0]  # "emb/part_0:0" -> "emb"
        for index, shard in enumerate(shards):
            rows.append({
                "variable": name,
                "shard": index,
                "shards": len(shards),
                "shape": tuple(shard.shape.as_list()),
                "device": shard.device,
                "bytes": shard.shape.num_elements() * shard.dtype.size,
            })
    return rows


def draw_shards(variables, title: str | None = None) -> Figure:
    """One panel per variable, each on its own scale: which shard lies on which ps, and its size.

    A small variable next to a big one stays visible, and every bar says what it holds:
    "shard 0 · 128 B" for a split variable, "whole · 256 B" for one left in one piece.
    A panel's axis spans the variable's whole size, so figures of the same variables under
    different partitioners compare bar for bar (a half is drawn half as long); the line
    below the panels gives each ps's total over all variables.
    """
    rows = shard_rows(variables)
    labels = []  # (text, its bar, shorter forms): fitted to their bars once the figure is laid out
    tasks = sorted({_ps_task(r["device"]) for r in rows})
    names = list(dict.fromkeys(r["variable"] for r in rows))
    fig = _figure(WIDTH, 1.5 + 0.55 * len(tasks))
    axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
    for ax, colour, name in zip(axes, _palette(len(names)), names, strict=True):
        mine = [r for r in rows if r["variable"] == name]
        per_task = {t: [r for r in mine if _ps_task(r["device"]) == t] for t in tasks}
        total = sum(r["bytes"] for r in mine)
        unit, scale = _unit(total)
        widest = total / scale
        for task, shards in per_task.items():
            row = say(f"ps {task}", f"{task} 号参数服务器")  # lesson 01's figure names them so too
            left = 0.0
            for shard in shards:
                size = shard["bytes"] / scale
                [bar] = ax.barh(row, size, left=left, color=colour, edgecolor="white", linewidth=2)
                part = (say(f"shard {shard['shard']}", f"分片 {shard['shard']}") if shard["shards"] > 1
                        else say("whole", "完整"))
                text = ax.text(left + size / 2, row, f"{part} · {_bytes(shard['bytes'])}",
                               ha="center", va="center", fontsize=MIN_POINTS, color="white",
                               weight=_bold())
                index = str(shard["shard"]) if shard["shards"] > 1 else part
                labels.append((text, bar, [f"{index} · {_bytes(shard['bytes'])}", index]))
                left += size
            if not shards:
                ax.text(0.02 * widest, row, say("nothing", "无"), va="center",
                        fontsize=MIN_POINTS, color="#777777")
        ax.set_title(say(f"{name} ({_bytes(total)})", f"变量 {name}（{_bytes(total)}）"), fontsize=10)
        ax.set_xlim(0, widest * 1.02)
        ax.set_xlabel(unit)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.grid(axis="x", alpha=0.3)
    axes[0].invert_yaxis()
    totals = {t: sum(r["bytes"] for r in rows if _ps_task(r["device"]) == t) for t in tasks}
    fig.text(0.5, 0.01, say("bytes per ps: ", "各参数服务器的字节数：") + say(", ", "，").join(
        say(f"ps {t} {_bytes(b)}", f"{t} 号参数服务器 {_bytes(b)}") for t, b in totals.items()),
        ha="center", va="bottom", fontsize=MIN_POINTS)
    fig.suptitle(words(title) if title else say("Where the shards live", "分片放在哪里"))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    _fit_labels(fig, labels)
    return fig


def _fit_labels(fig: Figure, labels) -> None:
    """Shorten each bar's label until it fits inside its bar ("shard 0 · 85.5 KiB", then
    "0 · 85.5 KiB", then "0"), so no label runs past its bar or is cut by its neighbour."""
    for text, bar, shorter in labels:
        room = bar.get_window_extent().width - 4  # pixels, less the white edges
        for candidate in shorter:
            if text.get_window_extent().width <= room:
                break
            text.set_text(candidate)


def _unit(largest: float) -> tuple[str, int]:
    """The unit that shows `largest` bytes as a number between 1 and 1024, and its size."""
    if largest >= 1 << 20:
        return "MiB", 1 << 20
    if largest >= 1 << 10:
        return "KiB", 1 << 10
    return say("bytes", "字节"), 1


def _bytes(count: int) -> str:
    """'256 B', '85.5 KiB', '1 MiB'."""
    unit, scale = _unit(count)
    unit = "B" if scale == 1 else unit
    return f"{count / scale:.1f}".removesuffix(".0") + f" {unit}"


def draw_timeline(
    steps, title: str | None = None, marks: Mapping[str, float] | None = None, *,
    epoch_starts: Iterable[int] = (), retried: Iterable[int] = (),
    down: Mapping[int, tuple[float, float]] | None = None, zoom: tuple[float, float] | None = None,
    before: str = "",
) -> Figure:
    """Gantt chart: one row per worker, one bar per step from its start to its end.

    The number on a bar is the step's number (`Step.step`); numbers that would overlap are
    left out. `marks` names moments (seconds on the steps' clock), drawn as dashed lines
    and listed in the legend. `epoch_starts` are the numbers of the first step of each
    epoch: the gap between two epochs (the coordinator's work after `join()`) is shaded and the epochs
    are named above the bars; `before` names the steps that ran before the first epoch (an
    earlier section's step, say), so that they are not taken for an epoch. `retried` steps
    are hatched, outlined and labelled; `down` shades a worker's row from when it died to
    when it came back. `zoom` (start, end) adds a second panel below that shows that
    stretch of time magnified.
    """
    steps = sorted(steps)
    workers = sorted({s.worker for s in steps} | set(down or {}))
    rows = {w: say(f"worker {w}", f"{w} 号工作进程") for w in workers}
    panel = 0.9 + 0.75 * max(len(workers), 1)
    legend_lines = len(down or {}) + len(marks or {}) + bool(retried) + bool(epoch_starts)
    fig = _figure(WIDTH, 1.0 + panel * (2 if zoom else 1) + 0.22 * legend_lines)
    axes = fig.subplots(2 if zoom else 1, 1, squeeze=False)[:, 0]
    retried = set(retried)
    for ax in axes:
        _gantt(ax, steps, rows, retried, down or {}, marks or {})
    handles = _epoch_pauses(axes[0], steps, sorted(set(epoch_starts)), before)
    handles += _timeline_legend(down or {}, marks or {}, retried)
    if zoom:
        axes[1].set_xlim(*zoom)
        axes[1].set_title(say(f"Magnified: {zoom[0]:.2f} to {zoom[1]:.2f} s",
                              f"放大：{zoom[0]:.2f} 到 {zoom[1]:.2f} 秒"), fontsize=10)
        axes[0].axvspan(*zoom, facecolor="none", edgecolor="#333333", linestyle=":", linewidth=1.2)
    default = say("Which worker ran which step", "哪个工作进程执行了哪一步")
    axes[0].set_title(words(title) if title else default, pad=34 if epoch_starts else 6)
    axes[-1].set_xlabel(say("seconds since the first step started", "自第一步开始以来的秒数"))
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=1, fontsize=MIN_POINTS, frameon=False)
    fig.tight_layout(rect=(0, (0.2 * len(handles) + 0.05 * bool(handles)) / fig.get_figheight(), 1, 1))
    _stagger(axes[0].texts)  # epoch names that would overlap go up a line
    for ax in axes:  # a retried step's number goes below its bar (_label_retried), not over it
        _number_bars(ax, [s for s in steps if ax.get_xlim()[0] <= s.start <= ax.get_xlim()[1]
                          and s.step not in retried], rows)
    _label_retried(axes[-1], [s for s in steps if s.step in retried], list(rows))  # magnified if zoomed
    return fig


def _gantt(ax, steps, rows: Mapping[int, str], retried: set[int],
           down: Mapping[int, tuple[float, float]], marks: Mapping[str, float]) -> None:
    """The bars of every step, a dead worker's time down and the marked moments, on one axes."""
    colours = dict(zip(rows, _palette(len(rows)), strict=True))
    row = {worker: index for index, worker in enumerate(rows)}  # worker -> height of its row
    ax.set_yticks(range(len(rows)), list(rows.values()))
    ax.tick_params(axis="y", length=0)  # a tick mark next to a bar's number reads as a minus sign
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # the first worker on top
    for worker, (died, back) in down.items():
        ax.barh(row[worker], back - died, left=died, height=0.5, color="#f3d3d5", hatch="xx",
                edgecolor="#bc4b51", linewidth=0)
    for step in steps:
        again = step.step in retried
        # The edge is a darker shade of the bar's own colour: a bar a pixel wide keeps its colour.
        ax.barh(row[step.worker], step.end - step.start, left=step.start, height=0.5,
                color=colours[step.worker], edgecolor=_RETRIED if again else _darker(colours[step.worker]),
                linewidth=2.0 if again else 0.4, hatch="///" if again else None)
    for (_, moment), colour in zip(marks.items(), _MARK_COLOURS, strict=False):
        ax.axvline(moment, color=colour, linestyle="--", linewidth=1.5)
    for step in steps:  # a retried step may last a millisecond: a marker above it is always seen
        if step.step in retried:
            ax.plot((step.start + step.end) / 2, row[step.worker] - 0.25, marker="v", markersize=11,
                    color=_RETRIED, markeredgecolor="white", linestyle="none", zorder=5)
    ax.grid(axis="x", alpha=0.3)


_RETRIED = "#bc4b51"


def _darker(colour: str, factor: float = 0.7) -> tuple[float, float, float]:
    """`colour` with its red, green and blue scaled by `factor`."""
    from matplotlib.colors import to_rgb

    return tuple(channel * factor for channel in to_rgb(colour))


_MARK_COLOURS = ("#bc4b51", "#4c72b0", "#8172b2")


def _timeline_legend(down: Mapping[int, tuple[float, float]], marks: Mapping[str, float],
                     retried: set[int]) -> list:
    """Legend entries for a dead worker's time down, the marked moments and the retried steps."""
    handles: list = [Patch(facecolor="#f3d3d5", edgecolor="#bc4b51", hatch="xx",
                           label=say(f"worker {worker} down", f"{worker} 号工作进程停机"))
                     for worker in down]
    handles += [Line2D([], [], color=colour, linestyle="--", linewidth=1.5,
                       label=say(f"{words(label)} ({moment:.2f} s)", f"{words(label)}（{moment:.2f} 秒）"))
                for (label, moment), colour in zip(marks.items(), _MARK_COLOURS, strict=False)]
    if retried:  # drawn as it is on the chart: a red marker above a bar outlined in red
        handles.append(Line2D([], [], marker="v", markersize=11, color=_RETRIED, markeredgecolor="white",
                              linestyle="none", label=say(
            "retried: the step that failed on the killed worker, run again on another",
            "重试：在被杀掉的工作进程上失败、改由另一个工作进程重新执行的那一步")))
    return handles


def _label_retried(ax, steps, workers: list[int]) -> None:
    """Label each retried step that is in view above its marker, with its number below its bar."""
    low, high = ax.get_xlim()
    for step in steps:
        if low <= step.start <= high:
            middle, row = (step.start + step.end) / 2, workers.index(step.worker)
            ax.annotate(say("retried", "重试"), (middle, row - 0.25), xytext=(-8, 6),
                        textcoords="offset points", ha="right", va="bottom", fontsize=MIN_POINTS,
                        color=_RETRIED, weight=_bold(),
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": _RETRIED})
            ax.annotate(str(step.step), (middle, row + 0.25), xytext=(0, -2), textcoords="offset points",
                        ha="center", va="top", fontsize=MIN_POINTS, color=_RETRIED, weight=_bold())


def _epoch_pauses(ax, steps, starts: list[int], before: str = "") -> list:
    """Shade the gap between two epochs and name the epochs (and `before`) above the bars.

    The band runs from the end of the previous epochs' last step to the start of this epoch's
    first: no step runs in it, so it is the coordinator's work after `join()` returned, not
    `join()`'s wait for the last step (that is the stretch before the band).
    """
    if not starts or not steps:
        return []
    earliest = [s for s in steps if s.step < starts[0]]
    if earliest and before:
        _name_above(ax, earliest, words(before))
    bounds = [*starts, max(s.step for s in steps) + 1]
    for number, (first, stop) in enumerate(pairwise(bounds), start=1):
        mine = [s for s in steps if first <= s.step < stop]
        earlier = [s for s in steps if starts[0] <= s.step < first]  # the epochs before this one
        if not mine:
            continue
        if earlier:
            ax.axvspan(max(s.end for s in earlier), min(s.start for s in mine), color="#999999",
                       alpha=0.25, linewidth=0)
        _name_above(ax, mine, say(f"epoch {number}", f"第 {number} 个周期"))
    return [Patch(facecolor="#999999", alpha=0.25, label=say(
        "between epochs: the loop reads and resets the metrics, schedules the next epoch",
        "周期之间：训练循环读取并重置指标，调度下一个周期"))]


def _name_above(ax, steps, name: str) -> None:
    """Write `name` above the bars, centred on the stretch of time the steps cover."""
    middle = (min(s.start for s in steps) + max(s.end for s in steps)) / 2
    ax.annotate(name, (middle, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                textcoords="offset points", ha="center", va="bottom", fontsize=MIN_POINTS)


def _stagger(labels) -> None:
    """Put each label (left to right) on the lowest of two lines where it overlaps none; else drop it."""
    ends = [float("-inf"), float("-inf")]  # right edge of the last label on each line
    for label in sorted(labels, key=lambda t: t.get_window_extent().x0):
        box = label.get_window_extent()
        line = next((i for i, end in enumerate(ends) if box.x0 > end + 4), None)
        if line is None:
            label.set_visible(False)
            continue
        label.xyann = (0, 3 + 12 * line)
        ends[line] = box.x1


def _number_bars(ax, steps, rows: Mapping[int, str]) -> None:
    """Write each step's number on its bar, leaving out those that would overlap a neighbour."""
    if len(steps) > 300:
        return
    placed: dict[int, float] = {}  # worker -> right edge (pixels) of its last label
    for step in sorted(steps, key=lambda s: (s.start + s.end) / 2):
        text = ax.text((step.start + step.end) / 2, list(rows).index(step.worker), str(step.step),
                       ha="center", va="center", fontsize=MIN_POINTS)
        box = text.get_window_extent()
        if box.x0 < placed.get(step.worker, float("-inf")) + 5:
            text.remove()
        else:
            placed[step.worker] = box.x1


_NEVER_SEEN = "#d4d4d4"  # grey: an id a worker never read, apart from every green count


def draw_examples_seen(
    panels: Mapping[str, Sequence[Sequence[int]]], title: str | None = None,
) -> Figure:
    """Grids of counts, one panel per way of feeding data: rows = workers, columns = example ids."""
    import numpy as np

    grids = {name: np.asarray(counts, dtype=int) for name, counts in panels.items()}
    if not grids or any(grid.ndim != 2 or grid.size == 0 for grid in grids.values()):
        raise ValueError(say("every panel needs a non-empty 2-D table: rows = workers, columns = ids",
                             "每个面板都需要一张非空的二维表：行是工作进程，列是样本编号"))
    top = max(1, max(int(grid.max()) for grid in grids.values()))
    # One colour per count: 0 in grey of its own, 1 already a clear green, so that a row
    # read once stands out from one never read (the sharded panel of lesson 5). With
    # vmin=0, vmax=top and top + 1 colours, count k gets colour k.
    greens = colormaps["Greens"](np.linspace(0.35, 1.0, top))
    counts_cmap = ListedColormap([_NEVER_SEEN, *greens])
    width = max(grid.shape[1] for grid in grids.values())
    height = 1.0 + sum(0.85 + 0.38 * grid.shape[0] for grid in grids.values())
    fig = _figure(WIDTH, height, layout="constrained")
    cell = (WIDTH - 3.2) / width  # inches per example id
    axes = fig.subplots(len(grids), 1, squeeze=False)[:, 0]
    for ax, (name, grid) in zip(axes, grids.items(), strict=True):
        image = ax.imshow(grid, cmap=counts_cmap, vmin=0, vmax=top, aspect="auto")
        for (row, column), count in np.ndenumerate(grid):
            if count and cell >= 0.12 * len(str(count)):
                ax.text(column, row, str(count), ha="center", va="center", fontsize=MIN_POINTS,
                        color="white" if count > top / 2 else "black")
        ax.set_yticks(range(grid.shape[0]), [say(f"worker {w}", f"{w} 号工作进程")
                                             for w in range(grid.shape[0])])
        ax.set_xticks(range(0, grid.shape[1], 4 if grid.shape[1] > 16 else 1))
        for row, seen in enumerate(grid):
            ids = int(np.count_nonzero(seen))
            ax.annotate(say(f"{ids} ids", f"{ids} 个编号"), (1.01, row),
                        xycoords=("axes fraction", "data"), va="center", fontsize=MIN_POINTS)
        ax.set_title(words(name), fontsize=10, loc="left")
    axes[-1].set_xlabel(say("example id", "样本编号"))
    fig.suptitle(words(title) if title else say("Which worker saw which examples",
                                                "哪个工作进程读到了哪些样本"))
    # one band per count, centred on its number; ticks are whole numbers (no "2.5 times")
    fig.colorbar(image, ax=list(axes), label=say("times seen", "读到的次数"), pad=0.1, aspect=30,
                 boundaries=np.arange(-0.5, top + 1), values=np.arange(top + 1),
                 ticks=MaxNLocator(integer=True))
    return fig


def read_scalars(logdir: str | Path, tag: str = "epoch_loss") -> list[tuple[int, float]]:
    """(step, value) pairs of one scalar from TensorBoard event files under `logdir`."""
    import tensorflow as tf

    points = []
    for path in sorted(Path(logdir).rglob("events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                if value.tag == tag:
                    number = value.simple_value if value.HasField("simple_value") else float(
                        tf.make_ndarray(value.tensor))
                    points.append((int(event.step), float(number)))
    return sorted(points)


# How the evaluation sources of `plot_train_eval` look, in order of appearance: dashed squares
# for the first, large hollow diamonds for the second (drawn on top, so a point of the first
# under it stays visible), then dotted triangles.
_EVAL_STYLES = [
    {"linestyle": "--", "marker": "s", "color": ROLE_COLOURS["evaluator"]},
    {"linestyle": ":", "marker": "D", "color": ROLE_COLOURS["chief"], "markersize": 12,
     "markerfacecolor": "none", "markeredgewidth": 2, "zorder": 3},
    {"linestyle": ":", "marker": "^", "color": "#6d597a"},
]


def plot_train_eval(
    training: Mapping[str, Sequence[tuple[float, float]]],
    evaluation: Mapping[str, Sequence[tuple[float, float]]],
    xlabel: str = "training step", ylabel: str = "value", title: str = "",
    panels: Sequence[str] = (),
) -> Figure:
    """Training and evaluation curves on one time axis: (x, value) points per named curve.

    Training curves are solid lines with dots, evaluation curves dashed with squares, so the
    two kinds stay apart even where they share a colour. With `panels` (words such as
    "loss", "accuracy") each curve goes to the panel whose word its name contains, side by
    side and each on its own scale, so that small gaps between the sources show; a curve's
    source is its name without that word ("sidecar evaluation loss" -> "sidecar
    evaluation"), and each evaluation source has a style of its own. A name may also hold the
    word in the course's language ("训练损失" goes to the panel "loss"). With few points,
    the x ticks sit at the points themselves.
    """
    fig = _figure(WIDTH if panels else 7, 3.9)
    axes = fig.subplots(1, max(len(panels), 1), sharex=True, squeeze=False)[0]
    sources: list[str] = []
    for name, points in [*training.items(), *evaluation.items()]:
        index = next((i for i, word in enumerate(panels) if _panel_word(word, name)), 0)
        xs, ys = zip(*points, strict=True) if points else ((), ())
        axes[index].plot(xs, ys, label=words(name), **_curve_style(name, name in training, panels, sources))
    for ax, label in zip(axes, panels or [ylabel], strict=True):
        ax.margins(x=0.08, y=0.12)  # room for the large diamonds at the first and last steps
        _finish(fig, ax, xlabel, label, "" if panels else title)
    steps = sorted({x for points in [*training.values(), *evaluation.values()] for x, _ in points})
    if 0 < len(steps) <= 12:
        axes[0].set_xticks(steps)  # the axes share x: every panel gets them
    if title and panels:
        fig.suptitle(words(title))
        fig.tight_layout()
    return fig


def _panel_word(word: str, name: str) -> str:
    """The form of a panel's word (as given, or in the course's language) that `name` holds, or ""."""
    return next((form for form in (word, words(word)) if form in name), "")


def _curve_style(name: str, is_training: bool, panels: Sequence[str], sources: list[str]) -> dict:
    """Line and marker of one curve. Without panels every curve gets its own colour."""
    if not panels:
        colour = _palette(len(sources) + 1)[-1]
        sources.append(name)
        return {"linestyle": "-" if is_training else "--", "marker": "o" if is_training else "s",
                "color": colour}
    if is_training:
        return {"linestyle": "-", "marker": "o", "color": ROLE_COLOURS["worker"]}
    source = next((name.replace(_panel_word(word, name), "").strip() for word in panels
                   if _panel_word(word, name)), name)
    if source not in sources:
        sources.append(source)
    return dict(_EVAL_STYLES[min(sources.index(source), len(_EVAL_STYLES) - 1)])


def _ps_task(device: str) -> int:
    part = next((p for p in device.split("/") if p.startswith("task:")), "task:0")
    return int(part.split(":")[1])


def _palette(count: int) -> list[str]:
    base = ["#5b8e7d", "#f4a259", "#8cb369", "#bc4b51", "#4c72b0", "#8172b2", "#937860"]
    return [base[i % len(base)] for i in range(count)]


def cpu_cores() -> int:
    """The CPU cores this process may use (a container's limit, not the host's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def draw_comparison(
    results: Sequence[Mapping], title: str | None = None, cores: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """Three panels side by side: examples per second, start-up seconds, loss, one row per strategy.

    `results` are records of `pstutor.compare.compare` (strategy, training, examples_per_s,
    startup_s, loss), or of `compare.group_runs`, whose measured values are lists with one
    value per round: each round is a small ring, the median a dot labelled with its value, and
    a line spans the lowest to the highest round, so that overlapping spreads can be seen.
    Examples per second are on a logarithmic axis, where a strategy 30 times slower than
    another is still readable; the loss axis is zoomed to the losses. Rows are coloured by
    synchronous, asynchronous or no strategy, and named by `labels` (strategy -> row
    label, in the lesson's language; default: the strategy). The default title names the CPU
    cores (`cores`, default this machine's) of the machine that measured.
    """
    colours = {"sync": "#5b8e7d", "async": "#f4a259", "-": "#999999"}
    names = [(labels or {}).get(r["strategy"], r["strategy"]) for r in results]
    fills = [colours.get(r.get("training", "-"), "#999999") for r in results]
    fig = _figure(WIDTH, 2.3 + 0.5 * len(results))
    axes = fig.subplots(1, 3, sharey=True, gridspec_kw={"width_ratios": (1.25, 1, 1)})
    panels = (
        ("examples_per_s", say("examples per second\n(log scale)", "每秒样本数\n（对数坐标）"), "{:,.0f}"),
        ("startup_s", say("start-up (s)", "启动时间（秒）"), "{:.1f}"),
        ("loss", say("loss after the same number\nof examples (axis zoomed)",
                     "相同样本数之后的损失\n（坐标轴已放大）"), "{:.4f}"),
    )
    for ax, (key, name, text) in zip(axes, panels, strict=True):
        rounds = [_values(r[key]) for r in results]
        for y, (values, fill) in enumerate(zip(rounds, fills, strict=True)):
            ax.hlines(y, min(values), max(values), color="#555555", linewidth=1.2, zorder=2)
            ax.scatter(values, [y] * len(values), s=22, facecolors="white", edgecolors=fill, linewidths=1.2,
                       zorder=3)
            middle = statistics.median(values)
            ax.scatter([middle], [y], s=70, c=[fill], edgecolors="black", linewidths=0.6, zorder=4)
            ax.annotate(text.format(middle), (max(values), y), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=MIN_POINTS)
        low = min(min(v) for v in rounds)
        high = max(max(v) for v in rounds)
        if key == "examples_per_s":
            ax.set_xscale("log")
            ax.set_xlim(low / 1.8, high * 6)
            ax.xaxis.set_major_locator(LogLocator(base=10))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
        elif key == "startup_s":
            ax.set_xlim(0, high * 1.45 or 1.0)
            ax.xaxis.set_major_locator(MaxNLocator(4, integer=True))
        else:
            spread = max(high - low, 0.01 * max(abs(high), 1e-3))
            ax.set_xlim(low - spread, high + 1.8 * spread)
            ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.set_title(name, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(results)), names)
    axes[0].set_ylim(len(results) - 0.5, -0.5)  # first record on top
    handles = [Patch(facecolor=colours[key], edgecolor="black", label=name) for key, name in (
        ("sync", say("synchronous", "同步")), ("async", say("asynchronous", "异步")),
        ("-", say("no strategy", "不使用策略")))]
    if any(len(_values(r["examples_per_s"])) > 1 for r in results):
        ring = {"marker": "o", "markerfacecolor": "white", "markeredgecolor": "#555555"}
        dot = {"marker": "o", "color": "#555555", "markerfacecolor": "#cccccc", "markeredgecolor": "black"}
        marks = [Line2D([], [], linestyle="", label=say("one round", "一轮"), **ring),
                 Line2D([], [], label=say("median; line: lowest to highest round",
                                          "中位数；线段：从最低到最高的一轮"), **dot)]
        handles = [handles[0], marks[0], handles[1], marks[1], handles[2]]  # colours in row 1, marks in row 2
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=MIN_POINTS, frameon=False)
    count, cores = len(results), cores or cpu_cores()
    fig.suptitle(title if title else say(
        f"The same model in {count} set-ups ({cores} CPU cores)",
        f"同一个模型的 {count} 种运行方式（{cores} 个 CPU 核心）"))
    fig.tight_layout(rect=(0, 0.05 * (1 + len(handles) // 4) + 0.03, 1, 1))
    return fig


def _values(value) -> list[float]:
    """A measurement as a list of rounds: one number is one round."""
    return [float(v) for v in value] if isinstance(value, list | tuple) else [float(value)]
