"""Predicted vs measured time of a traced schedule (``run --trace``; see docs/trace.md).

The recorder (:mod:`ckptbench.engine.trace`) times every action with the host clock as the
engine runs it, and every step of an ADVANCE on its own. Given the costs a plan was made
from (:class:`ckptbench.schedules.optimal.Costs`), this module predicts each action's time
exactly as :func:`ckptbench.schedules.cost_model.predict` charges it:

* an ADVANCE of steps a..b-1: the sum of their forward costs;
* a TAPE, YOUTURN or FIRSTURN of step i: step i's taped cost (taped forward *plus* its
  reverse: the cost model charges the whole of it where the step is taped);
* REVERSE, TAKESHOT, RESTORE, TERMINATE: nothing (a REVERSE's time is in its TAPE's cost).

The per-layer summary adds, for each step (layer), what the cost model charges it (its
forward cost once per time an ADVANCE runs it, its taped cost once) and what was measured:
its share of the ADVANCEs (timed step by step) plus its TAPE, turn and REVERSE actions.
``fixed_time_s`` is charged where it runs: a layer chain's (per-step costs: the loss of x_L
and its gradient) between the sweeps, which the host clock gives the turn of the last layer,
so it is charged there (without it the last layer always read 2.6-2.9x over its prediction
and topped "furthest over"); a recurrence's (its readouts, spread over the first sweep) to
no action.

Pure: no clock, no arrays of the frameworks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ckptbench.schedules import ActionKind

__all__ = ["TAPING", "TIMED", "layer_times", "predicted_seconds"]

_ADVANCE, _REVERSE = ActionKind.ADVANCE, ActionKind.REVERSE
#: The actions the cost model charges a step's taped cost (taped forward + reverse).
TAPING = frozenset((ActionKind.TAPE, ActionKind.FIRSTURN, ActionKind.YOUTURN))
#: The actions whose measured time is a step's taped work (the per-layer "taped" column).
TIMED = TAPING | {_REVERSE}


def _loss_s(costs: Any, step: int, steps: int) -> float:
    """The loss's time charged to ``step``'s turn: a chain's last layer (see above)."""
    chain = getattr(costs, "steps", None) is not None
    return float(costs.fixed_time_s or 0.0) if chain and step == steps - 1 else 0.0


def predicted_seconds(actions: Sequence[Any], costs: Any, steps: int) -> list[float]:
    """The cost model's time of each action of ``actions`` under ``costs`` (see above)."""
    cf, cb, _, _ = costs.per_step(steps)
    out = []
    for act in actions:
        if act.kind is _ADVANCE:
            out.append(math.fsum(cf[act.start : act.stop]))
        elif act.kind in TAPING:
            turn = act.kind is ActionKind.FIRSTURN
            out.append(float(cb[act.step]) + (_loss_s(costs, act.step, steps) if turn else 0.0))
        else:
            out.append(0.0)
    return out


def layer_times(
    actions: Sequence[Any],
    measured: Sequence[float] | None,
    advance_measured: Sequence[float] | None,
    costs: Any,
    steps: int,
    label: Callable[[int], str],
) -> list[dict[str, Any]]:
    """One record per step (layer): ``step``, ``layer``, the predicted and measured seconds
    of its forward (ADVANCE) and taped (TAPE, turns, REVERSE) work and their totals, and
    ``ratio`` (measured / predicted). ``measured``: each action's seconds (None: untimed);
    ``advance_measured``: each step's seconds in ADVANCEs; ``costs`` None: no prediction."""
    fwd_n = [0] * steps
    taped_meas = [0.0] * steps
    for i, act in enumerate(actions):
        if act.kind is _ADVANCE:
            for s in range(act.start, act.stop):
                fwd_n[s] += 1
        elif act.kind in TIMED and measured is not None:
            taped_meas[act.step] += measured[i]
    cf = cb = None
    if costs is not None:
        cf, cb, _, _ = costs.per_step(steps)
    records = []
    for s in range(steps):
        rec: dict[str, Any] = {"step": s, "layer": label(s)}
        if cf is not None and cb is not None:
            rec["forward_predicted_s"] = fwd_n[s] * cf[s]
            rec["taped_predicted_s"] = float(cb[s]) + _loss_s(costs, s, steps)
            rec["predicted_s"] = rec["forward_predicted_s"] + rec["taped_predicted_s"]
        if measured is not None and advance_measured is not None:
            rec["forward_measured_s"] = float(advance_measured[s])
            rec["taped_measured_s"] = taped_meas[s]
            rec["measured_s"] = rec["forward_measured_s"] + taped_meas[s]
        if rec.get("predicted_s") and "measured_s" in rec:
            rec["ratio"] = rec["measured_s"] / rec["predicted_s"]
        records.append(rec)
    return records
