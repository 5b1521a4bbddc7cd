"""Sizes, durations and fractions as people type them ('2GiB', '500MB', '5ms', '10m', '5%'),
parsed exactly, and sizes written back for people (:func:`size_text`, :func:`exact_size_text`),
durations too (:func:`duration_text`: the sweep's progress lines and every rendered one).

Pure: no click, no I/O. The command line's options and a sweep config's ``*_bytes`` and
``timeout_s`` values read through the two parsers, so a size means the same in both; every
size ckptbench writes in words (the gate, the planner's errors, tables, plot labels) goes
through the two writers, so a size reads the same everywhere. Parse errors are
:class:`ValueError` whose message quotes what was typed."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

#: Sizes are below this (4 EiB, itself refused: from there on, a typo).
MAX_BYTES = 2**62
#: Durations are below this many seconds (about 31,700 years: from there on, a typo).
MAX_SECONDS = 1e12

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgtpe]?i?b?)?\s*$", re.IGNORECASE)
#: The units a duration is typed in: those :func:`duration_text` writes ('4 min', '3 d')
#: read back, beside the short 'm'.
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m|h|d)?\s*$")

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 2**20,
    "mb": 10**6,
    "mib": 2**20,
    "g": 2**30,
    "gb": 10**9,
    "gib": 2**30,
    "t": 2**40,
    "tb": 10**12,
    "tib": 2**40,
    "p": 2**50,  # up to the limit, so '4EiB' is said to be too large, not 'not a size'
    "pb": 10**15,
    "pib": 2**50,
    "e": 2**60,
    "eb": 10**18,
    "eib": 2**60,
}
#: A fraction as typed: ASCII digits, an optional exponent, an optional '%'.
_FRACTION = re.compile(r"^[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?\s*%?$")
_DURATION_UNITS = {
    "ms": 1e-3,
    "s": 1.0,
    "min": 60.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    None: 1.0,
}


def _clip(text: str) -> str:
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text)} characters)"


def parse_size(text: str) -> int:
    """'2GiB', '500MB', '1.5g', '1048576' -> bytes (k/m/g/t alone are binary units), exact
    up to :data:`MAX_BYTES` (the digits go through :class:`fractions.Fraction`, never a
    float); at least one byte."""
    m = _SIZE.match(text)
    if not m or (m.group(2) or "").lower() not in _SIZE_UNITS:
        raise ValueError(f"{_clip(text)} is not a size like 2GiB, 500MB or 1048576")
    digits = m.group(1)
    if len(digits) > 40:  # no size has this many digits; never converted, never a float
        raise ValueError(f"{_clip(text)} is too large: a size must be below 2**62 bytes (4 EiB)")
    value = Fraction(digits) * _SIZE_UNITS[(m.group(2) or "").lower()]
    if not value < MAX_BYTES:
        raise ValueError(f"{_clip(text)} is too large: a size must be below 2**62 bytes (4 EiB)")
    n = int(value)
    if n <= 0:
        raise ValueError(
            f"{text!r} is less than one byte" if value > 0 else f"{text!r} must be positive"
        )
    return n


def binary_twin(text: str) -> str | None:
    """For a size typed in a decimal (SI) unit, '8MB' or '1.5 gb', the same digits in the
    binary unit ('8MiB', '1.5GiB'), which people often mean; None for any other text."""
    m = _SIZE.match(text)
    unit = (m.group(2) or "").lower() if m else ""
    if len(unit) != 2 or unit[1] != "b" or unit not in _SIZE_UNITS:
        return None
    return f"{m.group(1)}{unit[0].upper()}iB"


def parse_duration(text: str) -> float:
    """'5ms', '0.005', '2s', '10m' (or '10 min'), '1h', '2d' -> seconds; positive and
    finite. Every unit :func:`duration_text` writes but 'years' reads back."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"{_clip(text)} is not a duration like 5ms, 2s, 10m, 1h or 2d")
    value = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    check_duration(value, text)  # hundreds of digits read as inf
    if value <= 0:
        raise ValueError(f"{text!r} must be positive")
    return value


def check_duration(seconds: float, text: str | None = None) -> float:
    """``seconds`` if below :data:`MAX_SECONDS`, else a ValueError saying so: the one bound
    of a duration typed (:func:`parse_duration`) or written as a number in a sweep config
    (``timeout_s = 9223372036854775807`` ran where ``--timeout`` refused it)."""
    if not seconds < MAX_SECONDS:
        said = _clip(text) if text is not None else _clip(str(seconds))
        raise ValueError(f"{said} is too long a duration (below {MAX_SECONDS:.0e} s)")
    return seconds


def parse_fraction_text(text: str, *, positive: bool = False) -> float:
    """'5%' or '0.05' -> 0.05; from 0 (above it with ``positive``) to below 1000%; 100% or
    more only with its '%' ('5' is refused as a likely slip for 5%). ASCII digits only
    (``float`` alone would read Arabic-Indic digits, '1_0', 'nan' and 'inf'). The errors
    quote what was typed, never the parsed float ('0%', not '0.0'). A zero with a minus
    sign ('-0%') is 0."""
    t = text.strip()
    if t.startswith("-") and _FRACTION.match(t[1:]) and float(t[1:].rstrip("%")) == 0:
        t = t[1:]  # '-0%' is 0%, not a slip: negative figures stay refused
    if not _FRACTION.match(t):
        raise ValueError(f"{_clip(text)} is not a fraction like 5% or 0.05")
    value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    if positive and value == 0:
        raise ValueError(f"{text!r} must be above 0 (a zero tolerance fails on noise)")
    if 1 <= value < 1000 and not t.endswith("%"):  # '5' typed for 5%: never read 500%
        exact = Decimal(t)  # what was typed, never the float's digits ('1.1' / 100)
        meant = f"write {t}%" + (f" (or {decimal_text(exact / 100)})" if value < 100 else "")
        if value < 10:  # 500% is in range: it may be meant
            meant += f", or {decimal_text(exact * 100)}% if you mean it"
        raise ValueError(f"{t} would be {decimal_text(exact * 100)}%: {meant}")
    if not value < 10:
        raise ValueError(f"{text!r} is out of range (0% to below 1000%)")
    return value


def decimal_text(d: Decimal) -> str:
    """A decimal without exponent or trailing zeros: 0.05, 500, 0.011."""
    return f"{d.normalize():f}"


_BINARY = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def size_text(n: float, *, signed: bool = False, compact: bool = False) -> str:
    """Bytes at the precision of their size: '512 B', '5.00 KiB', '256 KiB', '1.25 MiB',
    '+48.5 MiB', '2.00 GiB' (three significant digits in the binary unit that keeps them),
    so a 5 KiB limit never reads '+0.00 MiB'; ``compact`` drops trailing zeros ('3 KiB',
    '1.5 MiB': plot labels)."""
    sign = "+" if signed and n > 0 else ("-" if n < 0 else "")
    size = abs(float(n))
    for unit, scale in _BINARY:
        if size >= scale:
            value = size / scale
            if compact:
                return f"{sign}{value:.3g} {unit}"
            digits = 2 if value < 10 else 1 if value < 100 else 0
            return f"{sign}{value:.{digits}f} {unit}"
    return f"{sign}{size:.0f} B"


def exact_size_text(n: int) -> str:
    """Bytes written exactly in the unit that gives the shortest text, binary first ('16MiB',
    '1536KiB', '18MB', '1001B'): each reads back through :func:`parse_size` as exactly ``n``,
    so two different sizes never read the same (labels need that)."""
    units = (*_BINARY, ("GB", 10**9), ("MB", 10**6), ("kB", 10**3))
    texts = [f"{n // size}{unit}" for unit, size in units if n and n % size == 0]
    return min([*texts, f"{n}B"], key=len)


#: An end of a ratio's interval more than this factor from its estimate is printed as a
#: bound: two rounds on a busy machine gave a slowdown of 0.80x [0.0000012, 512539.87], true
#: and unreadable; it reads 0.80x [<0.008, >80] (the exact ends stay in the result file).
OFF_SCALE = 100
#: A relative width above this (1000%) is printed as '>1000%' (+/-64369747.3% said nothing more).
HUGE_RELATIVE = 10.0


def relative_text(fraction: float) -> str:
    """A relative width as a percentage with one decimal, '4.6%', or '>1000%' above
    :data:`HUGE_RELATIVE`."""
    return f">{HUGE_RELATIVE:.0%}" if fraction > HUGE_RELATIVE else f"{fraction:.1%}"


def half_width_text(fraction: float) -> str:
    """An interval's larger side relative to its estimate (``Estimate.half_width_rel``, what
    ``--precision`` judges) as the bound it is: 'within +/-4.6%', or 'wider than +/-1000%'.
    A ratio's interval is not symmetric: where its ends are known, :func:`sides_text`."""
    text = relative_text(fraction)
    return f"wider than +/-{text[1:]}" if text.startswith(">") else f"within +/-{text}"


def sides_text(value: float, low: float, high: float) -> str:
    """How far each end of ``[low, high]`` lies from ``value``, relative to it: '-28.0%/+38.1%'
    (a ratio's interval is asymmetric: one '+/-' figure would misstate a side), '>+1000%'
    for a high end more than :data:`HUGE_RELATIVE` above."""
    up = relative_text(high / value - 1.0)
    up = f">+{up[1:]}" if up.startswith(">") else f"+{up}"
    return f"-{relative_text(1.0 - low / value)}/{up}"


def off_scale(center: float | None, low: float, high: float) -> tuple[str | None, str | None]:
    """'<X' for a low end below ``center`` / OFF_SCALE and '>Y' for a high end above
    ``center`` * OFF_SCALE (X and Y those limits at one significant digit, rounded so each
    stays true), None for an end on the scale (or no positive ``center``)."""
    from decimal import ROUND_CEILING, ROUND_FLOOR

    if center is None or not math.isfinite(center) or center <= 0:
        return None, None

    def limit(v: float, rounding: str) -> str:
        d = Decimal(repr(v))
        return decimal_text(d.quantize(Decimal(1).scaleb(d.adjusted()), rounding=rounding))

    lo_limit, hi_limit = center / OFF_SCALE, center * OFF_SCALE
    lo = f"<{limit(lo_limit, ROUND_CEILING)}" if low < lo_limit else None
    hi = f">{limit(hi_limit, ROUND_FLOOR)}" if high > hi_limit else None
    return lo, hi


def interval_text(
    low: float,
    high: float,
    digits: int,
    *,
    significant: bool = True,
    center: float | None = None,
) -> tuple[str, str]:
    """An interval's ends with ``digits`` decimals, rounded outward (the low end down, the
    high end up), so the printed interval holds the computed one: a savings interval from
    0.954 reads [0.95, ...], not [1.0, ...], which hid a bound below 1. An end too small for
    the decimals keeps two significant digits, rounded the same way (unless not
    ``significant``: a few KiB of an overhead interval in MiB read 0.0). With the ratio's
    estimate ``center``, an end more than a factor :data:`OFF_SCALE` from it reads as a
    bound, '<0.008' or '>80' (still true, and readable)."""
    from decimal import ROUND_CEILING, ROUND_FLOOR

    out = []
    bounds = off_scale(center, low, high)
    for v, rounding, bound in ((low, ROUND_FLOOR, bounds[0]), (high, ROUND_CEILING, bounds[1])):
        if bound is not None:
            out.append(bound)
            continue
        d = Decimal(repr(float(v)))
        if not d.is_finite():
            out.append(str(v))
            continue
        if abs(d) >= 10**6 or (significant and d and abs(d) < Decimal("1e-6")):
            exp = d.adjusted()  # two significant digits in exponent form: '1.5e+06'
            m = d.scaleb(-exp).quantize(Decimal("0.1"), rounding=rounding)
            if abs(m) >= 10:  # 9.97 rounded up
                m, exp = (m / 10).quantize(Decimal("0.1"), rounding=rounding), exp + 1
            out.append(f"{m:f}e{exp:+03d}")
            continue
        places = digits
        if significant and d and abs(d) < Decimal(1).scaleb(-digits):  # two significant digits
            places = 1 - d.adjusted()
        step = Decimal(1).scaleb(-places)
        out.append(f"{d.quantize(step, rounding=rounding):f}")
    return out[0], out[1]


def count_text(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``count_text(1, "cell")`` is "1 cell"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


#: A year, for :func:`duration_text`.
YEAR_S = 365.25 * 86400


def duration_text(seconds: float) -> str:
    """A duration for people: '45 s', '4 min', '4 min 30 s', '1 h 5 min', '3 d 4 h', '2.5
    years', 'over 1,000 years' (a sweep of 10 000 rounds of long chains is estimated in
    years; '3847042856094246 h' was said). The one writer: ``render.format.fmt_duration``
    and the sweep's progress lines (``sweep.progress``) both say it."""
    if float(seconds) >= 1000 * YEAR_S:
        return "over 1,000 years"
    s = round(float(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, rest = divmod(s, 60)
        return f"{m} min" + (f" {rest} s" if rest else "")
    if s < 86400:
        h, rest = divmod(s, 3600)
        return f"{h} h" + (f" {rest // 60} min" if rest // 60 else "")
    if s < YEAR_S:
        d, rest = divmod(s, 86400)
        return f"{d} d" + (f" {rest // 3600} h" if rest // 3600 else "")
    years = s / YEAR_S
    return f"{years:.1f} years" if years < 10 else f"{years:,.0f} years"
