"""Plots of results (matplotlib, Agg backend): the RSS timeline of every mode (what top and
mprof users expect), the memory-time trade-off beside Revolve's fitted model, and measured vs
optimal step evaluations. Functions return figures; :func:`figure_png` turns one into PNG.

Readability rules every plot keeps: a log axis only where the data spans a decade or more
(a log axis over a narrow range labels only minor ticks, which overlap), "%g" tick labels,
a legend entry for every line, "no data" on an axis with nothing to draw, and a size that
renders sharp at 1400 px (figures 9.3 in wide at 150 dpi).
"""

from __future__ import annotations

import io
import math
import re
import statistics
import textwrap
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckptbench.analysis import differing_fields, field_value
from ckptbench.render.format import MIB, cell_labels, fmt_bytes, told_apart
from ckptbench.results.kinds import PLOT_SOFTWARE
from ckptbench.results.schema import Case, Mode, RunResult
from ckptbench.schedules import (
    STRATEGIES,
    Setting,
    StrategySpec,
    get_strategy,
    optimal_forward_steps,
)

__all__ = [
    "DPI",
    "TRADEOFF_CAPTION",
    "cell_family",
    "family_titles",
    "figure_png",
    "plot_evaluations",
    "plot_files",
    "plot_timeline",
    "plot_tradeoff",
]

DPI = 150
WIDTH_IN = 9.3  # 1400 px at DPI

_MODE_COLORS = {"baseline": "#777777", "normal": "#d62728", "checkpointed": "#1f77b4"}


def _figure(height: float = 3.8, ncols: int = 1, width: float = WIDTH_IN) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, height), layout="constrained")
    return fig, axes


def figure_png(fig: Any, dpi: int = DPI) -> bytes:
    """The PNG bytes of a figure from the ``plot_*`` functions (the figure is closed), e.g.
    for the README image: ``Path("tradeoff.png").write_bytes(figure_png(plot_tradeoff(rs)))``.
    Its ``Software`` text names ckptbench (``kinds.wrote_plot``: ``--plots --force`` replaces
    such a plot, never another PNG)."""
    import matplotlib
    import matplotlib.pyplot as plt

    software = f"{PLOT_SOFTWARE} (matplotlib {matplotlib.__version__})"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": software})
    plt.close(fig)
    return buf.getvalue()


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no data: {what}", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _scale(ax: Any, axis: str, values: Sequence[float], base: int = 10) -> None:
    """Log scale when the values span at least a decade, else linear; plain tick labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    vals = [v for v in values if v is not None and v > 0]
    if not vals or max(vals) / min(vals) < 10:
        return
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_scale("log", base=base)
    target = ax.xaxis if axis == "x" else ax.yaxis
    if base == 10 and max(vals) / min(vals) < 1000:  # 1, 2, 5, 10, 20, 50: labels that fit
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def _legend(ax: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")


def plot_timeline(result: RunResult, label: str | None = None) -> Any:
    """RSS over time of each mode's workers (the parent's sampler, like top; one line per
    worker, one colour and legend entry per mode), with the exact per-iteration peak
    (median over the mode's iterations) as a dashed line and the memory limit when one was
    set."""
    fig, ax = _figure(3.4)
    c = result.case
    drawn = False
    by_mode: dict[str, list[Any]] = {}  # a mode measured in several rounds: one worker each
    for m in result.modes:
        by_mode.setdefault(m.mode.value, []).append(m)
    for mode, workers in by_mode.items():
        color = _MODE_COLORS.get(mode)
        timelines = [m.timeline for m in workers if m.timeline]
        for k, timeline in enumerate(timelines):  # one legend entry per mode
            many = f" ({len(timelines)} workers)" if len(timelines) > 1 else ""
            label = f"{mode}: sampled RSS{many}" if k == 0 else None
            ax.plot([p[0] for p in timeline], [p[1] / MIB for p in timeline],
                    label=label, color=color, lw=1)  # fmt: skip
            drawn = True
        peaks = [it.peak_rss_bytes for m in workers for it in m.iterations]
        if peaks:
            exact = statistics.median(peaks) / MIB
            ax.axhline(exact, color=color, ls="--", lw=0.8, label=f"{mode}: exact peak")
            drawn = True
    title = label or cell_labels([c])[0]
    ax.set_title(f"{title}: RSS per mode", fontsize=9)
    if not drawn:
        _no_data(ax, "no mode has samples")
        return fig
    if c.memory_limit_bytes is not None:
        ax.axhline(
            c.memory_limit_bytes / MIB,
            color="black",
            lw=1,
            ls=":",
            label=f"memory limit {fmt_bytes(c.memory_limit_bytes)}",
        )
    ax.set_xlabel("seconds since worker start")
    ax.set_ylabel("RSS [MiB]")
    _legend(ax)
    return fig


#: The fields that make a trade-off family beside the model and the steps.
_FAMILY_FIELDS = ("hidden", "batch", "input", "output", "threads", "seed")


def cell_family(c: Case) -> tuple[Any, ...]:
    """Cells that share a model and sizes: the points of one trade-off plot."""
    return (c.model, c.steps, *(getattr(c, f) for f in _FAMILY_FIELDS))


def family_titles(cases: Sequence[Case]) -> list[str]:
    """A title per trade-off family (``cases``: one per family): model and steps, plus the
    family fields that differ between the families (so two families never share a title,
    or a file name). A field of single cells (a budget, an executor) never names a family."""
    extra = [f for f in differing_fields(cases) if f in _FAMILY_FIELDS]
    return [
        " ".join([c.model, f"l={c.steps}", *(f"{f}={field_value(c, f)}" for f in extra)])
        for c in cases
    ]


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def _point_label(strategy: str, setting: int) -> str:
    return get_strategy(strategy).setting.point_label(setting)


def _points(results: Sequence[RunResult], strategy: str) -> list[tuple[Any, ...]]:
    """(setting, checkpointed overhead MiB, slowdown, forward steps, low MiB, high MiB,
    below noise) of a strategy's cells; the setting is what the strategy is set by (snaps, a
    peer's segments, a byte budget). An overhead within its noise is placed at its
    interval's upper end (never at a negative or tiny figure) and flagged."""
    pts = []
    for r in results:
        if r.case.strategy != strategy:
            continue
        s = r.summary
        iv = s.mode(Mode.CHECKPOINTED).overhead_interval
        setting = get_strategy(strategy).setting_of(r.case.snaps, r.case.budget_bytes)
        if iv is None or s.slowdown.value is None or (iv.below_noise and iv.high <= 0):
            continue  # nothing to place on a memory axis
        x = (iv.high if iv.below_noise else iv.value) / MIB
        lo, hi = max(iv.low, 0) / MIB, iv.high / MIB
        pts.append((setting or 0, x, s.slowdown.value, s.forward_steps, lo, hi, iv.below_noise))
    return sorted(pts)


def _errorbars(ax: Any, pts: Sequence[tuple[Any, ...]], color: Any) -> None:
    """Horizontal bars: each overhead's interval (both modes' spreads and a rerun's);
    a point within its noise hollow, labelled '< noise'."""
    for p in pts:
        x, y, lo, hi, below = p[1], p[2], p[4], p[5], p[6]
        ax.plot([lo, hi], [y, y], "-", color=color, lw=0.8, alpha=0.6)
        if below:
            ax.plot([x], [y], "o", mfc="white", color=color, ms=7, zorder=1)
            ax.annotate("< noise", (x, y), fontsize=6, xytext=(3, -8), textcoords="offset points")


#: What the trade-off figure shows, for the caption under it (HTML report).
TRADEOFF_CAPTION = (
    "Left: each cell's checkpointed overhead over the baseline against its slowdown (lower "
    "left is better); a bar is the overhead's interval (both modes' iteration peaks and "
    "where a rerun lands, 95%), "
    "a hollow point one within its noise, placed at its upper end. The line is Revolve's "
    "model fitted to the revolve points only: slowdown "
    "a + b t(l,s)/l (recomputation per step) and overhead c + d s (memory per snapshot), drawn "
    "from the fewest to the most snaps measured; where a state is small, d is small and the "
    "line is nearly vertical. Right: untaped step evaluations per step, measured, on the "
    "binomial optimum t(l,s)/l."
)


def _reference_curve(ax: Any, spec: StrategySpec, pts: list[tuple[Any, ...]], steps: int) -> None:
    """The reference strategy's curve (``StrategySpec.reference``): slowdown modelled as
    a + b*t(l,s)/l with t its closed form (or lower bound) and memory as c + d*s, both
    fitted to its points."""
    advances = spec.advances or spec.lower_bound
    if len(pts) < 2 or advances is None:
        return
    fit_t = _fit_line([advances(steps, p[0]) / steps for p in pts], [p[2] for p in pts])
    fit_m = _fit_line([float(p[0]) for p in pts], [p[1] for p in pts])
    if fit_t and fit_m:
        span = range(pts[0][0], pts[-1][0] + 1)
        xs = [fit_m[0] + fit_m[1] * s for s in span]
        ys = [fit_t[0] + fit_t[1] * advances(steps, s) / steps for s in span]
        ax.plot(xs, ys, "-", color="black", lw=1, label=f"{spec.label} fitted to its points")


def plot_tradeoff(
    results: Sequence[RunResult],
    before: Sequence[RunResult] = (),
    title: str | None = None,
) -> Any:
    """Left: the memory-time trade-off (checkpointed overhead vs slowdown), measured points
    per strategy beside Revolve's model fitted to the revolve points (slowdown a + b*t(l,s)/l,
    memory c + d*s, drawn from the fewest to the most snaps measured: where a state is small,
    d is small and the line nearly vertical; :data:`TRADEOFF_CAPTION` says so under the
    figure); ``before`` results, when given, as hollow
    markers. Right: recomputation per step vs snaps: the binomial optimum t(l,s)/l and the
    measured advances/l of every strategy."""
    fig, (ax1, ax2) = _figure(4.2, ncols=2)
    if not results:
        _no_data(ax1, "no results")
        _no_data(ax2, "no results")
        return fig
    steps = results[0].case.steps
    xs_all: list[float] = []
    reference: tuple[StrategySpec, list[tuple[Any, ...]]] | None = None
    recompute: list[float] = []
    for name, spec in STRATEGIES.items():
        marker = spec.marker
        pts = _points(results, name)
        old = _points(before, name)
        if old:
            ax1.plot(
                [p[1] for p in old],
                [p[2] for p in old],
                marker,
                mfc="none",
                color="#999999",
                label=f"{name} before",
            )
            xs_all += [p[1] for p in old]
        if not pts:
            continue
        line = ax1.plot([p[1] for p in pts], [p[2] for p in pts], marker, label=name)[0]
        _errorbars(ax1, pts, line.get_color())
        xs_all += [p[1] for p in pts] + [p[5] for p in pts]
        for snaps, mem, slow, *_ in pts:
            ax1.annotate(
                _point_label(name, snaps), (mem, slow), fontsize=6, xytext=(3, 3),
                textcoords="offset points",
            )  # fmt: skip
        if spec.setting is Setting.BUDGET:
            continue  # its snaps are not a setting: no point on the recomputation panel
        measured = [(p[0], p[3] / steps) for p in pts if p[3] is not None]
        if measured:
            ax2.plot(
                *zip(*measured, strict=True),
                marker,
                color=line.get_color(),
                label=f"{name} measured",
            )
            recompute += [m[1] for m in measured]
        if spec.reference:
            reference = (spec, pts)
    if not xs_all:
        _no_data(ax1, "no cell with checkpointed overhead and slowdown")
    else:
        if reference is not None:
            _reference_curve(ax1, *reference, steps)
        _scale(ax1, "x", xs_all)
        ax1.set_xlabel("checkpointed overhead over baseline [MiB RSS]")
        ax1.set_ylabel("slowdown vs normal [x]")
        _legend(ax1)
    head = title or results[0].case.model + f" l={steps}"
    ax1.set_title(textwrap.fill(f"{head}: trade-off", 64), fontsize=9)
    smax = max([r.case.snaps for r in results] + [4])
    grid = sorted(
        {max(1, min(steps, round(2 ** (k / 4)))) for k in range(4, 4 * int(math.log2(smax) + 2))}
    )
    theory = [optimal_forward_steps(steps, s) / steps for s in grid]
    ax2.plot(grid, theory, "-", color="black", lw=1, label="optimal t(l,s)/l")
    _scale(ax2, "x", grid, base=2)
    _scale(ax2, "y", theory + recompute)
    ax2.set_xlabel("snaps (slots incl. x_0)")
    ax2.set_ylabel("untaped advances per step")
    ax2.set_title("recomputation: measured vs binomial optimum", fontsize=9)
    _legend(ax2)
    return fig


def plot_evaluations(results: Sequence[RunResult]) -> Any:
    """Measured step evaluations of every cell against the optimum t(l,s)+l (diagonal)."""
    fig, ax = _figure(4.0, width=6.0)
    values: list[float] = []
    for strat in STRATEGIES.values():
        pts = []
        for r in results:
            s = r.summary
            if (
                r.case.strategy == strat.name
                and s.step_evaluations is not None
                and s.step_evaluations_optimal is not None
            ):
                pts.append((s.step_evaluations_optimal, s.step_evaluations))
        if pts:
            ax.plot(*zip(*pts, strict=True), strat.marker, label=strat.name)
            values += [v for p in pts for v in p]
    ax.set_title("step evaluations: measured vs optimal", fontsize=9)
    if not values:
        _no_data(ax, "no checkpointed mode counted its evaluations")
        return fig
    lo, hi = min(values), max(values)
    ax.plot([lo, hi], [lo, hi], "-", color="black", lw=0.8, label="measured = optimal")
    _scale(ax, "x", values)
    _scale(ax, "y", values)
    ax.set_xlabel("optimal evaluations t(l,s)+l")
    ax.set_ylabel("measured evaluations")
    _legend(ax)
    return fig


def plot_files(
    results: Sequence[RunResult], before: Sequence[RunResult], folder: Path
) -> list[tuple[Path, bytes]]:
    """(path, PNG bytes) of every plot for ``--plots``: one trade-off plot per model and
    sizes (before and after), the evaluations, one RSS timeline per result. Every name tells
    its cell apart: the fields that differ between the cells are in it."""

    def name(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9.+-]+", "-", text.replace("=", "")).strip("-")

    groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in results:
        groups.setdefault(cell_family(r.case), []).append(r)
    old: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in before:
        old.setdefault(cell_family(r.case), []).append(r)
    titles = family_titles([g[0].case for g in groups.values()])
    files = [
        (
            folder / f"tradeoff-{name(title)}.png",
            figure_png(plot_tradeoff(g, old.get(k, ()), title=title)),
        )
        for (k, g), title in zip(groups.items(), titles, strict=True)
    ]
    files.append((folder / "evaluations.png", figure_png(plot_evaluations(results))))
    labels = cell_labels([r.case for r in results])
    several_hosts = len({r.host for r in results}) > 1
    stems = [
        f"timeline-{name(label)}" + (f"-{name(r.host)}" if several_hosts else "")
        for r, label in zip(results, labels, strict=True)
    ]
    repeats = Counter(stems)
    seen: Counter[str] = Counter()
    titles = told_apart(labels, results)  # several invocations: the file each was read from
    for r, title, stem in zip(results, titles, stems, strict=True):
        seen[stem] += 1  # several invocations of one cell: one timeline each, numbered
        suffix = f"-run{seen[stem]}" if repeats[stem] > 1 else ""
        files.append((folder / f"{stem}{suffix}.png", figure_png(plot_timeline(r, title))))
    return files
