"""``run --trace``'s time per layer: predicted (the plan's costs) vs measured (the traced
iteration's host clock), the layers furthest over their prediction first (docs/trace.md).

The records are the trace section's ``layers`` (``engine/trace_time.py``); a result file
without them (older, or a trace on an accelerator: no times) shows no table.
"""

from __future__ import annotations

from typing import Any

from ckptbench.analysis.trace import trace_of
from ckptbench.render.format import fmt_ratio
from ckptbench.render.layers import name_column
from ckptbench.render.table import Column, Table
from ckptbench.results.schema import RunResult

__all__ = ["SHOWN_LAYERS", "layer_time_table", "time_notes"]

#: The most layers the table shows (all of them when there are no more).
SHOWN_LAYERS = 12


def _ms(value: Any, _record: dict[str, Any]) -> str:
    return "-" if value is None else f"{value * 1e3:.3f}"


def _in_ms(seconds: Any) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f} ms"


def _ratio(value: Any, _record: dict[str, Any]) -> str:
    return fmt_ratio(value) if value is not None else "-"


def _excess(rec: dict[str, Any]) -> float:
    return rec.get("measured_s", 0.0) - rec.get("predicted_s", 0.0)


def _noun(layers: list[dict[str, Any]]) -> str:
    """The noun: step for a recurrence (every record labelled 'step i'), layer for a chain."""
    steps = all(r.get("layer") == f"step {r.get('step')}" for r in layers)
    return "step" if steps else "layer"


def layer_time_table(result: RunResult) -> Table | None:
    """The traced layers' predicted and measured time (None without measured times)."""
    found = trace_of(result)
    if found is None:
        return None
    layers = [r for r in found[1].get("layers") or () if isinstance(r, dict)]
    if not any("measured_s" in r for r in layers):
        return None
    predicted = any("predicted_s" in r for r in layers)
    ranked = sorted(layers, key=_excess, reverse=True)
    shown = ranked if len(ranked) <= SHOWN_LAYERS else ranked[:SHOWN_LAYERS]
    cols = [name_column("layer", "layer"), Column("step", "", priority=0)]
    if predicted:
        cols += [
            Column("predicted_s", "predicted ms", _ms),
            Column("measured_s", "measured ms", _ms),
            Column("ratio", "measured/predicted", _ratio),
            Column("forward_predicted_s", "forward pred.", _ms, priority=2),
            Column("forward_measured_s", "forward meas.", _ms, priority=2),
            Column("taped_predicted_s", "taped+rev. pred.", _ms, priority=3),
            Column("taped_measured_s", "taped+rev. meas.", _ms, priority=3),
        ]
        order = "furthest over its prediction first"
    else:
        cols += [
            Column("measured_s", "measured ms", _ms),
            Column("forward_measured_s", "forward ms", _ms, priority=2),
            Column("taped_measured_s", "taped+rev. ms", _ms, priority=2),
        ]
        order = "slowest first; no plan costs, so no prediction"
    noun = _noun(layers)
    which = f"every {noun}" if len(shown) == len(layers) else (
        f"{len(shown)} of {len(layers)} {noun}s"
    )  # fmt: skip
    cols[0] = name_column("layer", noun)
    return Table(
        f"Trace time per {noun} ({which}, {order})",
        tuple(cols),
        tuple(shown),
        notes=tuple(time_notes(result, len(layers) - len(shown))),
    )


def time_notes(result: RunResult, left_out: int = 0) -> list[str]:
    """What the per-layer times are (and where the rest are, when some were left out)."""
    found = trace_of(result)
    if found is None:
        return []
    trace = found[1]
    if trace.get("time_note"):
        return [str(trace["time_note"])]
    layers = trace.get("layers") or []
    pred = sum(r.get("predicted_s", 0.0) for r in layers)
    meas = sum(r.get("measured_s", 0.0) for r in layers)
    how = (
        "; predicted: the plan's per-layer costs as the cost model charges them (forward per "
        "untaped run; taped forward + reverse once, at the TAPE or turn)"
        if pred
        else ""
    )
    lines = [
        "measured: host clock around each action of a second traced iteration (no memory "
        f"windows), each step of an ADVANCE alone{how}; FIRSTURN's time also holds the loss"
    ]
    if pred:
        lines.append(
            f"all layers: predicted {_in_ms(pred)}, measured {_in_ms(meas)} "
            f"({fmt_ratio(meas / pred)}); the timed iteration "
            f"{_in_ms(trace.get('timed_wall_time_s'))}"
        )
    if left_out:
        lines.append(
            f"{left_out} more {_noun(layers)}s in the result file (modes[].trace.layers; "
            "--format json)"
        )
    return lines
