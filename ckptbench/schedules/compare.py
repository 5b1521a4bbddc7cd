"""The ``plan`` table's comparison: every strategy that fits a byte budget, scored by one
cost model (:func:`ckptbench.schedules.cost_model.predict`).

The strategies compared are those whose spec says ``fits_budget``, read from the registry
(planned ones first): a planned strategy gets its plan at the budget; one set by snaps gets
the most slots whose predicted peak fits. Pure: no arrays, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ckptbench.schedules import STRATEGIES, Action, StrategySpec
from ckptbench.schedules.cost_model import Prediction, predict
from ckptbench.schedules.optimal import DEFAULT_LEVELS, Costs, PlanError

__all__ = ["compare_at_budget", "largest_fitting"]


def largest_fitting(
    make: Callable[[int], Iterator[Action]], steps: int, costs: Costs, budget: int
) -> tuple[int, Prediction] | None:
    """Most slots s (1..steps) whose schedule ``make(s)`` predicts a peak within budget."""
    _, _, sb, tb = costs.per_step(steps)
    s = max(1, min(steps, (budget - max(tb)) // max(sb)))
    best = None
    while s >= 1:  # walk down until it fits
        p = predict(make(s), steps, costs)
        if p.peak_bytes <= budget:
            best = (s, p)
            break
        s -= 1
    if best is None:
        return None
    s = best[0]
    while s < steps:  # a cheaper-than-assumed peak may leave room for more slots
        p = predict(make(s + 1), steps, costs)
        if p.peak_bytes > budget:
            break
        s, best = s + 1, (s + 1, p)
    return best


def _row(strategy: str, snaps: int | None, p: Prediction | None, note: str = "") -> dict:
    return {
        "strategy": strategy,
        "snaps": snaps,
        "predicted_time_s": p.time_s if p else None,
        "peak_bytes": p.peak_bytes if p else None,
        "advances": p.advances if p else None,
        "tapes_kept": p.tapes_kept if p else None,
        "peak_tapes": p.peak_tapes if p else None,
        "peak_snapshots": p.peak_snapshots if p else None,
        "note": note,
    }


def _planned_row(spec: StrategySpec, costs: Costs, steps: int, budget: int, levels: int):
    try:
        plan = spec.planner(costs, steps, budget, levels=levels)  # type: ignore[misc]
    except PlanError as err:
        return _row(spec.name, None, None, str(err))
    note = "" if plan.exact else f"memory quantum {plan.quantum_bytes} B"
    _, _, sb, tb = costs.per_step(steps)
    q, smallest = plan.quantum_bytes, min(min(sb), min(tb))
    if not plan.exact and -(-smallest // q) * q >= 2 * smallest:  # rounding up doubles an item
        note += (
            f": a {smallest} B item counts as {-(-smallest // q) * q} B, so a plan keeping "
            "more within the budget may exist"
        )
    return _row(spec.name, plan.slots, plan.prediction, note)


def compare_at_budget(
    costs: Costs, steps: int, budget_bytes: int, *, levels: int = DEFAULT_LEVELS
) -> list[dict[str, Any]]:
    """Rows for the ``plan`` table: every ``fits_budget`` strategy at one budget.

    Every row is scored by :func:`predict` (same cost model). A strategy set by snaps gets
    the most slots whose predicted peak fits the budget. A strategy with no fitting schedule
    gets a row with ``None`` figures and a ``note``.
    """
    rows: list[dict[str, Any]] = []
    compared = sorted(
        (s for s in STRATEGIES.values() if s.fits_budget), key=lambda s: not s.planned
    )
    for spec in compared:
        if spec.planned:
            rows.append(_planned_row(spec, costs, steps, budget_bytes, levels))
            continue
        found = largest_fitting(
            lambda s, spec=spec: spec.stream(steps, s), steps, costs, budget_bytes
        )
        if found is None:
            rows.append(_row(spec.name, None, None, "no schedule fits the budget"))
        else:
            rows.append(_row(spec.name, found[0], found[1]))
    return rows
