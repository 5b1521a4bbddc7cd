"""What ``ckptbench run`` and ``ckptbench schedule`` show: the run table, the headline
sentence, warnings and failures, and the schedule's cost table. Returns tables (see
:mod:`ckptbench.render.table`) and strings; never prints."""

from __future__ import annotations

from typing import Any

from ckptbench.analysis import busy_modes, mode_peak_bytes
from ckptbench.render.format import fmt_bytes, fmt_ratio, fmt_time, fmt_time_spread
from ckptbench.render.table import Column, Table
from ckptbench.results import Mode, RunResult, Status
from ckptbench.revolve import ReplayStats, optimal_forward_steps, repetition_number

__all__ = [
    "closed_form_table",
    "failure_lines",
    "fmt_bytes",
    "headline",
    "limit_outcome",
    "plan_table",
    "run_table",
    "schedule_table",
    "warning_lines",
]


def limit_outcome(result: RunResult) -> str | None:
    """'plain autograd needed more than 100.0 MiB; checkpointed ran in +2.7 MiB over
    baseline' when normal mode was stopped at the memory limit and checkpointed completed."""
    normal, ckpt = result.mode(Mode.NORMAL), result.mode(Mode.CHECKPOINTED)
    limit = result.case.memory_limit_bytes
    if normal is None or ckpt is None or limit is None:
        return None
    if normal.status is not Status.OUT_OF_MEMORY or not ckpt.ok:
        return None
    over = result.summary.get("overhead_bytes", {}).get(Mode.CHECKPOINTED.value)
    ran = (
        f"checkpointed ran in {fmt_bytes(over, signed=True)} over baseline"
        if over is not None
        else f"checkpointed ran within it (peak {fmt_bytes(mode_peak_bytes(ckpt))})"
    )
    return f"plain autograd needed more than {fmt_bytes(limit)}; {ran}"


def headline(result: RunResult) -> str:
    """The sentence people quote: 'slowdown 1.12x, memory savings 35.2x' (plus context)."""
    s, c = result.summary, result.case
    parts = [f"{c.model} {c.steps} steps, {c.snaps} snaps ({c.strategy}):"]
    limited = limit_outcome(result)
    if limited is not None:
        parts.append(limited)
    else:
        parts += [
            f"slowdown {fmt_ratio(s.get('slowdown'))},",
            f"memory savings {fmt_ratio(s.get('memory_savings'), 1)}",
        ]
    ev, opt = s.get("step_evaluations"), s.get("step_evaluations_optimal")
    if ev is not None:
        parts.append(f"— {ev} step evaluations (optimal {opt})")
    ckpt = result.mode(Mode.CHECKPOINTED)
    if ckpt is not None and ckpt.ok and ckpt.grad_max_rel_err is None:
        parts.append("— gradient NOT verified (no normal-mode gradient to compare)")
    if not s.get("ok", False):
        failed = [m for m, st in s.get("status", {}).items() if st != "ok"]
        if limited is not None:  # normal's stop at the limit is said above
            failed = [m for m in failed if m != Mode.NORMAL.value]
        if failed:
            parts.append(f"— FAILED: {', '.join(failed)}")
    return " ".join(parts)


def _text(value: Any, _record: dict[str, Any]) -> str:
    return "-" if value is None else str(value)


def run_table(result: RunResult) -> Table:
    """One row per mode: peaks, overhead, time, ratios, evaluations, gradient error.

    At 100 columns the sampled peak, the gradient error, the time range and the
    evaluations are left out, in that order; mode names and numbers are never cut."""
    s = result.summary
    overhead = s.get("overhead_bytes", {})
    times_s = s.get("time_s", {})
    limit = result.case.memory_limit_bytes
    records = []
    for m in result.modes:
        evals = m.counters.get("step_calls")
        if m.mode is Mode.CHECKPOINTED and evals is not None:
            ev = f"{evals} / {s.get('step_evaluations_optimal')}"
        else:
            ev = "-" if evals is None else str(evals)
        peak = fmt_bytes(mode_peak_bytes(m))
        over = overhead.get(m.mode.value)
        over_text = fmt_bytes(over, signed=True)
        base = s.get("peak_rss_bytes", {}).get(Mode.BASELINE.value)
        if m.status is Status.OUT_OF_MEMORY and limit is not None:
            peak = f"> {fmt_bytes(limit)}"
            if base is not None and limit > base:
                over_text = f"> {fmt_bytes(limit - base, signed=True)}"
        t = times_s.get(m.mode.value)
        records.append(
            {
                "mode": m.mode.value,
                "status": m.status.value,
                "peak": peak,
                "sampled": fmt_bytes(m.sampled_peak_rss_bytes),
                "overhead": "(floor)" if m.mode is Mode.BASELINE else over_text,
                "time": fmt_time(t["median"]) if t else "-",
                "range": fmt_time_spread(t),
                "slowdown": fmt_ratio(s.get("slowdown"))
                if m.mode is Mode.CHECKPOINTED
                else ("1.00x" if m.mode is Mode.NORMAL and t else "-"),
                "savings": fmt_ratio(s.get("memory_savings"), 1)
                if m.mode is Mode.CHECKPOINTED
                else "-",
                "evals": ev,
                "err": "-" if m.grad_max_rel_err is None else f"{m.grad_max_rel_err:.1e}",
            }
        )
    columns = (
        Column("mode", "mode", _text, "left"),
        Column("status", "status", _text, "left"),
        Column("peak", "exact peak", _text),
        Column("sampled", "sampled", _text, priority=5),
        Column("overhead", "overhead", _text),
        Column("time", "time/iter", _text),
        Column("range", "[min, max] s", _text, priority=3),
        Column("slowdown", "slowdown", _text),
        Column("savings", "savings", _text),
        Column("evals", "evals (opt)", _text, priority=2),
        Column("err", "grad err", _text, priority=4),
    )
    bad = {st.value: "red" for st in Status if st is not Status.OK}
    return Table(f"ckptbench run — {result.case.key}", columns, tuple(records), styles=bad)


def warning_lines(result: RunResult) -> list[str]:
    """Measurement caveats worth a line: a busy machine."""
    lines = []
    busy = busy_modes(result.summary)
    if busy:
        shares = ", ".join(f"{m} {v:.0%}" for m, v in busy.items())
        lines.append(
            f"the machine was busy: workers got only {shares} of a core (CPU/wall time); "
            "times and slowdown are not trustworthy, memory is"
        )
    return lines


def failure_lines(result: RunResult) -> list[str]:
    """One line per failed mode with its error and the last stderr line, if any."""
    lines = []
    for m in result.modes:
        if not m.ok:
            tail = (m.stderr_tail or "").strip().splitlines()
            extra = f" (stderr: {tail[-1]})" if tail else ""
            code = f", exit status {m.exit_code}" if m.exit_code is not None else ""
            lines.append(f"{m.mode.value}: {m.status.value}{code}: {m.error}{extra}")
    return lines


def _quantities(title: str, rows: list[tuple[str, str]]) -> Table:
    columns = (Column("quantity", "quantity", align="left"), Column("value", "value"))
    records = tuple({"quantity": k, "value": v} for k, v in rows)
    return Table(title, columns, records, show_header=False)


def closed_form_table(steps: int, snaps: int, strategy: str) -> Table:
    """A schedule's cost from the formulas alone (no enumeration), for any size."""
    s = min(snaps, steps)
    if strategy == "store-all":
        t, peak, r = steps - 1, steps, 1
    else:
        t, peak, r = optimal_forward_steps(steps, s), s, repetition_number(steps, s)
    rows = [
        ("repetition number r(l, s)", str(r)),
        ("advances t (untaped steps, first sweep included)", f"{t}"),
        ("taped steps", f"{steps}"),
        ("total step evaluations (t + l)", f"{t + steps}"),
        ("recomputation factor t / l", f"{t / steps:.3f}"),
        ("peak snapshots (at most)", f"{peak}"),
        ("max advances of one step (at most)", f"{r}"),
    ]
    return _quantities(f"{strategy} schedule: {steps} steps, {snaps} snaps (closed form)", rows)


def schedule_table(stats: ReplayStats, snaps: int, strategy: str, gen_s: float | None) -> Table:
    """What a schedule costs: r, t, evaluations, recomputation factor, peak snapshots."""
    opt = optimal_forward_steps(stats.steps, min(snaps, stats.steps))
    rows = [
        ("repetition number r(l, s)", str(repetition_number(stats.steps, snaps))),
        ("advances t (untaped steps, first sweep included)", f"{stats.advances}"),
        ("binomial optimum t(l, s)", f"{opt}"),
        ("taped steps", f"{stats.taped}"),
        ("total step evaluations (t + l)", f"{stats.evaluations}"),
        ("recomputation factor t / l", f"{stats.advances / stats.steps:.3f}"),
        ("peak snapshots", f"{stats.peak_snapshots}"),
        ("max advances of one step", f"{stats.max_step_advances}"),
        ("actions", f"{stats.actions}"),
    ]
    if gen_s is not None:
        rows.append(("generation time (full schedule)", f"{gen_s * 1e3:.1f} ms"))
    return _quantities(f"{strategy} schedule: {stats.steps} steps, {snaps} snaps", rows)


def plan_table(rows: list[dict[str, Any]], costs: Any, steps: int, budget_bytes: int) -> Table:
    """The ``plan`` table: each strategy's predicted time and peak storage at one budget.
    ``costs`` is the planner's step-cost table (``costs.per_step(steps)`` gives per-step
    (untaped s, taped + reverse s, state bytes, tape bytes) sequences)."""
    fwd, taped, state, tape = (v[0] for v in costs.per_step(steps))
    homogeneous = costs.steps is None
    title = (
        f"plans for {steps} steps within {fmt_bytes(budget_bytes)}; step costs: untaped "
        f"{fwd * 1e3:.3f} ms, taped + reverse {taped * 1e3:.3f} ms, state "
        f"{state / 1024:.0f} KiB, tape {tape / 1024:.0f} KiB"
        + ("" if homogeneous else " (first step; costs vary per step)")
    )
    records = []
    for r in rows:
        tapes = "-" if r["tapes_kept"] is None else f"{r['tapes_kept']} ({r['peak_tapes']})"
        records.append(
            {
                **r,
                "tapes": tapes,
                "time": fmt_time(r["predicted_time_s"]),
                "peak": fmt_bytes(r["peak_bytes"]),
            }
        )
    columns = (
        Column("strategy", "strategy", _text, "left"),
        Column("snaps", "snaps", _text),
        Column("tapes", "tapes kept (peak)", _text, priority=3),
        Column("advances", "advances", _text, priority=2),
        Column("time", "predicted time", _text),
        Column("peak", "predicted peak", _text),
        Column("note", "note", _text, "left"),
    )
    return Table(title, columns, tuple(records))
