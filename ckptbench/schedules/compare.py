"""The ``plan`` table's comparison: every strategy that fits a byte budget, scored by one
cost model (:func:`ckptbench.schedules.cost_model.predict`).

The strategies compared are those whose spec says ``fits_budget``, read from the registry
(planned ones first): a planned strategy gets its plan at the budget; one set by snaps gets
the most slots whose predicted peak fits. Pure: no arrays, no I/O.
"""

from __future__ import annotations

from typing import Any

from ckptbench.schedules import STRATEGIES, StrategySpec
from ckptbench.schedules.cost_model import Prediction, largest_fitting
from ckptbench.schedules.optimal import DEFAULT_LEVELS, Costs, PlanError

__all__ = ["compare_at_budget", "largest_fitting"]


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
    if plan.chosen != "program":  # a rival in exact bytes beat the rounded program
        why = "the rounded program's plan is slower or does not fit"
        return _row(spec.name, plan.slots, plan.prediction,
                    f"{note}: {plan.chosen}'s stream (in exact bytes); {why}")  # fmt: skip
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
