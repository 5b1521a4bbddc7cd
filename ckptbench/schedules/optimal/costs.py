"""The step costs the budget planner plans with, and their one file format.

A chain's steps each have a forward cost, a taped-forward-plus-reverse cost, a state size and
a tape size (Beaumont, Eyraud-Dubois, Herrmann, Joly & Shilova, "Optimal checkpointing for
heterogeneous chains", 2019): :class:`Costs` holds them, one value for every step or one per
step, validated on construction; :func:`costs_from_json` reads the costs file plug-ins give
the CLI (docs/planner.md). Pure: no arrays, no I/O.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ckptbench.schedules.actions import check_int

__all__ = ["MAX_COST_BYTES", "MAX_COST_TIME_S", "Costs", "PlanError", "costs_from_json"]

#: Largest byte count or time a costs file may give (beyond, a typo, not a measurement).
MAX_COST_BYTES = 2**62
MAX_COST_TIME_S = 1e9


class PlanError(ValueError):
    """No schedule fits, or the planner's input is invalid."""


def _tuple_or_scalar(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, (list, tuple)):
        if not value:
            raise PlanError(f"{name} must not be an empty list")
        return tuple(_scalar(name, v, kind) for v in value)
    return _scalar(name, value, kind)


def _scalar(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(f"{name} must be a number or a list of numbers, got {_brief(value)}")
    top = MAX_COST_BYTES if kind is int else MAX_COST_TIME_S
    if not 0 <= value <= top:  # NaN compares false, so it is out of range too
        raise PlanError(f"{name} must be finite, >= 0 and <= {top:.3g}, got {_brief(value)}")
    if kind is int:
        if value != int(value):
            raise PlanError(f"{name} must be a whole number of bytes, got {value!r}")
        return int(value)
    return float(value)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Costs:
    """Per-step costs of a chain: one value for every step (homogeneous) or a tuple per step.

    ``forward_time_s``: one untaped step. ``taped_time_s``: one taped step plus its reverse.
    ``state_bytes[i]``: the state x_i (a snapshot). ``tape_bytes[i]``: step i's tape, kept
    until its reverse. ``fixed_time_s``: per-gradient time no schedule changes (e.g. the
    readout of every step in the first sweep, the loss); it only shifts predictions.
    """

    forward_time_s: float | tuple[float, ...]
    taped_time_s: float | tuple[float, ...]
    state_bytes: int | tuple[int, ...]
    tape_bytes: int | tuple[int, ...]
    fixed_time_s: float = 0.0

    def __post_init__(self) -> None:
        for name, kind in (
            ("forward_time_s", float),
            ("taped_time_s", float),
            ("state_bytes", int),
            ("tape_bytes", int),
        ):
            object.__setattr__(self, name, _tuple_or_scalar(name, getattr(self, name), kind))
        if isinstance(self.fixed_time_s, (list, tuple)):  # one time per gradient, not per step
            raise PlanError(
                f"fixed_time_s must be one number (seconds per gradient), got "
                f"{_brief(self.fixed_time_s)}"
            )
        object.__setattr__(self, "fixed_time_s", _scalar("fixed_time_s", self.fixed_time_s, float))
        lengths = {len(v) for v in self._fields() if isinstance(v, tuple)}
        if len(lengths) > 1:
            raise PlanError(f"per-step cost lists differ in length: {sorted(lengths)}")
        sb = self.state_bytes
        if (min(sb) if isinstance(sb, tuple) else sb) < 1:
            raise PlanError("state_bytes must be >= 1")

    def _fields(self) -> tuple:
        return (self.forward_time_s, self.taped_time_s, self.state_bytes, self.tape_bytes)

    @property
    def steps(self) -> int | None:
        """The chain length the per-step lists fix, or None for homogeneous costs."""
        for v in self._fields():
            if isinstance(v, tuple):
                return len(v)
        return None

    def per_step(self, steps: int) -> tuple[list[float], list[float], list[int], list[int]]:
        """(forward, taped, state bytes, tape bytes) as lists of ``steps`` entries."""
        check_int("steps", steps)
        if self.steps is not None and self.steps != steps:
            raise PlanError(f"costs are given for {self.steps} steps, not {steps}")
        return tuple(  # type: ignore[return-value]
            list(v) if isinstance(v, tuple) else [v] * steps for v in self._fields()
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict (lists for per-step values); :func:`costs_from_json` reads it back."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, doc: Any) -> Costs:
        """Costs from a dict with the field names; unknown or missing keys are a PlanError."""
        if not isinstance(doc, dict):
            raise PlanError("costs must be a JSON object")
        names = {"forward_time_s", "taped_time_s", "state_bytes", "tape_bytes", "fixed_time_s"}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise PlanError(
                f"unknown cost field {unknown[0]!r} (known: {', '.join(sorted(names))})"
            )
        missing = sorted(names - {"fixed_time_s"} - set(doc))
        if missing:
            raise PlanError(f"costs lack {missing[0]!r}")
        return cls(**doc)


def costs_from_json(text: str) -> Costs:
    """Parse a costs file (the format plug-ins give the CLI).
    A leading UTF-8 byte-order mark (Notepad, PowerShell's ``Out-File``) reads as nothing,
    as every reader of a user's file reads it (``results.inputs.without_bom``, which this
    pure module does not import); one anywhere else is not JSON.

    A JSON object with ``forward_time_s``, ``taped_time_s`` (seconds), ``state_bytes``,
    ``tape_bytes`` (bytes) and optionally ``fixed_time_s``; each a number for every step or a
    list with one entry per step (heterogeneous chain; lists must all have the chain's
    length). Example: ``{"forward_time_s": [0.001, 0.002], "taped_time_s": 0.005,
    "state_bytes": 65536, "tape_bytes": [450000, 900000]}``.
    """

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        doc = dict(pairs)
        if len(doc) < len(pairs):  # a repeated key: JSON would keep the last silently
            keys = [k for k, _ in pairs]
            twice = sorted({k for k in keys if keys.count(k) > 1})
            raise PlanError(f"costs file names {', '.join(map(repr, twice))} twice")
        return doc

    if isinstance(text, str):  # bytes: json.loads reads a leading mark as nothing itself
        text = text.removeprefix("\ufeff")  # a byte-order mark first: nothing
    try:
        doc = json.loads(text, object_pairs_hook=unique)
    except PlanError:
        raise
    except json.JSONDecodeError as err:
        raise PlanError(f"costs file is not JSON: {err.msg} at line {err.lineno}") from None
    except RecursionError:  # '[[[[...' thousands deep
        raise PlanError("costs file is nested too deep to be a costs file") from None
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise PlanError(f"costs file is not usable JSON: {str(err).splitlines()[0]}") from None
    return Costs.from_dict(doc)
