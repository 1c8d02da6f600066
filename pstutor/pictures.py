"""Pictures that make the course's ideas visible. Each returns a matplotlib `Figure`.

Figures are created without pyplot, so a notebook shows each exactly once (as the cell's
value) and the command line can save them without a display. Labels use API names, which
stay in English in both languages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch
from matplotlib.ticker import MaxNLocator

ROLE_COLOURS = {"chief": "#f4a259", "worker": "#5b8e7d", "ps": "#8cb369", "evaluator": "#bc4b51"}


def cluster_jobs(cluster) -> dict[str, list[str]]:
    """Job -> addresses from a dict, a `tf.train.ClusterSpec` or a cluster resolver."""
    if hasattr(cluster, "cluster_spec"):
        cluster = cluster.cluster_spec()
    if hasattr(cluster, "as_dict"):
        cluster = cluster.as_dict()
    return {job: list(addresses) for job, addresses in dict(cluster).items()}


def draw_cluster(cluster, title: str = "Parameter server cluster") -> Figure:
    """Topology: coordinator, workers and ps as boxes, arrows for who talks to whom."""
    jobs = cluster_jobs(cluster)
    chief = jobs.get("chief", ["this process"])[0]
    workers, ps = jobs.get("worker", []), jobs.get("ps", [])
    evaluators = jobs.get("evaluator", [])
    rows = max(len(workers), len(ps), 1)
    fig = Figure(figsize=(9, 1.6 + 1.0 * rows + (0.8 if evaluators else 0)))
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    bottom = -1.6 if evaluators else -0.6
    ax.set_ylim(bottom, rows + 0.6)
    ax.axis("off")
    ax.set_title(title)

    def column(addresses: Sequence[str]) -> list[float]:
        gap = rows / len(addresses)
        return [rows - gap * (i + 0.5) for i in range(len(addresses))]

    chief_xy = (1.2, rows / 2)
    worker_xy = [(5.0, y) for y in column(workers)] if workers else []
    ps_xy = [(8.8, y) for y in column(ps)] if ps else []
    for (x, y) in worker_xy:
        _arrow(ax, chief_xy, (x, y), "#999999")
        for target in ps_xy:
            _arrow(ax, (x, y), target, ROLE_COLOURS["ps"])
    for target in ps_xy:  # bend around the workers: upwards for upper ps, downwards for lower
        _arrow(ax, chief_xy, target, "#bbbbbb", bend=-0.3 if target[1] >= rows / 2 else 0.3)
    _box(ax, chief_xy, "chief (coordinator)", chief, ROLE_COLOURS["chief"])
    for i, ((x, y), address) in enumerate(zip(worker_xy, workers, strict=True)):
        _box(ax, (x, y), f"worker {i}", address, ROLE_COLOURS["worker"])
    for i, ((x, y), address) in enumerate(zip(ps_xy, ps, strict=True)):
        _box(ax, (x, y), f"ps {i}", address, ROLE_COLOURS["ps"])
    for i, address in enumerate(evaluators):
        _box(ax, (1.2 + 2.6 * i, -0.75), f"evaluator {i}", address, ROLE_COLOURS["evaluator"])
    ax.text(
        5.0, bottom + 0.05,
        "grey: coordinator schedules functions on workers · green: workers read/update "
        "variables on ps · light: coordinator creates variables on ps",
        ha="center", va="bottom", fontsize=7.5, color="#555555",
    )
    fig.tight_layout()
    return fig


def plot_curves(
    curves: Mapping[str, Sequence[float]], xlabel: str = "epoch", ylabel: str = "loss",
    title: str = "",
) -> Figure:
    """One line per named curve, for example training and evaluation loss."""
    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot()
    for name, values in curves.items():
        ax.plot(range(1, len(values) + 1), list(values), marker="o", label=name)
    return _finish(fig, ax, xlabel, ylabel, title)


def _finish(fig: Figure, ax, xlabel: str, ylabel: str, title: str,
            legend_size: float | None = None) -> Figure:
    """Integer steps on x, labels, an optional title, a light grid and the legend."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=legend_size)
    fig.tight_layout()
    return fig


def _box(ax, xy: tuple[float, float], name: str, address: str, colour: str) -> None:
    x, y = xy
    ax.add_patch(
        FancyBboxPatch((x - 1.0, y - 0.32), 2.0, 0.64, boxstyle="round,pad=0.05",
                       facecolor=colour, edgecolor="black", alpha=0.9, zorder=3)
    )
    ax.text(x, y + 0.08, name, ha="center", va="center", fontsize=9, weight="bold", zorder=4)
    ax.text(x, y - 0.2, address, ha="center", va="center", fontsize=7, zorder=4)


def _arrow(ax, start, end, colour: str, bend: float = 0.0) -> None:
    ax.annotate(
        "", xy=(end[0] - 1.05, end[1]), xytext=(start[0] + 1.05, start[1]),
        arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2,
                    "connectionstyle": f"arc3,rad={bend}"},
        zorder=1,
    )


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
                "shape": tuple(shard.shape.as_list()),
                "device": shard.device,
                "bytes": shard.shape.num_elements() * shard.dtype.size,
            })
    return rows


def draw_shards(variables, title: str = "Where the shards live") -> Figure:
    """Stacked bars: bytes held by each ps task, one colour per variable."""
    rows = shard_rows(variables)
    tasks = sorted({_ps_task(r["device"]) for r in rows})
    names = list(dict.fromkeys(r["variable"] for r in rows))
    fig = Figure(figsize=(7, 1.4 + 0.6 * len(tasks)))
    ax = fig.add_subplot()
    left = dict.fromkeys(tasks, 0.0)
    for colour, name in zip(_palette(len(names)), names, strict=True):
        label = name  # only the first bar of a variable goes into the legend
        for task in tasks:
            size = sum(r["bytes"] for r in rows
                       if r["variable"] == name and _ps_task(r["device"]) == task)
            if size:
                ax.barh(f"ps {task}", size / 1024, left=left[task] / 1024, color=colour,
                        edgecolor="white", label=label)
                left[task] += size
                label = None
    ax.invert_yaxis()
    ax.set_xlabel("KiB")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="variable")
    fig.tight_layout()
    return fig


def draw_timeline(
    steps, title: str = "Which worker ran which step", marks: Mapping[str, float] | None = None,
) -> Figure:
    """Gantt chart: one row per worker, one bar per step from its start to its end.

    `marks` names moments (seconds on the same clock as the steps), e.g. when a worker
    was killed; each is drawn as a labelled vertical line.
    """
    workers = sorted({s.worker for s in steps})
    fig = Figure(figsize=(8, 1.0 + 0.55 * max(len(workers), 1)))
    ax = fig.add_subplot()
    colours = _palette(len(workers))
    for step in steps:
        colour = colours[workers.index(step.worker)]
        ax.barh(f"worker {step.worker}", step.end - step.start, left=step.start, color=colour,
                edgecolor="black", linewidth=0.5)
        if len(steps) <= 40:
            ax.text((step.start + step.end) / 2, f"worker {step.worker}", str(step.step),
                    ha="center", va="center", fontsize=7)
    ax.invert_yaxis()
    for (label, moment), colour in zip((marks or {}).items(), ("#bc4b51", "#4c72b0", "#8172b2"),
                                       strict=False):
        ax.axvline(moment, color=colour, linestyle="--", linewidth=1.2)
        ax.annotate(label, (moment, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                    va="top", ha="right", fontsize=8, color=colour)
    ax.set_xlabel("seconds since the first step started")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def draw_examples_seen(
    panels: Mapping[str, Sequence[Sequence[int]]], title: str = "Which worker saw which examples",
) -> Figure:
    """Grids of counts, one panel per way of feeding data: rows = workers, columns = example ids."""
    import numpy as np

    grids = {name: np.asarray(counts, dtype=int) for name, counts in panels.items()}
    if not grids or any(grid.ndim != 2 or grid.size == 0 for grid in grids.values()):
        raise ValueError("every panel needs a non-empty 2-D table: rows = workers, columns = ids")
    top = max(1, max(int(grid.max()) for grid in grids.values()))
    width = max(grid.shape[1] for grid in grids.values())
    height = 0.9 + sum(0.75 + 0.35 * grid.shape[0] for grid in grids.values())
    fig = Figure(figsize=(min(3.5 + 0.24 * width, 16), height), layout="constrained")
    axes = fig.subplots(len(grids), 1, squeeze=False)[:, 0]
    for ax, (name, grid) in zip(axes, grids.items(), strict=True):
        image = ax.imshow(grid, cmap="Greens", vmin=0, vmax=top, aspect="auto")
        for (row, column), count in np.ndenumerate(grid):
            if count and width <= 64:
                ax.text(column, row, str(count), ha="center", va="center", fontsize=7,
                        color="white" if count > top / 2 else "black")
        ax.set_yticks(range(grid.shape[0]), [f"worker {w}" for w in range(grid.shape[0])])
        ax.set_xticks(range(0, grid.shape[1], 4 if grid.shape[1] > 16 else 1))
        for row, seen in enumerate(grid):
            ax.annotate(f"{int(np.count_nonzero(seen))} ids", (1.01, row), xycoords=("axes fraction",
                        "data"), va="center", fontsize=8)
        ax.set_title(name, fontsize=10, loc="left")
    axes[-1].set_xlabel("example id")
    fig.suptitle(title)
    fig.colorbar(image, ax=list(axes), label="times seen", pad=0.06, aspect=30)
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


def plot_train_eval(
    training: Mapping[str, Sequence[tuple[float, float]]],
    evaluation: Mapping[str, Sequence[tuple[float, float]]],
    xlabel: str = "training step", ylabel: str = "value", title: str = "",
) -> Figure:
    """Training and evaluation curves on one time axis: (x, value) points per named curve.

    Training curves are solid lines with dots, evaluation curves dashed with squares, so the
    two sources stay apart even where they share a colour.
    """
    fig = Figure(figsize=(7, 3.8))
    ax = fig.add_subplot()
    colours = _palette(len(training) + len(evaluation))
    styles = [("-", "o")] * len(training) + [("--", "s")] * len(evaluation)
    curves = [*training.items(), *evaluation.items()]
    for (name, points), colour, (line, marker) in zip(curves, colours, styles, strict=True):
        xs, ys = zip(*points, strict=True) if points else ((), ())
        ax.plot(xs, ys, linestyle=line, marker=marker, color=colour, label=name)
    return _finish(fig, ax, xlabel, ylabel, title, legend_size=8)


def _ps_task(device: str) -> int:
    part = next((p for p in device.split("/") if p.startswith("task:")), "task:0")
    return int(part.split(":")[1])


def _palette(count: int) -> list[str]:
    base = ["#5b8e7d", "#f4a259", "#8cb369", "#bc4b51", "#4c72b0", "#8172b2", "#937860"]
    return [base[i % len(base)] for i in range(count)]


def draw_comparison(
    results: Sequence[Mapping], title: str = "The same model under four strategies",
) -> Figure:
    """Three panels side by side: examples per second, start-up seconds, final loss per strategy.

    `results` are the records of `pstutor.compare.compare` (strategy, training, examples_per_s,
    startup_s, loss); bars are coloured by synchronous, asynchronous or no distribution.
    """
    colours = {"sync": "#5b8e7d", "async": "#f4a259", "-": "#999999"}
    labels = [r["strategy"] for r in results]
    panels = (("examples_per_s", "examples per second", "{:,.0f}"),
              ("startup_s", "start-up (s)", "{:.1f}"), ("loss", "loss after the same examples", "{:.3f}"))
    fig = Figure(figsize=(11, 1.6 + 0.45 * len(results)))
    axes = fig.subplots(1, len(panels), sharey=True)
    for ax, (key, name, text) in zip(axes, panels, strict=True):
        values = [float(r[key]) for r in results]
        ax.barh(labels, values, color=[colours.get(r.get("training", "-"), "#999999") for r in results],
                edgecolor="black", linewidth=0.5)
        for y, value in enumerate(values):
            ax.text(value, y, " " + text.format(value), va="center", fontsize=8)
        ax.set_xlim(0, max(values, default=1.0) * 1.35 or 1.0)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.xaxis.set_major_formatter(lambda value, _: f"{value:,.{0 if value >= 10 else 1}f}")
        ax.set_title(name, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    axes[0].invert_yaxis()
    handles = [Patch(facecolor=c, edgecolor="black", label=n)
               for n, c in (("synchronous", colours["sync"]), ("asynchronous", colours["async"]),
                            ("no distribution", colours["-"]))]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
