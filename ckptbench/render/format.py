"""The one formatter of each quantity ckptbench shows: bytes, ratios, times, and the labels
that tell cells apart. Pure functions of numbers; "-" stands for a missing value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckptbench.analysis import Spread, differing_fields, field_value
from ckptbench.backends.registry import DEFAULT_BACKEND
from ckptbench.results.schema import Case, RunResult
from ckptbench.results.units import duration_text, exact_size_text, interval_text, size_text
from ckptbench.schedules import get_strategy

__all__ = [
    "LABEL_FIELDS",
    "MIB",
    "cell_labels",
    "common_fields",
    "fmt_bytes",
    "fmt_duration",
    "fmt_name",
    "fmt_overhead",
    "fmt_per_step",
    "fmt_percent",
    "fmt_ratio",
    "fmt_ratio_ci",
    "fmt_size",
    "fmt_time",
    "fmt_time_spread",
    "missing",
    "short_labels",
    "told_apart",
]

MIB = 2**20
#: The characters a long name (a plug-in's layer) keeps in a text table too narrow for it.
NAME_CHARS = 32

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


def _decimals(v: float, digits: int) -> str:
    """``v`` with ``digits`` decimals; one too small for them in two significant digits
    ('0.032' or '1e-07', never '0.0': a host-memory 'savings' of 0.03x is a 30-fold cost)."""
    if v and round(v, digits) == 0:
        return f"{v:.2g}"
    return f"{v:.{digits}f}"


def fmt_percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage: '5.0%'; one too small for ``digits`` decimals in two
    significant digits ('1e-07%', never '0.0%')."""
    return f"{_decimals(100 * fraction, digits)}%"


def fmt_bytes(n: float | None, *, signed: bool = False, digits: int = 1, unit: bool = True) -> str:
    """Bytes in MiB: '48.5 MiB', '+6.5 MiB' (signed), '48.50' (digits=2, unit=False); with
    the unit, a size that would read as zero MiB in KiB or bytes ('4.0 KiB', '512 B')."""
    if missing(n):
        return "-"
    sign = "+" if signed and n > 0 else ""
    if unit and n and round(n / MIB, digits) == 0:  # a few KiB is not '0.0 MiB'
        small = f"{n / 1024:,.{digits}f} KiB" if abs(n) >= 1024 else f"{int(n)} B"
        return sign + small
    return f"{sign}{n / MIB:,.{digits}f}" + (" MiB" if unit else "")


def fmt_overhead(over: Any, *, digits: int = 1, unit: bool = True) -> str:
    """An overhead with its interval (both modes' iteration spreads and a rerun's; a dict of
    :class:`ckptbench.analysis.memnoise.Overhead`'s ``as_dict``, or the object):
    '+12.3 MiB [+11.9, +12.8]'; one smaller than its noise is '< noise (±3.2 MiB)', never a
    number (a negative one least of all), and one whose whole interval is at or below zero
    is '≤ baseline' (no noise to be below: every peak at or under the baseline's)."""
    if over is None:
        return "-"
    get = over.get if isinstance(over, dict) else lambda k: getattr(over, k)
    u = " MiB" if unit else ""
    if not missing(high := get("high")) and high <= 0:
        return "≤ baseline"
    if get("below_noise"):
        return f"< noise (±{interval_text(0, get('noise') / MIB, digits)[1]}{u})"
    lo, hi = interval_text(get("low") / MIB, get("high") / MIB, digits, significant=False)
    lo, hi = (t if t.startswith("-") else f"+{t}" for t in (lo, hi))
    return f"{fmt_bytes(get('value'), signed=True, digits=digits, unit=False)}{u} [{lo}, {hi}]"


def fmt_name(text: Any, limit: int | None = None) -> str:
    """A name a plug-in gave (a layer's) on one line: each unprintable character escaped, as
    error lines escape them; with ``limit``, each side of a range ('a .. b') in at most
    ``limit`` characters, its end kept after an ellipsis ('…layers.12.attention.out'): the
    end of a module's path is what tells its layers apart, the start what they share."""
    if missing(text):
        return "-"
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode()
                    for c in str(text))  # fmt: skip
    if limit is None:
        return shown
    return " .. ".join(p if len(p) <= limit else "…" + p[len(p) - limit + 1 :]
                       for p in shown.split(" .. "))  # fmt: skip


def fmt_size(n: float | None, *, signed: bool = False) -> str:
    """Bytes at the precision of their size: '5.00 KiB', '1.25 MiB' (``results.units``)."""
    return "-" if missing(n) else size_text(n, signed=signed)


def fmt_duration(seconds: float | None) -> str:
    """A duration for people, '-' where missing (``results.units.duration_text``: '45 s',
    '4 min 30 s', '3 d 4 h', '2.5 years')."""
    return "-" if missing(seconds) else duration_text(seconds)


def fmt_ratio(v: float | None, digits: int = 2) -> str:
    """A ratio with its unit: '1.05x'; below 1, in at least two significant digits
    (:func:`ratio_digits`: '0.45x', never '0.4x' where the warnings quote 0.45)."""
    return "-" if missing(v) else f"{_decimals(v, ratio_digits(v, digits))}x"


def ratio_digits(v: float, digits: int) -> int:
    """The decimals a ratio is shown with: ``digits``, or more below 1 so that it keeps two
    significant digits (0.445 -> 2, 0.0317 -> 3)."""
    if v == 0 or abs(v) >= 1:
        return digits
    return max(digits, 1 - math.floor(math.log10(abs(v))))


def fmt_ratio_ci(v: float | None, ci: Sequence[float] | None, digits: int = 2) -> str:
    """A ratio with its 95% interval: '1.17x [1.10, 1.25]', or just '1.17x' without one
    (the interval in the ratio's decimals; ends far off the ratio as bounds:
    :func:`fmt_interval`)."""
    if not missing(v):
        digits = ratio_digits(v, digits)
    text = fmt_ratio(v, digits)
    if missing(v) or not ci:
        return text
    return f"{text} {fmt_interval(ci[0], ci[1], digits, center=v)}"


def fmt_interval(low: float, high: float, digits: int = 2, *, center: float | None = None) -> str:
    """'[1.10, 1.25]', the ends rounded outward (``results.units.interval_text``): the printed
    interval holds the computed one; with the estimate ``center``, an end more than a factor
    100 from it is a bound, '0.80x [<0.008, >80]' (``units.OFF_SCALE``)."""
    lo, hi = interval_text(low, high, digits, center=center)
    return f"[{lo}, {hi}]"


def fmt_time(seconds: float | None, digits: int = 3, unit: bool = True) -> str:
    """Seconds: '1.430 s' (unit=False: '1.430')."""
    if missing(seconds):
        return "-"
    return f"{seconds:.{digits}f}" + (" s" if unit else "")


def fmt_seconds(seconds: float | None) -> str:
    """Seconds at three significant digits, trailing zeros kept: '1.32 s', '1.00 s',
    '0.0742 s', '0.000456 s' (a prediction for a small model is not '0.000 s' beside another
    '0.000 s', and '1 s' not beside '0.903 s'); in exponent notation only below 1 ns or from
    1e9 s ('1.00e-320 s': a costs file's time, as a decimal, ran to 330 characters)."""
    if missing(seconds):
        return "-"
    text = f"{seconds:#.3g}"
    if seconds and not 1e-9 <= abs(seconds) < 1e9:
        return f"{seconds:.2e} s"
    if "e" in text:  # below 1e-4 or from 1000 s: plain decimals at three significant digits
        digits = max(0, 2 - math.floor(math.log10(abs(seconds)))) if seconds else 0
        text = f"{seconds:.{digits}f}"
    return text.rstrip(".") + " s"


def fmt_per_step(seconds: float) -> str:
    """One step's time at three significant digits, in ms or µs: '5.00 ms', '10.2 µs' (190
    steps x '0.01 ms' read as 1.9 ms where they took 3 ms)."""
    value, unit = (seconds * 1e3, "ms") if seconds >= 1e-3 else (seconds * 1e6, "µs")
    return f"{value:#.3g}".rstrip(".") + f" {unit}"


def fmt_time_spread(t: Spread | None) -> str:
    """'[min, max]' of a mode's iteration times (``ModeFigures.time``)."""
    if t is None:
        return "-"
    return f"[{fmt_time(t.min, unit=False)}, {fmt_time(t.max, unit=False)}]"


def _field_text(case: Case, name: str) -> str:
    value = field_value(case, name)  # the executor a case runs, where it asked for none
    if value is None:  # not set for this case (a budget of a strategy set by snaps)
        return ""
    if name == "model":
        return str(value)
    if name == "strategy":
        return str(value)
    if name in ("memory_limit_bytes", "budget_bytes"):
        what = "limit" if name == "memory_limit_bytes" else "budget"
        return f"{what}={exact_size_text(int(value))}"
    return f"{_SHORT.get(name, name)}={value}"


def _label(case: Case, names: Sequence[str]) -> str:
    return " ".join(t for t in (_field_text(case, n) for n in names) if t)


def _labels(cases: Sequence[Case], names: Sequence[str]) -> list[str]:
    """Each case's label from ``names``, without the executor of a case that runs none,
    unless leaving it out makes two different cases read the same."""
    if "executor" not in names:
        return [_label(c, names) for c in cases]
    rest = [n for n in names if n != "executor"]
    # a framework's own checkpointing runs none: an executor in its label would claim what
    # did not run
    labels = [_label(c, names if c.executor_ran else rest) for c in cases]
    if len(set(labels)) < len({c.key for c in cases}):
        return [_label(c, names) for c in cases]
    return labels


def cell_labels(cases: Sequence[Case]) -> list[str]:
    """A label per case that tells the cases apart: model, steps, snaps and strategy, plus
    every other field whose value differs between ``cases`` ('lstm l=1000 s=31 revolve
    h=128 b=16'). Two cases with equal labels are equal cases."""
    extra = [f for f in differing_fields(cases) if f not in LABEL_FIELDS]
    return _labels(cases, [*LABEL_FIELDS, *extra])


def short_labels(cases: Sequence[Case]) -> list[str]:
    """Only the fields that differ between ``cases`` ('s=4 uniform'), for narrow tables;
    :func:`common_fields` names the rest."""
    names = differing_fields(cases)
    if not names:
        return cell_labels(cases)
    return _labels(cases, names)


def told_apart(labels: Sequence[str], results: Sequence[RunResult]) -> list[str]:
    """``labels`` of ``results`` (:func:`cell_labels`, :func:`short_labels`), each label that
    several results share followed by where its result was read from: 's=3 revolve [sw1]',
    's=3 revolve [r1.json]' (invocations of one cell, shown row by row). A sweep's cell file
    is named by its folder, any other file by its path; results read from no file by
    their order ('[run 2]')."""
    rows: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        rows.setdefault(label, []).append(i)
    out = list(labels)
    for label, idx in rows.items():
        if len(idx) < 2:
            continue
        names = [_source_name(results[i]) for i in idx]
        if len(set(names)) < len(names):  # one folder's files: their paths
            names = [fmt_name(results[i].source) for i in idx]
        if len(set(names)) < len(names) or not all(names):
            names = [f"run {k}" for k in range(1, len(idx) + 1)]
        for i, name in zip(idx, names, strict=True):
            out[i] = f"{label} [{name}]"
    return out


def _source_name(result: RunResult) -> str:
    """Where ``result`` was read from, short: a sweep's cell file (``<key>.json`` in a
    folder) by its folder, any other by its path; "" when it was read from no file."""
    path = Path(result.source)
    if result.source and path.name == f"{result.case.key}.json" and path.parent.name:
        return fmt_name(str(path.parent))
    return fmt_name(result.source) if result.source else ""


def common_fields(cases: Sequence[Case]) -> str:
    """The fields every case shares ('lstm l=1000 revolve h=256 b=16 ...')."""
    if not cases:
        return ""
    differ = set(differing_fields(cases))
    shown = (*LABEL_FIELDS, "hidden", "batch", "input", "output", "threads", "seed")
    # where every cell ran off the defaults (autograd on a CPU), say which framework and
    # device: the figures of a GPU report are device memory
    shown += tuple(n for n, default in (("backend", DEFAULT_BACKEND), ("device", "cpu"))
                   if getattr(cases[0], n, default) != default)  # fmt: skip
    # and a dtype or an executor off the defaults (float64; the backend's own on the device)
    shown += tuple(n for n in ("dtype", "executor") if n in cases[0].identity())
    names = [n for n in shown if n not in differ and hasattr(cases[0], n)]
    return _label(cases[0], names)


def setting_text(case: Case) -> str:
    """What a case's strategy is set by, in a run's words: '31 snaps (revolve)', 'optimal
    within 8.00 MiB', 'torch.utils.checkpoint, 31 segments', 'every state stored (store-all)'."""
    spec = get_strategy(case.strategy)
    if not spec.uses_snaps and spec.setting.value == "snaps":  # store-all
        return f"every state stored ({spec.name})"  # not '1000 snaps': it keeps l - 1
    value = spec.setting_of(case.snaps, case.budget_bytes)
    return spec.setting.describe(spec, fmt_size(value) if spec.setting.in_bytes else str(value))
