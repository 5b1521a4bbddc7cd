"""``run --trace`` shown: the schedule as it ran, one row per action, and a plot of planned
vs measured memory over the schedule (see docs/trace.md).

The rows come from the checkpointed mode's ``trace`` section (``measure/trace.py``); the
slack and the actions above it from :mod:`ckptbench.analysis.trace`. ``run`` shows the table
and its notes in every format (text, markdown, CSV, JSON records through the table model;
plain text only the first and last actions), after the time per layer
(:mod:`ckptbench.render.trace_time`) where the trace has times;
``compare``'s HTML report adds the plot and the table when a result has a trace.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ckptbench.analysis.trace import over_slack, trace_of, trace_slack
from ckptbench.render.format import MIB, fmt_bytes
from ckptbench.render.formats.model import Figure, Prose, Section, TableSection
from ckptbench.render.layers import name_column
from ckptbench.render.table import Column, Table
from ckptbench.render.trace_time import layer_time_table
from ckptbench.results.schema import RunResult

__all__ = ["TEXT_ROWS", "plot_trace", "trace_notes", "trace_page", "trace_sections", "trace_table"]

#: The action rows plain text shows (the first and last ones; every other format all).
TEXT_ROWS = 16


def _kib(value: Any, _record: dict[str, Any]) -> str:
    return fmt_bytes(value, digits=2)


def _cols(device: bool) -> tuple[Column, ...]:
    cols = [
        Column("index", "#"),
        Column("kind", "action", align="left"),
        name_column("layer", "step (layer)"),
        Column("stored", "stored", align="left", priority=3),
        Column("freed", "freed", align="left", priority=3),
        Column("taped", "taped", align="left", priority=4),
        Column("recomputed", "recomputed", align="left", priority=4),
        Column("planned_bytes", "planned", _kib),
        Column("measured_bytes", "measured", _kib),
        Column("over", "over slack", align="left", priority=2),
        Column("step", "", priority=0),
    ]
    if device:
        cols.insert(9, Column("device_bytes", "device", _kib))
    return tuple(cols)


def trace_table(result: RunResult) -> Table | None:
    """Every action of the traced iteration (None without a trace)."""
    found = trace_of(result)
    if found is None:
        return None
    _, trace = found
    rows = trace["rows"]
    slack = trace_slack(result)
    over = {r["index"] for r in over_slack(rows, slack)} if slack is not None else set()
    records = tuple({**r, "over": "over" if r["index"] in over else ""} for r in rows)
    device = any("device_bytes" in r for r in rows)
    return Table(
        "Trace: the checkpointed schedule as it ran (planned stored bytes, measured memory "
        "above the trace's start)",
        _cols(device),
        records,
        notes=tuple(trace_notes(result)),
    )


def trace_notes(result: RunResult) -> list[str]:
    """What the trace is, how memory was read and the slack (or why there is no trace)."""
    for mode in result.modes:
        trace = getattr(mode, "trace", None)
        if trace and trace.get("unavailable"):
            return [f"no trace: {trace['unavailable']}"]
    found = trace_of(result)
    if found is None:
        return []
    _, trace = found
    how = {
        "vmhwm-per-action": "each action's peak RSS (heap trimmed, VmHWM reset before it)",
        "rss-after": "RSS after each action (no resettable peak on this system)",
    }.get(trace.get("method"), str(trace.get("method")))
    lines = [f"{trace.get('note', '')}; measured: {how}, above the start"]
    slack = trace_slack(result)
    if slack is not None:
        lines.append(slack.describe())
    return lines


def trace_sections(result: RunResult, heading: str = "Trace") -> list[Section]:
    """The trace's table under ``heading`` (nothing without a trace; a note where the mode
    could not be traced)."""
    table = trace_table(result)
    if table is not None:
        times = layer_time_table(result)
        timed = [TableSection(times, times.title if heading else "")] if times else []
        return [*timed, TableSection(table, heading, text_rows=TEXT_ROWS)]
    notes = trace_notes(result)
    return [Prose(tuple(notes), heading, "note")] if notes else []


def trace_page(results: list[RunResult]) -> list[Section]:
    """The HTML report's traces: per traced result its plot, then its table."""
    sections: list[Section] = []
    for r in results:
        if trace_of(r) is None:
            continue
        sections.append(Figure(f"Trace {r.case.key}", ((partial(plot_trace, r), "trace"),)))
        sections += trace_sections(r, heading="")  # under the plot's heading
    return sections


def plot_trace(result: RunResult) -> Any:
    """Planned stored bytes and measured memory (both above the trace's start) per action;
    the actions above the slack are marked."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9.3, 3.8), layout="constrained")
    found = trace_of(result)
    if found is None:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return fig
    rows = found[1]["rows"]
    x = [r["index"] for r in rows]
    ax.step(x, [r["planned_bytes"] / MIB for r in rows], where="mid", label="planned (stored)")
    ax.plot(x, [(r["measured_bytes"] or 0) / MIB for r in rows], lw=0.9, label="measured (RSS)")
    if any("device_bytes" in r for r in rows):
        ax.plot(x, [r.get("device_bytes", 0) / MIB for r in rows], lw=0.9, label="device")
    slack = trace_slack(result)
    if slack is not None and slack.tape_bytes is not None:
        allowed = [(r["planned_bytes"] + (slack.of(r) or 0)) / MIB for r in rows]
        ax.step(x, allowed, where="mid", lw=0.5, color="#bbbbbb", zorder=1,
                label="planned + slack")  # fmt: skip
        over = over_slack(rows, slack)
        if over:
            ax.scatter([r["index"] for r in over], [r["measured_bytes"] / MIB for r in over],
                       color="#d62728", s=12, zorder=3, label="over planned + slack")  # fmt: skip
    turn = next((r["index"] for r in rows if r["kind"] == "FIRSTURN"), None)
    if turn is not None:
        ax.axvline(turn, color="#777777", lw=0.8, ls=":", label="first sweep ends")
    ax.set_xlabel("action of the schedule")
    ax.set_ylabel("MiB above the trace's start")
    ax.set_title(f"{result.case.model} {result.case.steps} steps, {result.case.strategy}")
    ax.legend(loc="upper left", fontsize="small")
    return fig
