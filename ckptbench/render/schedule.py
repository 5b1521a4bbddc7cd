"""What ``ckptbench schedule`` and ``ckptbench plan`` show: a schedule's closed forms and
replayed costs, and the plan's comparison at one budget. Returns tables (see
:mod:`ckptbench.render.table`); never prints."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ckptbench.render.format import fmt_per_step, fmt_seconds, fmt_size
from ckptbench.render.table import Column, Table
from ckptbench.schedules import ReplayStats, get_strategy, optimal_forward_steps

__all__ = ["closed_form_table", "plan_table", "schedule_table"]


def _text(value: Any, _record: dict[str, Any]) -> str:
    return "-" if value is None else str(value)


def _quantities(title: str, rows: list[tuple[str, str]]) -> Table:
    columns = (Column("quantity", "quantity", align="left"), Column("value", "value"))
    records = tuple({"quantity": k, "value": v} for k, v in rows)
    return Table(title, columns, records, show_header=False, stack=True)


def _ratio(a: int, b: int) -> str:
    """a / b to three decimals in integer arithmetic: exact for counts of any size (a float
    printed 1e29 steps at one slot as 49999999999999995716575428608.000)."""
    q = (1000 * a + b // 2) // b
    return f"{q // 1000}.{q % 1000:03d}"


def _slots(spec: Any, snaps: int) -> str:
    """'31 snaps', or for a strategy that takes none (store-all) what it keeps: not '100
    snaps' above 'peak snapshots 99'."""
    return f"{snaps} snaps" if spec.uses_snaps else "every state stored (--snaps not used)"


def closed_form_table(steps: int, snaps: int, strategy: str) -> Table:
    """A schedule's cost from its closed form alone (no enumeration), for any size."""
    spec = get_strategy(strategy)
    if spec.closed_form is None:
        raise ValueError(f"strategy {spec.name} has no closed form")
    s = spec.effective_snaps(steps, snaps)
    form = spec.closed_form
    t, peak, r = form.advances(steps, s), form.peak(steps, s), form.repetitions(steps, s)
    rows = [
        ("repetition number r(l, s)", str(r)),
        ("advances t (untaped steps, first sweep included)", f"{t}"),
        ("taped steps", f"{steps}"),
        ("total step evaluations (t + l)", f"{t + steps}"),
        ("recomputation factor t / l", _ratio(t, steps)),
        ("peak snapshots", f"{peak}"),
        ("max advances of one step", f"{r}"),
    ]
    return _quantities(f"{strategy} schedule: {steps} steps, {_slots(spec, s)} (closed form)", rows)


def schedule_table(
    stats: ReplayStats, snaps: int, strategy: str, gen_s: Sequence[float] | None
) -> Table:
    """What a schedule costs: r (from the strategy's closed form, where it has one), t beside
    Revolve's binomial optimum at the same snaps, evaluations, recomputation factor, peak
    snapshots, and with ``gen_s`` (the times of runs generating it) the fastest and median
    run. ``snaps`` as given: a strategy that does not use them (store-all) shows its own."""
    spec = get_strategy(strategy)
    steps, s = stats.steps, spec.effective_snaps(stats.steps, snaps)
    form = spec.closed_form
    repetitions = [("repetition number r(l, s)", str(form.repetitions(steps, s)))] if form else []
    rows = [
        *repetitions,
        ("advances t (untaped steps, first sweep included)", f"{stats.advances}"),
        ("binomial optimum t(l, s) (Revolve's)", f"{optimal_forward_steps(steps, s)}"),
        ("taped steps", f"{stats.taped}"),
        ("total step evaluations (t + l)", f"{stats.evaluations}"),
        ("recomputation factor t / l", _ratio(stats.advances, stats.steps)),
        ("peak snapshots", f"{stats.peak_snapshots}"),
        ("max advances of one step", f"{stats.max_step_advances}"),
        ("actions", f"{stats.actions}"),
    ]
    if gen_s:
        runs = f"{len(gen_s)} run{'s' if len(gen_s) != 1 else ''}"
        rows.append((f"generation time, fastest of {runs}", f"{min(gen_s) * 1e3:.1f} ms"))
        rows.append(
            (f"generation time, median of {runs}", f"{statistics.median(gen_s) * 1e3:.1f} ms")
        )
    return _quantities(f"{strategy} schedule: {steps} steps, {_slots(spec, s)}", rows)


def plan_table(
    rows: list[dict[str, Any]], costs: Any, steps: int, budget_bytes: int, how: str = ""
) -> Table:
    """The ``plan`` table: each strategy's predicted time and peak storage at one budget.
    ``costs`` is the planner's step-cost table (``costs.per_step(steps)`` gives per-step
    (untaped s, taped + reverse s, state bytes, tape bytes) sequences); ``how``: how they
    were measured, e.g. ``"float32, through one-call"`` (empty: not said)."""
    fwd, taped, state, tape = (v[0] for v in costs.per_step(steps))
    homogeneous = costs.steps is None
    title = (
        f"plans for {steps} steps within {fmt_size(budget_bytes)}; step costs"
        + (f" ({how})" if how else "")
        + ": untaped "
        f"{fmt_per_step(fwd)}, taped + reverse {fmt_per_step(taped)}, state "
        f"{fmt_size(state)}, tape {fmt_size(tape)}"
        + ("" if homogeneous else " (first step; costs vary per step)")
    )

    def tapes(v: Any, r: dict[str, Any]) -> str:
        return "-" if v is None else f"{v} ({r['peak_tapes']})"

    # raw values under the columns' keys (the CSV's), shown at the budget's precision
    columns = (
        Column("strategy", "strategy", _text, "left"),
        Column("snaps", "snaps", _text),
        Column("tapes_kept", "tapes kept (peak)", tapes, priority=3),
        Column("peak_tapes", priority=0),
        Column("advances", "advances", _text, priority=2),
        Column("predicted_time_s", "predicted time", lambda v, _r: fmt_seconds(v)),
        Column("peak_bytes", "predicted peak", lambda v, _r: fmt_size(v)),
        Column("note", "note", _text, "left"),
    )
    records = [dict(r) for r in rows]
    legend = (  # what the counts are, as run's table says its columns
        "tapes kept (peak): steps taped ahead and kept until their reverse instead of "
        "recomputed (the most held at once); advances: untaped step evaluations, the first "
        "sweep included; predicted time and peak: the cost model's, from the step costs above"
        + (
            "; memory quantum: the optimal planner counted bytes in units of this size, each "
            "state and tape rounded up: its plan fits (its peak is in exact bytes) but a faster "
            "one that fills the budget more tightly can be missed"
            if any(r.get("note") for r in records)
            else ""
        ),
    )
    return Table(title, columns, tuple(records), notes=legend)
