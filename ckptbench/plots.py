"""Plots and the self-contained HTML report of a comparison (matplotlib, Agg backend).

Figures: the RSS timeline of every mode (the picture top/mprof users expect), the memory-time
trade-off beside the theoretical Revolve curve, and measured vs optimal step evaluations.
Functions return figures or strings; nothing is printed or shown.
"""

from __future__ import annotations

import base64
import html
import io
import math
import statistics
from collections.abc import Sequence
from typing import Any

from ckptbench.analysis import summarize
from ckptbench.compare import (
    Comparison,
    _cell_rows,
    _delta_rows,
    _rule_text,
    _unmatched,
)
from ckptbench.results import Case, RunResult
from ckptbench.revolve import Strategy, optimal_forward_steps

MIB = 2**20

__all__ = [
    "cell_family",
    "figure_png",
    "plot_evaluations",
    "plot_timeline",
    "plot_tradeoff",
    "render_html",
]


def _summary(result: RunResult) -> dict[str, Any]:
    return summarize(result.case, result.modes)


# --------------------------------------------------------------------------- plots


def _figure(width: float = 7.0, height: float = 3.6, ncols: int = 1) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, height), constrained_layout=True)
    return fig, axes


def figure_png(fig: Any, dpi: int = 90) -> bytes:
    """The PNG bytes of a figure from the ``plot_*`` functions (the figure is closed), e.g.
    for the README image: ``Path("tradeoff.png").write_bytes(figure_png(plot_tradeoff(rs)))``.
    """
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def _png(fig: Any) -> str:
    return base64.b64encode(figure_png(fig)).decode("ascii")


_MODE_COLORS = {"baseline": "#888888", "normal": "#d62728", "checkpointed": "#1f77b4"}
_STRATEGY_MARKERS = {"revolve": "o", "uniform": "s", "store-all": "^"}


def plot_timeline(result: RunResult) -> Any:
    """RSS over time of each mode's worker (the parent's sampler, like top), with the exact
    per-iteration peak as a dashed line."""
    fig, ax = _figure()
    for m in result.modes:
        if not m.timeline:
            continue
        t = [p[0] for p in m.timeline]
        rss = [p[1] / MIB for p in m.timeline]
        color = _MODE_COLORS.get(m.mode.value)
        ax.plot(t, rss, label=f"{m.mode.value} (sampled RSS)", color=color, lw=1)
        if m.iterations:
            exact = statistics.median(it.peak_rss_bytes for it in m.iterations) / MIB
            ax.axhline(exact, color=color, ls="--", lw=0.8)
    c = result.case
    ax.set_title(f"{c.model} l={c.steps} s={c.snaps} {c.strategy} — RSS per mode", fontsize=9)
    ax.set_xlabel("seconds since worker start")
    ax.set_ylabel("RSS [MiB]")
    ax.legend(fontsize=7)
    return fig


def cell_family(c: Case) -> tuple[Any, ...]:
    """Cells that share a model and sizes: the points of one trade-off plot."""
    return (c.model, c.steps, c.hidden, c.batch, c.input, c.output)


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    if len(set(xs)) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def plot_tradeoff(results: Sequence[RunResult]) -> Any:
    """Left: the memory-time trade-off (checkpointed overhead vs slowdown), measured points
    per strategy beside the Revolve curve (slowdown modelled as a + b*t(l,s)/l and memory as
    c + d*s, both fitted to the revolve points). Right: recomputation per step vs snaps: the
    binomial optimum t(l,s)/l and the measured advances/l of every strategy."""
    fig, (ax1, ax2) = _figure(10.0, 3.8, ncols=2)
    c0 = results[0].case
    steps = c0.steps
    revolve_pts = []
    for strat in Strategy:
        pts = []
        for r in results:
            if r.case.strategy != strat.value:
                continue
            s = _summary(r)
            over = s["overhead_bytes"].get("checkpointed")
            if over is not None and s["slowdown"] is not None:
                pts.append((r.case.snaps, over / MIB, s["slowdown"], s["forward_steps"]))
        if not pts:
            continue
        pts.sort()
        marker = _STRATEGY_MARKERS.get(strat.value, "o")
        ax1.plot([p[1] for p in pts], [p[2] for p in pts], marker, label=strat.value)
        for snaps, mem, slow, _ in pts:
            ax1.annotate(
                f"s={snaps}", (mem, slow), fontsize=6, xytext=(3, 3), textcoords="offset points"
            )
        measured = [(p[0], p[3] / steps) for p in pts if p[3] is not None]
        if measured:
            ax2.plot(*zip(*measured, strict=True), marker, label=f"{strat.value} measured")
        if strat is Strategy.REVOLVE:
            revolve_pts = pts
    smax = max([r.case.snaps for r in results] + [4])
    grid = sorted(
        {max(1, min(steps, round(2 ** (k / 4)))) for k in range(4, 4 * int(math.log2(smax) + 2))}
    )
    theory = [optimal_forward_steps(steps, s) / steps for s in grid]
    ax2.plot(grid, theory, "-", color="black", lw=1, label="optimal t(l,s)/l")
    if len(revolve_pts) >= 2:
        fit_t = _fit_line(
            [optimal_forward_steps(steps, p[0]) / steps for p in revolve_pts],
            [p[2] for p in revolve_pts],
        )
        fit_m = _fit_line([float(p[0]) for p in revolve_pts], [p[1] for p in revolve_pts])
        if fit_t and fit_m:
            s_lo, s_hi = revolve_pts[0][0], revolve_pts[-1][0]
            span = [s for s in range(s_lo, s_hi + 1)]
            xs = [fit_m[0] + fit_m[1] * s for s in span]
            ys = [fit_t[0] + fit_t[1] * optimal_forward_steps(steps, s) / steps for s in span]
            ax1.plot(xs, ys, "-", color="black", lw=1, label="Revolve curve (fitted costs)")
    ax1.set_xscale("log")
    ax2.set_yscale("log")
    ax1.set_xlabel("checkpointed overhead over baseline [MiB RSS]")
    ax1.set_ylabel("slowdown vs normal [x]")
    ax1.set_title(f"{c0.model} l={steps}: memory-time trade-off", fontsize=9)
    ax1.legend(fontsize=7)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("snaps (slots incl. x_0)")
    ax2.set_ylabel("untaped advances per step")
    ax2.set_title("recomputation: measured vs binomial optimum", fontsize=9)
    ax2.legend(fontsize=7)
    return fig


def plot_evaluations(results: Sequence[RunResult]) -> Any:
    """Measured step evaluations of every cell against the optimum t(l,s)+l (diagonal)."""
    fig, ax = _figure(5.0, 4.0)
    lo, hi = math.inf, 0.0
    for strat in Strategy:
        pts = []
        for r in results:
            s = _summary(r)
            if r.case.strategy == strat.value and s["step_evaluations"] is not None:
                pts.append((s["step_evaluations_optimal"], s["step_evaluations"]))
        if pts:
            ax.plot(
                *zip(*pts, strict=True), _STRATEGY_MARKERS.get(strat.value, "o"), label=strat.value
            )
            lo = min(lo, *(min(p) for p in pts))
            hi = max(hi, *(max(p) for p in pts))
    if hi > 0:
        ax.plot([lo, hi], [lo, hi], "-", color="black", lw=0.8, label="measured = optimal")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("optimal evaluations t(l,s)+l")
    ax.set_ylabel("measured evaluations")
    ax.set_title("step evaluations: measured vs optimal", fontsize=9)
    ax.legend(fontsize=7)
    return fig


# --------------------------------------------------------------------------- HTML


_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#f2f2f2} td:first-child,td:nth-child(2){text-align:left}
.changed{background:#fde0dc} .better{background:#e3f4e1} img{max-width:100%}
.note{color:#555;font-size:12px}
"""


def _html_table(headers: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"]
    for i, r in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes and classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _img(fig: Any, alt: str) -> str:
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{_png(fig)}"></p>'


def render_html(comparison: Comparison, max_timelines: int = 24) -> str:
    """One self-contained page: tables, then the plots as embedded PNG (no external files)."""
    results = list(comparison.after)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ckptbench report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>ckptbench report</h1>",
        f"<p class='note'>{len(results)} result file(s). Memory is RSS (touched pages), "
        "median exact per-iteration peak; overhead is over the forward-only baseline in an "
        "identical fresh process. Times are median seconds per iteration.</p>",
        "<h2>Cells</h2>",
        _html_table(*_cell_rows(comparison.table())),
    ]
    if comparison.has_before:
        head, rows = _delta_rows(comparison)
        classes = []
        for cell in comparison.cells:
            for mc in cell.modes:
                worse = (mc.memory and mc.memory.regressed) or (
                    mc.time and mc.time.verdict == "slower"
                )
                better = (mc.memory and mc.memory.changed) or (mc.time and mc.time.significant)
                classes.append("changed" if worse else "better" if better else "")
        parts += ["<h2>Before → after</h2>", _html_table(head, rows, classes)]
        parts.append(f"<p class='note'>{html.escape(_rule_text(comparison))}</p>")
        parts += [f"<p class='note'>{html.escape(u)}</p>" for u in _unmatched(comparison)]
    groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in results:
        groups.setdefault(cell_family(r.case), []).append(r)
    parts.append("<h2>Memory-time trade-off</h2>")
    for group in groups.values():
        parts.append(_img(plot_tradeoff(group), "trade-off"))
    parts.append("<h2>Step evaluations</h2>")
    parts.append(_img(plot_evaluations(results), "evaluations"))
    parts.append("<h2>RSS timelines</h2>")
    shown = [r for r in results if any(m.timeline for m in r.modes)][:max_timelines]
    for r in shown:
        parts.append(_img(plot_timeline(r), f"timeline {r.case.key}"))
    if len(shown) < len(results):
        parts.append(f"<p class='note'>{len(results) - len(shown)} timeline(s) not shown.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
