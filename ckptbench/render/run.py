"""What ``ckptbench run`` shows: the run table, the headline sentence, warnings and
failures (``schedule`` and ``plan``'s tables are :mod:`ckptbench.render.schedule`'s).
Returns tables (see :mod:`ckptbench.render.table`) and strings; never prints."""

from __future__ import annotations

from typing import Any

from ckptbench.backends.registry import DEFAULT_BACKEND
from ckptbench.backends.registry import spec as backend_spec
from ckptbench.render.expected import floor_line, plan_line
from ckptbench.render.format import (
    fmt_bytes,
    fmt_duration,
    fmt_overhead,
    fmt_per_step,
    fmt_percent,
    fmt_ratio,
    fmt_ratio_ci,
    fmt_size,
    fmt_time,
    fmt_time_spread,
    setting_text,
)
from ckptbench.render.legends import RUN_LEGEND, run_ratios
from ckptbench.render.table import Column, Table
from ckptbench.results.schema import Case, Mode, RunResult, Status
from ckptbench.results.units import count_text, half_width_text, off_scale
from ckptbench.schedules import (
    get_strategy,
)

__all__ = [
    "explain_lines",
    "failure_lines",
    "fmt_bytes",
    "gradient_text",
    "headline",
    "interruption_line",
    "limit_outcome",
    "rounds_text",
    "run_table",
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
    over = result.summary.mode(Mode.CHECKPOINTED).overhead_interval
    ran = (
        f"checkpointed ran in {fmt_overhead(over)} over baseline"
        if over is not None
        else "checkpointed ran within it "
        f"(peak {fmt_bytes(result.summary.mode(Mode.CHECKPOINTED).peak_rss_bytes)})"
    )
    return f"plain autograd needed more than {fmt_size(limit)}; {ran}"


def _setting(result: RunResult) -> str:
    c = result.case
    backend = "" if c.backend == DEFAULT_BACKEND else f" on {c.backend}/{c.device}"
    return f"{c.model} {c.steps} steps, {setting_text(c)}{backend}{rounds_text(result)}:"


def rounds_text(result: RunResult) -> str:
    """', 8 rounds', or for an interrupted run ', 7 complete rounds (interrupted in round 8
    by SIGINT (Ctrl-C))': a mode's figures come from its complete rounds."""
    started, complete = result.rounds_started, result.rounds_complete
    if result.interrupted_round is None:
        return f", {started} rounds" if started > 1 else ""
    by = f" by {result.stopped_by}" if result.stopped_by else ""
    plural = "s" if complete != 1 else ""
    return f", {complete} complete round{plural} ({result.interruption}{by})"


def interruption_line(result: RunResult) -> str | None:
    """'interrupted in round 8; 7 complete rounds of every mode kept (8 started, 6 planned)'."""
    cut = result.interrupted_round
    if cut is None:
        return None
    complete = result.rounds_complete
    prec = (result.environment or {}).get("precision") or {}
    planned = prec.get("rounds_planned") or result.case.rounds
    kept = (
        f"{complete} complete round{'s' if complete != 1 else ''} of every mode kept"
        if complete
        else "no round of every mode completed"
    )
    return f"{result.interruption}; {kept} ({result.rounds_started} started, {planned} planned)"


def gradient_text(result: RunResult) -> str | None:
    """'gradient within 2.2e-16 of plain' (the max relative error of the checkpointed
    gradient against the plain one), 'gradient equal to plain', or None when unchecked; a
    check of only some rounds (normal failed in the others) says in how many."""
    ckpt = result.mode(Mode.CHECKPOINTED)
    err = ckpt.grad_max_rel_err if ckpt is not None else None
    if err is None:
        return None
    ok = [m for m in result.mode_rounds(Mode.CHECKPOINTED) if m.ok]
    checked = sum(m.grad_max_rel_err is not None for m in ok)
    part = f" (checked in {checked} of {count_text(len(ok), 'round')})" if checked < len(ok) else ""
    if err == 0:
        return f"gradient equal to plain{part}"
    return f"gradient within {err:.2g} of plain{part}"


def savings_text(s: Any) -> str:
    """'35.2x [35.0, 35.4]' (both modes' spreads and the rounds' interval), or, where an
    overhead is within its noise, '- (checkpointed overhead < noise (±1.2 MiB))': no ratio."""
    text = fmt_ratio_ci(s.memory_savings.value, s.memory_savings.interval, 1)
    if s.memory_savings.value is not None:
        return text
    noisy = [
        f"{m.mode.value} overhead {fmt_overhead(m.overhead_interval)}"
        for m in s.modes
        if m.overhead_interval is not None and m.overhead_interval.below_noise
    ]
    return f"{text} ({'; '.join(noisy)})" if noisy else text


def _why_not(result: RunResult) -> str:
    """Why a mode is not in ``result``: the run stopped before it, or ``--modes``."""
    stop = result.interruption
    return "--modes" if stop is None else f"the run was {stop} before measuring it"


def headline(result: RunResult) -> str:
    """The sentence people quote: 'slowdown 1.12x [1.08, 1.16], memory savings 35.2x
    [35.0, 35.4]' (95% intervals) plus context."""
    s, c = result.summary, result.case
    parts = [_setting(result)]
    limited = limit_outcome(result)
    unstable = " (time unstable)" if s.time_unstable else ""
    if limited is not None:
        parts.append(limited)
    elif result.mode(Mode.NORMAL) is None:  # left out or never reached: nothing to divide by
        parts.append(
            f"no slowdown or memory savings: both need the normal mode ({_why_not(result)})"
        )
    else:
        host = savings_text(s)
        if result.mode(Mode.BASELINE) is None:  # no overhead to divide
            host += (
                f" (needs the baseline mode, which overheads are measured over: {_why_not(result)})"
            )
        slowdown = fmt_ratio_ci(s.slowdown.value, s.slowdown.interval, 2)
        shown = unstable if s.slowdown.value is not None else ""  # no figure to mark
        parts.append(f"slowdown {slowdown}{shown},")
        if s.on_device:  # a GPU: the memory that checkpointing saves is there
            bound = "" if s.device_peak_exact is not False else " (upper bounds)"
            parts.append(
                f"device memory savings {fmt_ratio(s.device_memory_savings, 1)}{bound} "
                f"(host RSS {host})"
            )
        else:
            parts.append(f"memory savings {host}")
    ev, opt = s.step_evaluations, s.step_evaluations_optimal
    if ev is not None and opt is not None:
        best = "planned" if get_strategy(c.strategy).planned else "optimal"
        parts.append(f"— {ev} step evaluations ({best} {opt})")
    elif ev is not None:
        parts.append(f"— {ev} step evaluations")
    ckpt = result.mode(Mode.CHECKPOINTED)
    if ckpt is not None and ckpt.ok and ckpt.grad_max_rel_err is None:
        parts.append("— gradient NOT verified (no normal-mode gradient to compare)")
    elif ckpt is not None and ckpt.ok and (grad := gradient_text(result)) is not None:
        parts.append(f"— {grad}")
    if not s.ok:
        status = {m.mode.value: m.status for m in s.modes}
        failed = [m for m, st in status.items() if st not in (Status.OK, Status.INTERRUPTED)]
        if limited is not None:  # normal's stop at the limit is said above
            failed = [m for m in failed if m != Mode.NORMAL.value]
        if failed:
            parts.append(f"— FAILED: {', '.join(failed)}")
        cut = [m for m, st in status.items() if st is Status.INTERRUPTED]
        if cut:
            parts.append(f"— no complete round of {', '.join(cut)}")
    return " ".join(parts)


def _text(value: Any, _record: dict[str, Any]) -> str:
    return "-" if value is None else str(value)


def run_table(result: RunResult) -> Table:
    """One row per mode: peaks, overhead, time, ratios, evaluations, gradient error.

    Where the width is short, the sampled peak, the time range, the evaluations, the
    gradient error (the headline names it), the exact peak, the time and the status are
    left out, in that order, and named; mode names and numbers are never cut."""
    pooled = [p for p in (result.mode(mode) for mode in Mode) if p is not None]
    pooled.sort(key=lambda p: [m.mode for m in result.modes].index(p.mode))
    records = tuple(_mode_record(result, m) for m in pooled)
    bad = {st.value: "red" for st in Status if st is not Status.OK}
    columns = _run_columns(result.summary.on_device)
    s = result.summary  # no slowdown where a mode failed in a round: the rounds kept
    rounds = s.slowdown.rounds or s.memory_savings.rounds or s.rounds_complete
    far = any(  # an end shown as a bound, '[<0.008, >80]'
        r.interval is not None and off_scale(r.value, *r.interval) != (None, None)
        for r in (s.slowdown, s.memory_savings)
    )
    over = (
        f"95% intervals over {rounds} rounds"
        if rounds > 1
        else "intervals from one round's iterations: the slowdown's 95% for their noise "
        "alone, the savings' the range they allow, a worst case"
    )
    legend = (  # what the brackets are, where the table shows any
        f"[low, high]: {over} (overhead: the iterations' peaks "
        "and a rerun's spread"
        + ("; <x, >y: an end more than 100x off the estimate" if far else "")
        + "); baseline is the forward pass alone"
        if rounds >= 1
        else ()
    )
    ratios = (  # what the two quoted ratios are, where they are shown
        run_ratios(one_round=rounds == 1)
        if any(r["mode"] == Mode.CHECKPOINTED.value for r in records)
        else ""
    )
    notes = tuple(n for n in (legend, ratios) if n)
    title = f"ckptbench run — {result.case.key}"
    return Table(title, columns, records, styles=bad, notes=notes, legend=RUN_LEGEND)


def _evaluations_text(result: RunResult, m: Any) -> str:
    """A mode's step evaluations; the checkpointed mode's beside the optimal count."""
    s = result.summary
    evals = s.mode(m.mode).counters.step_calls
    opt = s.step_evaluations_optimal
    if m.mode is Mode.CHECKPOINTED and evals is not None and opt is not None:
        return f"{evals} ({opt})"  # as the header and compare say it
    return "-" if evals is None else str(evals)


def _memory_texts(result: RunResult, m: Any) -> tuple[str, str, str]:
    """(exact peak, overhead, overhead in a narrow table) of a mode; a mode stopped at the
    memory limit shows '> limit' and its overhead '> limit - baseline'."""
    f = result.summary.mode(m.mode)
    peak = fmt_bytes(f.peak_rss_bytes)
    iv = f.overhead_interval
    over_text = over_narrow = fmt_overhead(iv)
    if iv is not None and not iv.below_noise:
        over_narrow = f"{fmt_bytes(iv.value, signed=True)} ±{fmt_bytes(iv.noise, unit=False)}"
    if f.peak_above_bytes is not None:
        peak = f"> {fmt_bytes(f.peak_above_bytes)}"
    if f.overhead_above_bytes is not None:
        over_text = over_narrow = f"> {fmt_bytes(f.overhead_above_bytes, signed=True)}"
    return peak, over_text, over_narrow


def _mode_record(result: RunResult, m: Any) -> dict[str, str]:
    """The run table's row of mode result ``m``: every column's text."""
    s = result.summary
    f = s.mode(m.mode)
    unstable = "*" if s.time_unstable else ""
    peak, over_text, over_narrow = _memory_texts(result, m)
    pr = f.peak_range
    t = f.time
    return {
        "mode": m.mode.value,
        "status": m.status.value,
        "peak": peak,
        # one iteration has no spread: '-', never a 0 B that reads as perfectly stable
        "spread": "-" if pr is None or pr.n < 2 else fmt_size(pr.spread),
        "sampled": fmt_bytes(m.sampled_peak_rss_bytes),
        "overhead": "(reference)" if m.mode is Mode.BASELINE else over_text,
        "overhead_narrow": "(ref)" if m.mode is Mode.BASELINE else over_narrow,
        "time": (fmt_time(t.median) + unstable) if t else "-",
        "range": fmt_time_spread(t),
        "slowdown": fmt_ratio_ci(s.slowdown.value, s.slowdown.interval, 2)
        + (unstable if s.slowdown.value is not None else "")
        if m.mode is Mode.CHECKPOINTED
        else ("1.00x" if m.mode is Mode.NORMAL and t else "-"),
        "savings": fmt_ratio_ci(s.memory_savings.value, s.memory_savings.interval, 1)
        if m.mode is Mode.CHECKPOINTED
        else "-",
        "dpeak": fmt_bytes(f.peak_device_bytes),
        "dover": "(reference)"
        if m.mode is Mode.BASELINE
        else fmt_bytes(f.device_overhead_bytes, signed=True),
        "dsavings": fmt_ratio(s.device_memory_savings, 1) if m.mode is Mode.CHECKPOINTED else "-",
        "evals": _evaluations_text(result, m),
        "err": "-" if m.grad_max_rel_err is None else f"{m.grad_max_rel_err:.1e}",
    }


def _run_columns(on_device: bool) -> tuple[Column, ...]:
    """The run table's columns: device memory first on a GPU (host RSS beside it), else the
    host's exact peak, its spread, the sampled peak and the overhead."""
    if on_device:  # a GPU: device memory first, host RSS beside it
        memory = (
            Column("dpeak", "device peak", _text, priority=4),
            Column("dover", "device over", _text),
            Column("peak", "host peak", _text, priority=9),
            Column("overhead", "host over", _text, priority=9),
        )
        savings = Column("dsavings", "savings", _text)
    else:
        memory = (
            Column("peak", "exact peak", _text, priority=4),
            Column("spread", "peak spread", _text, priority=5),
            Column("sampled", "sampled max", _text, priority=8),  # the rounds' largest
            Column(
                "overhead",
                "overhead",
                _text,
                narrow=lambda _v, r: r["overhead_narrow"],
                narrow_priority=4,
                narrow_drops="its interval (± its noise instead)",
            ),
        )
        savings = Column("savings", "savings", _text)
    return (  # left out first: sampled, time range, evaluations, grad err, peak, time
        Column("mode", "mode", _text, "left"),
        Column("status", "status", _text, "left", priority=2),
        *memory,
        Column("time", "time/iter", _text, priority=3),
        Column("range", "[min, max] s", _text, priority=7),
        Column("slowdown", "slowdown", _text),
        savings,
        Column("evals", "evals (opt)", _text, priority=6),
        Column("err", "grad err", _text, priority=5),
    )


def _records_advances(case: Case) -> bool:
    """Whether the case's executor records its first sweep's advances (its backend says so)."""
    return case.executor_ran in backend_spec(case.backend).recording_executors


def _phase_line(result: RunResult) -> str | None:
    """Where the time of a checkpointed iteration goes (the executor's phase timers)."""
    s = result.summary
    ckpt, normal = s.mode(Mode.CHECKPOINTED), s.mode(Mode.NORMAL)
    phases = ckpt.phases_s
    if not phases or ckpt.time is None:
        return None
    wall = ckpt.time.median
    advanced = ckpt.counters.steps_advanced or 0
    adv = phases.get("advance_time_s", 0.0)
    taped = phases.get("taped_time_s", 0.0)
    book = phases.get("bookkeeping_time_s", 0.0)
    # torch's one-call records its first sweep's advances on autograd's graph: not untaped
    recorded = _records_advances(result.case)
    what = "advances" if recorded else "recomputation"
    kind = "steps" if recorded else "untaped steps"
    also = "; the first sweep's are recorded on autograd's graph" if recorded else ""
    per = f" ({advanced} {kind} x {fmt_per_step(adv / advanced)}{also})" if advanced else ""
    vs = f" vs plain gradient's {fmt_time(normal.time.median)}" if normal.time else ""
    share = (adv + taped + book) / wall if wall > 0 else 0.0
    return (  # seconds as the table prints them
        f"where the time goes (median iteration {fmt_time(wall)}): {what} {fmt_time(adv)}"
        f"{per}, taped steps + reverse {fmt_time(taped)}{vs}, bookkeeping {fmt_time(book)}; "
        f"phases add up to {share:.1%} of the iteration"
    )


def _precision_line(result: RunResult) -> str | None:
    prec = result.environment.get("precision") or {}
    if prec.get("stopped") == "reached":
        return (
            f"--precision {fmt_percent(prec['target_rel'])} reached: slowdown interval "
            f"{half_width_text(prec['half_width_rel'])} after {prec['rounds']} rounds"
        )
    if prec.get("stopped") in ("max-time", "max-rounds"):
        half = prec.get("half_width_rel")
        got = "no interval" if half is None else f"slowdown interval {half_width_text(half)}"
        cap = (
            f"time cap (--max-time {fmt_duration(prec['max_time_s'])})"
            if prec["stopped"] == "max-time"
            else f"round cap (--max-rounds {prec['max_rounds']})"
        )
        planned, done = prec.get("rounds_planned") or 0, str(prec["rounds"])
        if prec["rounds"] < planned:  # the cap cut the planned rounds too
            done += f" of {planned} planned"
        target = f"+/-{fmt_percent(prec['target_rel'])}"
        if half is not None and half <= prec["target_rel"]:  # within, from fewer rounds
            return (
                f"stopped at the {cap} after {done} rounds: {got}, within the {target} of "
                "--precision but from fewer rounds than planned; a longer --max-time runs them"
            )
        return (
            f"stopped at the {cap} after {done} rounds: {got}, not the {target} of "
            "--precision; a longer --max-time narrows it"
        )
    return None


def _rounds_line(result: RunResult) -> str | None:
    """How much the rounds differ: each mode's spread of exact peaks and CV of times."""
    noisy = [m for m in result.summary.modes if m.time_cv is not None]
    rounds = len({m.round for m in result.modes})
    if result.interruption is not None:  # the figures come from the complete rounds
        rounds = result.rounds_complete
    if rounds <= 1 or not noisy:  # one round (or one left by an interruption): nothing between
        return None
    parts = ", ".join(
        f"{m.mode.value} {fmt_size(m.peak_spread_bytes)}"  # '12.0 KiB', never '0.01 MiB'
        for m in noisy
        if m.peak_spread_bytes is not None
    )
    cvs = ", ".join(f"{m.mode.value} {m.time_cv:.1%}" for m in noisy)
    return (
        f"across {rounds} rounds: the rounds' median exact peaks differ by {parts} (the "
        "table's peak spread: every iteration's); "
        f"iteration times vary by (CV) {cvs}"
    )


def explain_lines(result: RunResult) -> list[str]:
    """Where the time goes (the executor's own phase timers), how a --precision run ended,
    how the rounds differ and, for a planned schedule, the prediction beside the
    measurement (an interruption is a warning: ``render.caveats``)."""
    lines = (
        _phase_line(result),
        _precision_line(result),
        _rounds_line(result),
        plan_line(result),
        floor_line(result),
    )
    return [line for line in lines if line is not None]


#: stderr lines that never say what went wrong (JAX's note on its filtered traceback).
_STDERR_NOISE = ("For simplicity, JAX has removed its internal frames",)


def _stderr_extra(error: str, stderr_tail: str | None) -> str:
    """`` (stderr: LINE)`` with the last telling stderr line, unless the error says it."""
    tail = [line.strip() for line in (stderr_tail or "").splitlines() if line.strip()]
    tail = [t for t in tail if not t.startswith(_STDERR_NOISE) and set(t) - set("-^~ ")]
    if not tail or tail[-1] in error or (error and error in tail[-1]):
        return ""
    return f" (stderr: {tail[-1]})"


def failure_lines(result: RunResult) -> list[str]:
    """One line per distinct failure: the modes (and rounds) it hit, its error and the last
    stderr line when that adds something (a plug-in's error in every mode is one line)."""
    groups: dict[str, list[str]] = {}
    for m in result.modes:  # a mode a stop signal cut is said by the interruption's caveat
        if not m.ok and m.status is not Status.INTERRUPTED:
            code = f", exit status {m.exit_code}" if m.exit_code is not None else ""
            extra = _stderr_extra(m.error or "", m.stderr_tail)
            text = f"{m.status.value}{code}: {m.error}{extra}"
            names = groups.setdefault(text, [])
            if m.mode.value not in names:
                names.append(m.mode.value)
    return [f"{', '.join(names)}: {text}" for text, names in groups.items()]
