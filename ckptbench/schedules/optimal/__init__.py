"""The budget planner's family: the fastest schedule of states *and* tapes in a byte budget.

Beaumont, Eyraud-Dubois, Herrmann, Joly & Shilova, "Optimal checkpointing for heterogeneous
chains: how to train deep neural networks with limited memory", 2019 (the ``rotor`` tool),
for the vocabulary of :mod:`ckptbench.schedules.actions`:

* :mod:`~ckptbench.schedules.optimal.costs` — :class:`Costs` (per-step times and bytes) and
  the costs file (:func:`costs_from_json`);
* :mod:`~ckptbench.schedules.optimal.dp` — the dynamic program and its memory quanta;
* :mod:`~ckptbench.schedules.optimal.emit` — its choices as an action stream;
* :mod:`~ckptbench.schedules.optimal.planner` — :class:`Plan`, :func:`plan_optimal` and the
  checks that refuse a plan too large to compute or a budget no schedule fits.

:data:`OPTIMAL` states the strategy's properties: it is set by a byte budget, does not use
``--snaps``, plans from measured step costs, and its step counts are its plan's own
(recorded in each result). Predictions for any stream are
:func:`ckptbench.schedules.cost_model.predict`; the ``plan`` table's comparison is
:func:`ckptbench.schedules.compare.compare_at_budget`. numpy loads only when a plan is
solved.
"""

from __future__ import annotations

from typing import Any

from ckptbench.schedules.optimal.costs import Costs, PlanError, costs_from_json
from ckptbench.schedules.optimal.planner import (
    DEFAULT_LEVELS,
    MAX_PLAN_UPDATES,
    MAX_STREAM_STEPS,
    Plan,
    check_budget,
    check_plannable,
    holds_store_all,
    min_budget_bytes,
    plan_estimate,
    plan_optimal,
    store_all_peak,
)
from ckptbench.schedules.strategy import Setting, StrategySpec

__all__ = [
    "DEFAULT_LEVELS",
    "MAX_PLAN_UPDATES",
    "MAX_STREAM_STEPS",
    "OPTIMAL",
    "Costs",
    "Plan",
    "PlanError",
    "check_budget",
    "check_plannable",
    "costs_from_json",
    "holds_store_all",
    "min_budget_bytes",
    "plan_estimate",
    "plan_optimal",
    "store_all_peak",
]


def _plan(costs: Costs | dict[str, Any], steps: int, budget: int, **options: Any) -> Plan:
    """:func:`plan_optimal` for a costs object or its JSON document (the worker's)."""
    measured = costs if isinstance(costs, Costs) else Costs.from_dict(costs)
    return plan_optimal(measured, steps, int(budget), **options)


#: Minimum time under a byte budget, keeping states and tapes.
OPTIMAL = StrategySpec(
    name="optimal",
    label="optimal (budget planner)",
    marker="D",
    setting=Setting.BUDGET,
    help="fastest schedule of states and tapes within --budget bytes (measured step costs)",
    planner=_plan,
    uses_snaps=False,
    fits_budget=True,
)
