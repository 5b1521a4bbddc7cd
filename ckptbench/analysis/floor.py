"""What the recomputation floor adds to the plain gradient: its extra evaluations, priced.

The floor (:mod:`ckptbench.results.summary`) is the plain gradient's time plus every step
evaluation beyond the plain gradient's own, each at the forward-only time of the step it
evaluates. The run measures one forward-only time, the baseline's, for all ``L`` steps; how
it divides among the steps comes from the step costs the run planned with, where it has
them (strategy ``optimal``'s plan: its measured or ``--costs`` forward times, one per step,
and the replay of its stream, how often each step is recomputed, ``Plan.summary``'s
``step_advances``). Step ``i`` then costs ``baseline x c_i / sum c`` (the costs set the
shares, the run's own baseline the scale), so a schedule recomputing a chain's expensive
layers gets a higher floor than the mean layer's. Without them every extra evaluation costs
the mean step, ``baseline / L``. Equal costs give exactly the mean layer's floor.

:func:`floor_extra` gives the extra evaluations in mean steps (the floor adds ``extra x
baseline / L``) and which of the two priced them. Pure: numbers in, numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["MEAN_LAYER", "PER_LAYER", "FloorExtra", "floor_extra"]

#: ``floor_basis``: every extra evaluation at the forward-only time per step (baseline / L)
MEAN_LAYER = "mean layer"
#: ``floor_basis``: each extra evaluation at its own step's share of the baseline
PER_LAYER = "per-layer costs"


@dataclass(frozen=True)
class FloorExtra:
    """The evaluations the floor adds to the plain gradient, counted in mean steps
    (``steps``: the floor adds ``steps x baseline / L``), and what priced them (``basis``:
    :data:`PER_LAYER` or :data:`MEAN_LAYER`). ``evaluations``: the extra evaluations as
    counted, whatever their steps."""

    steps: float
    basis: str
    evaluations: int


def floor_extra(
    evaluations: int | None, steps: int, plan: Mapping[str, Any] | None = None
) -> FloorExtra | None:
    """The extra evaluations of a checkpointed gradient that made ``evaluations`` step
    evaluations over ``steps`` steps (the plain gradient makes ``steps``), in mean steps.

    Priced per step (:data:`PER_LAYER`) where ``plan`` (the checkpointed mode's
    ``ModeResult.plan``) holds a forward time per step (``costs.forward_time_s``, a list of
    ``steps`` numbers, not all 0) and the recomputations per step (``step_advances``, a list
    of ``steps`` counts adding up to the counted extra evaluations, so the replay and the
    engine's count agree): ``L x sum_i a_i c_i / sum_i c_i``, exact in rationals, so equal
    costs give the count itself. Otherwise the count itself (:data:`MEAN_LAYER`). None
    without a count."""
    if evaluations is None or steps <= 0:
        return None
    extra = max(evaluations - steps, 0)
    weighted = _weighted(extra, steps, plan or {})
    if weighted is None:
        return FloorExtra(float(extra), MEAN_LAYER, extra)
    return FloorExtra(weighted, PER_LAYER, extra)


def _weighted(extra: int, steps: int, plan: Mapping[str, Any]) -> float | None:
    costs = plan.get("costs")
    forward = costs.get("forward_time_s") if isinstance(costs, Mapping) else None
    advances = plan.get("step_advances")
    if not (_times(forward, steps) and _counts(advances, steps)) or sum(advances) != extra:
        return None
    total = sum(Fraction(c) for c in forward)
    if total <= 0:
        return None
    priced = sum(Fraction(a) * Fraction(c) for a, c in zip(advances, forward, strict=True))
    return float(steps * priced / total)


def _times(values: Any, steps: int) -> bool:
    """A list of ``steps`` finite numbers >= 0 (a file's, so anything may be there)."""
    return (
        isinstance(values, Sequence)
        and not isinstance(values, str)
        and len(values) == steps
        and all(_number(v) and math.isfinite(v) and v >= 0 for v in values)
    )


def _counts(values: Any, steps: int) -> bool:
    """A list of ``steps`` whole counts >= 0."""
    return (
        isinstance(values, Sequence)
        and not isinstance(values, str)
        and len(values) == steps
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
