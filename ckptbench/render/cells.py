"""The tables of ``ckptbench compare``: one row per result (the cells) and, with a reference,
one row per paired cell and mode (before -> after), in every export format."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ckptbench.analysis import Comparison
from ckptbench.analysis.intervals import INVOCATION_SD_TIME
from ckptbench.analysis.stats import percent_text
from ckptbench.frame import cells_frame, invocations_frame
from ckptbench.render.format import (
    MIB,
    cell_labels,
    common_fields,
    fmt_bytes,
    fmt_interval,
    fmt_overhead,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_time,
    missing,
    short_labels,
    told_apart,
)
from ckptbench.render.legends import DELTA_LEGEND, TIME_METHODS, shown_legend, time_method
from ckptbench.render.table import Column, Table
from ckptbench.results.schema import Mode, RunResult, Status

__all__ = [
    "cells_table",
    "csv_columns",
    "delta_table",
    "invocations_table",
    "rule_text",
    "unmatched_lines",
]


def _ratio1(v: Any, _r: dict[str, Any]) -> str:
    return fmt_ratio(v, 1)


def _ratio2(v: Any, r: dict[str, Any]) -> str:
    """A time ratio ('1.18x'), marked where the cell's times are unstable."""
    return fmt_ratio(v, 2) + ("" if missing(v) else _star(r))


def _mib(v: Any, _r: dict[str, Any]) -> str:
    return fmt_bytes(v, digits=2, unit=False)


def _short(_v: Any, r: dict[str, Any]) -> str:
    return r["short"]


def _star(r: dict[str, Any]) -> str:
    """The warnings' mark of a cell whose time figures are unstable."""
    return "*" if r.get("time_unstable") else ""


def _s(v: Any, r: dict[str, Any]) -> str:
    return fmt_time(v, unit=False) + ("" if missing(v) else _star(r))


def _ci(name: str, digits: int, star: bool = False):
    """A figure with its 95% interval, '1.31x [1.25, 1.37]*' (``name``_low/_high)."""

    def text(v: Any, r: dict[str, Any]) -> str:
        low, high = r.get(f"{name}_low"), r.get(f"{name}_high")
        ci = None if missing(low) or missing(high) else (low, high)
        mark = _star(r) if star and not missing(v) else ""
        return fmt_ratio_ci(None if missing(v) else v, ci, digits) + mark

    return text


#: a mode's name in a narrow status, as the table's headers shorten it
_MODE_SHORT = {"baseline": "base", "normal": "normal", "checkpointed": "ckpt"}


def _status_short(v: Any, _r: dict[str, Any]) -> str:
    """'interrupted in round 3' for 'interrupted in round 3 (2 complete rounds)'; the modes
    of one status together, 'base, normal, ckpt failed' for 'baseline: failed, normal:
    failed, checkpointed: failed'."""
    if not v:
        return "-"
    text = str(v).split(" (")[0]
    parts = [p.partition(": ") for p in text.split(", ")]
    if not all(sep and m in _MODE_SHORT for m, sep, _ in parts):
        return text
    by_status: dict[str, list[str]] = {}
    for mode, _, status in parts:
        by_status.setdefault(status, []).append(_MODE_SHORT[mode])
    return "; ".join(f"{', '.join(modes)} {status}" for status, modes in by_status.items())


def _over(mode: str, narrow: bool = False):
    """A mode's overhead with its interval ('+12.31 [+12.10, +12.52]'; where the width is
    short '+12.31', signed as in the wide table), and '< noise (±X)' within its noise at
    every width; '> +X' for a mode stopped at the memory limit."""

    def text(v: Any, r: dict[str, Any]) -> str:
        above = r.get(f"{mode}_overhead_above_bytes")
        if missing(v) and not missing(above):  # stopped at the memory limit, as run says it
            return f"> {fmt_bytes(above, digits=2, unit=False, signed=True)}"
        parts = {k: r.get(f"{mode}_overhead_{k}_bytes") for k in ("low", "high", "noise")}
        below = r.get(f"{mode}_overhead_below_noise")
        signed = fmt_bytes(v, digits=2, unit=False, signed=True)
        if below is None or any(missing(x) for x in parts.values()):
            return signed  # no interval (a failed mode)
        if narrow and not below:
            return signed  # the interval is in the wide table and the CSV
        return fmt_overhead({"value": v, **parts, "below_noise": below}, digits=2, unit=False)

    return text


def _evals(v: Any, r: dict[str, Any]) -> str:
    opt = r["evaluations_optimal"]
    return f"{'-' if missing(v) else int(v)} ({'-' if missing(opt) else int(opt)})"


def cells_table(results: Sequence[RunResult]) -> Table:
    """One row per result file: the numbers people quote, recomputed from raw samples by
    :func:`ckptbench.frame.cells_frame` (pandas pivots the tidy frame). Raw columns are
    bytes and seconds (median per iteration)."""
    # invocations of one cell read the same: each row says where it was read from
    labels = told_apart(cell_labels([r.case for r in results]), results)
    shorts = told_apart(short_labels([r.case for r in results]), results)
    frame = cells_frame(results)
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    records = [
        {**row, "label": label, "short": short}
        for row, label, short in zip(rows, labels, shorts, strict=True)
    ]
    hosts = {r.host for r in results}
    host_priority = 1 if len(hosts) > 1 else 0 if len(results) > 1 else 9
    on_gpu = 1 if frame["device_memory_savings"].notna().any() else 0
    identity = ("key", "model", "steps", "snaps", "strategy", "hidden", "batch")
    raw = [Column(k, priority=0) for k in (*identity, "budget_bytes", "dtype", "executor")]
    columns = (
        Column("label", "cell", align="left", narrow=_short, narrow_priority=2, number_priority=2),
        # one host: named in the note below (several cells), or left out first (one cell)
        Column("host", "host", lambda v, _r: v or "-", "left", priority=host_priority),
        *raw,
        Column("baseline_peak_bytes", "base MiB", _mib, priority=5),
        Column("baseline_peak_spread_bytes", "base spread", _mib, priority=5),
        Column(
            "normal_overhead_bytes",
            "normal +MiB",
            _over("normal"),
            narrow=_over("normal", narrow=True),
            narrow_priority=2,
            narrow_drops="their intervals",
        ),
        Column(
            "checkpointed_overhead_bytes",
            "ckpt +MiB",
            _over("checkpointed"),
            narrow=_over("checkpointed", narrow=True),
            narrow_priority=2,
            narrow_drops="their intervals",
        ),
        Column("normal_time_s", "normal s", _s, priority=4),
        Column("checkpointed_time_s", "ckpt s", _s, priority=3),
        Column("slowdown", "slowdown [95%]", _ci("slowdown", 2, star=True)),
        # the recomputation floor: plain + extra evaluations at their forward-only time
        Column("floor_time_s", priority=0),
        Column("vs_floor", "vs floor [95%]", _ci("vs_floor", 2, star=True), priority=3),
        # host RSS savings: on a GPU report the device's savings are the figure, the host's
        # go before the time columns when the width is short
        Column(
            "memory_savings", "savings [95%]", _ci("memory_savings", 1), priority=1 + 3 * on_gpu
        ),
        # GPU cells: the device's memory, beside host RSS (absent when no cell ran on one)
        Column("checkpointed_device_overhead_bytes", "ckpt dev +MiB", _mib, priority=on_gpu),
        Column("device_memory_savings", "dev savings", _ratio1, priority=on_gpu),
        *(  # raw, for the CSV: the intervals behind the overhead and savings columns
            Column(f"{mode}_overhead_{k}", priority=0)
            for mode in ("normal", "checkpointed")
            for k in ("low_bytes", "high_bytes", "noise_bytes", "below_noise")
        ),
        Column("memory_savings_low", priority=0),
        Column("memory_savings_high", priority=0),
        Column("forward_steps", priority=0),
        Column("forward_steps_optimal", priority=0),
        Column("evaluations", "evals (opt)", _evals, priority=2),
        Column("evaluations_optimal", priority=0),
        Column(
            "grad_max_rel_err",
            "grad err",
            lambda v, _r: "-" if missing(v) else f"{v:.1e}",
            priority=4,
        ),
        # a failed cell's figures read '-': its status, which says why, goes last
        Column("status", "status", align="left", narrow=_status_short, narrow_priority=4,
               keep=any(r.get("status") != Status.OK.value for r in records)),
    )  # fmt: skip
    common = common_fields([r.case for r in results])
    if len(hosts) == 1 and len(results) > 1:
        common = f"{common} on host {next(iter(hosts)) or '-'}".strip()
    notes = (f"every cell: {common}",) if common and len(results) > 1 else ()
    return Table("Cells", columns, tuple(records), notes=notes, legend=shown_legend(results))


def invocations_table(results: Sequence[RunResult]) -> Table | None:
    """Cells measured by several result files on one host: slowdown and savings pooled over
    the invocations (random effects, :mod:`ckptbench.analysis.pooling`), with the spread
    between invocations that no single run's interval sees. None when no cell repeats."""
    frame = invocations_frame(results)
    if frame.empty:
        return None
    labels = cell_labels([r.case for r in results])
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    records = [{**row, "label": labels[row["first_run"]]} for row in rows]

    def pooled(name: str, digits: int):
        def text(v: Any, r: dict[str, Any]) -> str:
            return fmt_ratio_ci(v, (r[f"{name}_low"], r[f"{name}_high"]), digits)

        return text

    def spread(name: str, digits: int):
        def text(v: Any, r: dict[str, Any]) -> str:
            if missing(v):
                return "-"
            return f"{r[f'{name}_min']:.{digits}f}-{r[f'{name}_max']:.{digits}f}, tau {v:.1%}"

        return text

    def runs(v: Any, r: dict[str, Any]) -> str:
        return f"{v} ({r['partial']} partial)" if r["partial"] else str(v)

    columns = (
        Column("label", "cell", align="left"),
        Column("host", "host", lambda v, _r: v or "-", "left", priority=2),
        Column("invocations", "runs", runs),
        Column("slowdown", "slowdown, pooled [95%]", pooled("slowdown", 2)),
        Column("slowdown_tau", "runs' slowdowns", spread("slowdown", 2), priority=2),
        Column("memory_savings", "savings, pooled [95%]", pooled("memory_savings", 1)),
        Column("memory_savings_tau", "runs' savings", spread("memory_savings", 1), priority=3),
    )
    note = [
        "pooled over invocations by a random-effects model (DerSimonian-Laird tau, "
        "Hartung-Knapp t interval): the interval includes the drift between invocations "
        "(tau) that no single run can see"
    ]
    two = [r["label"] for r in records if r["slowdown_runs"] == 2 or r["memory_savings_runs"] == 2]
    if two:
        note.append(
            f"pooled from two runs ({', '.join(two)}): one degree of freedom (t = 12.7), so the "
            "interval is wide by design; a third run narrows it"
        )
    for r in records:
        if r["partial"]:
            used = ", ".join(
                f"{what} from {r[f'{name}_runs']}"
                for name, what in (("slowdown", "slowdown"), ("memory_savings", "savings"))
            )
            note.append(
                f"{r['label']}: {r['partial']} of {r['invocations']} runs are partial or failed "
                f"(a mode missing or not ok); pooled {used} runs ('-': fewer than two)"
            )
        bare = [
            f"{n} run{'s' * (n > 1)}'{'' if n > 1 else 's'} {what}"
            for name, what in (("slowdown", "slowdown"), ("memory_savings", "savings"))
            if (n := r.get(f"{name}_bare"))
        ]
        if bare:
            note.append(
                f"{r['label']}: pooled without {' and '.join(bare)}: no interval to weigh it "
                "by (one iteration a side, or no spread)"
            )
        if r["versions"]:
            note.append(f"{r['label']}: runs of different ckptbench versions ({r['versions']})")
        if r["codes"] > 1:
            note.append(
                f"{r['label']}: its runs ran {r['codes']} different versions of the plug-in's "
                "source: the pool mixes models"
            )
        if r["plans"] > 1:
            note.append(
                f"{r['label']}: its runs ran {r['plans']} different plans (step costs measured "
                "per invocation or read from different --costs files): the pool mixes schedules"
            )
    return Table("Invocations of one cell", columns, tuple(records), notes=tuple(note))


def _delta_text(v: Any, r: dict[str, Any]) -> str:
    if missing(v):
        return "-"
    rel = r["memory_delta_rel"]
    rel_text = f" ({rel:+.1%})" if not missing(rel) else ""
    return f"{fmt_bytes(v, signed=True, digits=2, unit=False)}{rel_text}" + (
        " CHANGED" if r["memory_changed"] else ""
    )


def _time_interval(v: Any, r: dict[str, Any]) -> str:
    """new/old's 95% interval, '[0.962, 1.041]' (an end far off new/old as a bound)."""
    if missing(v):
        return "-"
    return fmt_interval(v, r["time_ratio_high"], 3, center=r.get("time_ratio"))


def _versus(after: str):
    """A before-v-after count: '2v3' (the row's ``after`` field after the v)."""
    return lambda v, r: "-" if missing(v) else f"{v}v{r[after]}"


def delta_table(comparison: Comparison) -> Table:
    """One row per paired (cell, host, mode): memory delta and time test."""
    labels = cell_labels([cell.case for cell in comparison.cells])
    shorts = short_labels([cell.case for cell in comparison.cells])
    records = []
    for cell, label, short in zip(comparison.cells, labels, shorts, strict=True):
        for mc in cell.modes:
            mem, tt = mc.memory, mc.time
            records.append(
                {
                    "key": cell.key,
                    "host": cell.host,
                    "mode": mc.mode.value,
                    # what the memory figures are: the baseline's peak, another's overhead
                    "memory_measure": "peak" if mc.mode is Mode.BASELINE else "overhead",
                    "memory_before_bytes": mem.before_bytes if mem else None,
                    "memory_after_bytes": mem.after_bytes if mem else None,
                    "memory_delta_bytes": mem.delta_bytes if mem else None,
                    "memory_delta_rel": mem.delta_rel if mem else None,
                    "memory_changed": mem.changed if mem else None,
                    "time_before_s": tt.before_median_s if tt else None,
                    "time_after_s": tt.after_median_s if tt else None,
                    "time_change": tt.change if tt else None,
                    "time_ratio": tt.ratio if tt else None,
                    # an unbounded interval (one iteration a side) is none: '-'
                    "time_ratio_low": tt.low if tt and tt.high < math.inf else None,
                    "time_ratio_high": tt.high if tt and tt.high < math.inf else None,
                    "processes_before": tt.processes_before if tt else None,
                    "processes_after": tt.processes_after if tt else None,
                    "n_before": tt.n_before if tt else None,
                    "n_after": tt.n_after if tt else None,
                    "time_significant": tt.significant if tt else None,
                    "time_method": time_method(tt.by_process) if tt else None,
                    "verdict": tt.verdict if tt else "n/a",
                    "note": mc.note,
                    "label": label,
                    "short": short,
                }
            )

    def verdict(v: Any, r: dict[str, Any]) -> str:
        return v + (f" [{r['note']}]" if r["note"] else "")

    def num(spec: str):
        return lambda v, _r: "-" if missing(v) else format(v, spec)

    hosts = {cell.host for cell in comparison.cells}
    columns = (
        Column("label", "cell", align="left", narrow=_short, narrow_priority=2, number_priority=2),
        Column("key", priority=0),
        Column("host", "host", lambda v, _r: v or "-", "left", priority=2 if len(hosts) < 2 else 1),
        Column("mode", "mode", align="left"),
        Column("memory_measure", "memory", align="left"),
        Column("memory_before_bytes", "memory before MiB", _mib, priority=2),
        Column("memory_after_bytes", "after MiB", _mib),
        Column("memory_delta_bytes", "delta", _delta_text),
        Column("memory_delta_rel", priority=0),
        Column("memory_changed", priority=0),
        Column("time_before_s", "time before s", num(".4f"), priority=3),
        Column("time_after_s", "after s", num(".4f"), priority=2),
        Column("time_change", "change", num("+.1%")),
        Column("time_ratio_low", "new/old 95%", _time_interval, priority=2),
        Column("time_ratio", priority=0),
        Column("time_ratio_high", priority=0),
        Column("processes_before", "processes", _versus("processes_after"), priority=4),
        Column("processes_after", priority=0),
        Column("n_before", "n", _versus("n_after"), priority=4),
        Column("n_after", priority=0),
        Column("time_significant", priority=0),
        Column("time_method", priority=0),
        Column("verdict", "time verdict", verdict, "left"),
        Column("note", priority=0),
    )
    common = common_fields([cell.case for cell in comparison.cells])
    notes = (f"every cell: {common}",) if common and len(comparison.cells) > 1 else ()
    return Table("Before -> after", columns, tuple(records), notes=notes, legend=DELTA_LEGEND)


def csv_columns(table: Table) -> Table:
    """The CSV keeps the raw fields (key first), not the display label; what a row's
    memory figures are (``memory_measure``) and how its time ratio was taken
    (``time_method``) last, after the columns CSVs always had."""
    cols = tuple(c for c in table.columns if c.key not in ("label", "short"))
    key = next(c for c in cols if c.key == "key")
    later = ("memory_measure", "time_method")
    late = tuple(c for k in later for c in cols if c.key == k)
    cols = (key, *(c for c in cols if c.key not in ("key", *later)), *late)
    return Table(table.title, cols, table.records)


def rule_text(comparison: Comparison) -> str:
    s = comparison.settings
    effect = s["min_effect"]
    used = sorted(
        {mc.time.by_process for c in comparison.cells for mc in c.modes if mc.time},
        reverse=True,
    )
    how = "; ".join(TIME_METHODS[u] for u in used or (True, False))
    return (
        f"Memory: changed when |delta| > max({percent_text(s['memory_tolerance'])} of before, "
        f"{s['memory_floor_bytes'] / MIB:.2f} MiB); normal/checkpointed compare overhead over "
        f"baseline. Time: the ratio new/old of a mode's times with its 95% interval, widened "
        f"by an allowance for the spread between invocations that no run measures "
        f"({INVOCATION_SD_TIME:.1%} a side): {how}; slower when the whole interval lies "
        f"above {1 + effect:.4g}, faster when it lies below {1 / (1 + effect):.4g}."
    )


def _single_process_note(comparison: Comparison) -> list[str]:
    single = any(
        mc.time is not None and min(mc.time.processes_before, mc.time.processes_after) < 2
        for cell in comparison.cells
        for mc in cell.modes
    )
    if not single:
        return []
    return [
        "Times come from a single worker process on one side or both: a whole process "
        "running slow (other load on the machine) shifts all its iterations, and a side with "
        "one process measures no spread between processes (with one a side the interval sees "
        "the iterations alone, and that allowance; with one on one side, it takes that "
        "spread from the other side). Rerun the "
        "sweep into a second folder and pass both (files of one cell on one host pool) "
        "before trusting a time verdict."
    ]


def unmatched_lines(comparison: Comparison) -> list[str]:
    """Notes on the pairing: settings that differ, single processes, unpaired cells."""
    out = [*comparison.notes, *_single_process_note(comparison)]
    for label, keys in (
        ("only before", comparison.only_before),
        ("only after", comparison.only_after),
    ):
        if keys:
            out.append(f"{label}: " + ", ".join(f"{k}@{h}" if h else k for k, h in keys))
    return out
