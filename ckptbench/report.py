"""Render results as rich tables and one-line summaries. Returns objects; never prints."""

from __future__ import annotations

from rich.table import Table

from ckptbench.analysis import mode_peak_bytes
from ckptbench.results import Mode, RunResult
from ckptbench.revolve import ReplayStats, optimal_forward_steps, repetition_number

__all__ = ["fmt_bytes", "headline", "run_table", "schedule_table"]


def fmt_bytes(n: float | None, signed: bool = False) -> str:
    if n is None:
        return "-"
    sign = "+" if signed and n > 0 else ""
    return f"{sign}{n / 2**20:,.1f} MiB"


def _x(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}x"


def _time(t: dict[str, float] | None) -> str:
    """'median s [min, max]' from a summary's time_s entry."""
    if not t:
        return "-"
    return f"{t['median']:.3f} s [{t['min']:.3f}, {t['max']:.3f}]"


def headline(result: RunResult) -> str:
    """The sentence people quote: 'slowdown 1.12x, memory savings 35.2x' (plus context)."""
    s, c = result.summary, result.case
    parts = [
        f"{c.model} {c.steps} steps, {c.snaps} snaps ({c.strategy}):",
        f"slowdown {_x(s.get('slowdown'))},",
        f"memory savings {_x(s.get('memory_savings'), 1)}",
    ]
    ev, opt = s.get("step_evaluations"), s.get("step_evaluations_optimal")
    if ev is not None:
        parts.append(f"— {ev} step evaluations (optimal {opt})")
    ckpt = result.mode(Mode.CHECKPOINTED)
    if ckpt is not None and ckpt.ok and ckpt.grad_max_rel_err is None:
        parts.append("— gradient NOT verified (no normal-mode gradient to compare)")
    if not s.get("ok", False):
        failed = [m for m, st in s.get("status", {}).items() if st != "ok"]
        parts.append(f"— FAILED: {', '.join(failed)}")
    return " ".join(parts)


def run_table(result: RunResult) -> Table:
    """One row per mode: peaks, overhead, time, ratios, evaluations, gradient error."""
    s = result.summary
    table = Table(title=f"ckptbench run — {result.case.key}", title_justify="left")
    for col, justify in [
        ("mode", "left"),
        ("status", "left"),
        ("exact peak RSS", "right"),
        ("sampled peak", "right"),
        ("overhead vs baseline", "right"),
        ("time / iter median [min, max]", "right"),
        ("slowdown vs normal", "right"),
        ("memory savings", "right"),
        ("step evals (measured / optimal)", "right"),
        ("grad max rel err", "right"),
    ]:
        table.add_column(col, justify=justify)
    overhead = s.get("overhead_bytes", {})
    times_s = s.get("time_s", {})
    ratios = {Mode.CHECKPOINTED: (s.get("slowdown"), s.get("memory_savings"))}
    if Mode.NORMAL.value in times_s:
        ratios[Mode.NORMAL] = (1.0, None)  # the reference itself
    for m in result.modes:
        slow, savings = ratios.get(m.mode, (None, None))
        over = overhead.get(m.mode.value)
        evals = m.counters.get("step_calls")
        if m.mode is Mode.CHECKPOINTED:
            ev = f"{evals} / {s.get('step_evaluations_optimal')}" if evals is not None else "-"
        else:
            ev = "-" if evals is None else str(evals)
        status = m.status.value if m.ok else f"[red]{m.status.value}[/red]"
        err = m.grad_max_rel_err
        table.add_row(
            m.mode.value,
            status,
            fmt_bytes(mode_peak_bytes(m)),
            fmt_bytes(m.sampled_peak_rss_bytes),
            fmt_bytes(over, signed=True) if m.mode is not Mode.BASELINE else "(floor)",
            _time(times_s.get(m.mode.value)),
            _x(slow) if m.mode is not Mode.BASELINE else "-",
            _x(savings, 1) if m.mode is Mode.CHECKPOINTED else "-",
            ev,
            "-" if err is None else f"{err:.1e}",
        )
    return table


def warning_lines(result: RunResult) -> list[str]:
    """Measurement caveats worth a line: a busy machine, an unverified gradient."""
    from ckptbench.analysis import busy_modes

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


def schedule_table(stats: ReplayStats, snaps: int, strategy: str, gen_s: float | None) -> Table:
    """What a schedule costs: r, t, evaluations, recomputation factor, peak snapshots."""
    table = Table(
        title=f"{strategy} schedule: {stats.steps} steps, {snaps} snaps", show_header=False
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
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
    for k, v in rows:
        table.add_row(k, v)
    return table


def closed_form_table(steps: int, snaps: int, strategy: str) -> Table:
    """A schedule's cost from the formulas alone (no enumeration), for any size."""
    table = Table(
        title=f"{strategy} schedule: {steps} steps, {snaps} snaps (closed form)",
        show_header=False,
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
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
    for k, v in rows:
        table.add_row(k, v)
    return table


def plan_table(rows: list[dict], costs, steps: int, budget_bytes: int) -> Table:
    """The ``plan`` table: each strategy's predicted time and peak storage at one budget."""
    per_step = costs.per_step(steps)
    fwd, taped, state, tape = (v[0] for v in per_step)
    homogeneous = costs.steps is None
    title = (
        f"plans for {steps} steps within {fmt_bytes(budget_bytes)}; step costs: untaped "
        f"{fwd * 1e3:.3f} ms, taped + reverse {taped * 1e3:.3f} ms, state "
        f"{state / 1024:.0f} KiB, tape {tape / 1024:.0f} KiB"
        + ("" if homogeneous else " (first step; costs vary per step)")
    )
    table = Table(title=title, title_justify="left")
    for col, justify in [
        ("strategy", "left"),
        ("snaps", "right"),
        ("tapes kept (peak)", "right"),
        ("advances", "right"),
        ("predicted time", "right"),
        ("predicted peak", "right"),
        ("note", "left"),
    ]:
        table.add_column(col, justify=justify)
    for r in rows:
        tapes = "-" if r["tapes_kept"] is None else f"{r['tapes_kept']} ({r['peak_tapes']})"
        t = r["predicted_time_s"]
        table.add_row(
            r["strategy"],
            "-" if r["snaps"] is None else str(r["snaps"]),
            tapes,
            "-" if r["advances"] is None else str(r["advances"]),
            "-" if t is None else f"{t:.3f} s",
            fmt_bytes(r["peak_bytes"]),
            r["note"],
        )
    return table
