"""The one formatter of each quantity ckptbench shows: bytes, ratios, times, and the labels
that tell cells apart. Pure functions of numbers; "-" stands for a missing value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ckptbench.analysis import differing_fields
from ckptbench.results import Case

__all__ = [
    "LABEL_FIELDS",
    "MIB",
    "cell_labels",
    "common_fields",
    "fmt_bytes",
    "fmt_ratio",
    "fmt_time",
    "fmt_time_spread",
    "missing",
    "short_labels",
]

MIB = 2**20

#: Case fields every cell label shows; other fields appear when they differ between cells.
LABEL_FIELDS = ("model", "steps", "snaps", "strategy")

_SHORT = {
    "steps": "l",
    "snaps": "s",
    "hidden": "h",
    "batch": "b",
    "input": "i",
    "output": "o",
    "threads": "t",
}


def missing(v: Any) -> bool:
    """None, or a float NaN (what a missing number becomes in a numeric column)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def fmt_bytes(n: float | None, *, signed: bool = False, digits: int = 1, unit: bool = True) -> str:
    """Bytes in MiB: '48.5 MiB', '+6.5 MiB' (signed), '48.50' (digits=2, unit=False)."""
    if missing(n):
        return "-"
    sign = "+" if signed and n > 0 else ""
    return f"{sign}{n / MIB:,.{digits}f}" + (" MiB" if unit else "")


def fmt_ratio(v: float | None, digits: int = 2) -> str:
    """A ratio with its unit: '1.05x'."""
    return "-" if missing(v) else f"{v:.{digits}f}x"


def fmt_time(seconds: float | None, digits: int = 3, unit: bool = True) -> str:
    """Seconds: '1.430 s' (unit=False: '1.430')."""
    if missing(seconds):
        return "-"
    return f"{seconds:.{digits}f}" + (" s" if unit else "")


def fmt_time_spread(t: dict[str, float] | None) -> str:
    """'[min, max]' of a summary's time_s entry."""
    if not t:
        return "-"
    return f"[{fmt_time(t['min'], unit=False)}, {fmt_time(t['max'], unit=False)}]"


def _field_text(case: Case, name: str) -> str:
    value = getattr(case, name)
    if name == "model":
        return str(value)
    if name == "strategy":
        return str(value)
    if name == "memory_limit_bytes" and value is not None:
        return f"limit={fmt_bytes(value, digits=0).replace(' ', '')}"
    return f"{_SHORT.get(name, name)}={value}"


def cell_labels(cases: Sequence[Case]) -> list[str]:
    """A label per case that tells the cases apart: model, steps, snaps and strategy, plus
    every other field whose value differs between ``cases`` ('lstm l=1000 s=31 revolve
    h=128 b=16'). Two cases with equal labels are equal cases."""
    extra = [f for f in differing_fields(cases) if f not in LABEL_FIELDS]
    names = [*LABEL_FIELDS, *extra]
    return [" ".join(_field_text(c, n) for n in names) for c in cases]


def short_labels(cases: Sequence[Case]) -> list[str]:
    """Only the fields that differ between ``cases`` ('s=4 uniform'), for narrow tables;
    :func:`common_fields` names the rest."""
    names = differing_fields(cases)
    if not names:
        return cell_labels(cases)
    return [" ".join(_field_text(c, n) for n in names) for c in cases]


def common_fields(cases: Sequence[Case]) -> str:
    """The fields every case shares ('lstm l=1000 revolve h=256 b=16 ...')."""
    if not cases:
        return ""
    differ = set(differing_fields(cases))
    shown = (*LABEL_FIELDS, "hidden", "batch", "input", "output", "threads", "seed")
    names = [n for n in shown if n not in differ and hasattr(cases[0], n)]
    return " ".join(_field_text(cases[0], n) for n in names)
