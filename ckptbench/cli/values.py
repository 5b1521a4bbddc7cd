"""Option values as people type them: sizes ('2GiB'), durations ('5m') and fractions ('5%')
as click parameter types, each refusal one line naming what was typed; a choice mistyped
answered with the nearest ('pytorch' -> 'torch': :class:`SuggestingChoice`).

The parsing is :mod:`ckptbench.results.units`' (pure, shared with a sweep config); here
are the command line's rules on top: a bare number below :data:`BARE_BYTES_MIN` is a slip,
a decimal unit is noted (:func:`size_notes`), and an option that refuses 0 says why.
"""

from __future__ import annotations

import difflib
import re

import click

from ckptbench.results.files import SHOWN_CHARS, shown_value
from ckptbench.results.units import binary_twin, parse_duration, parse_fraction_text, parse_size


def parse_bytes(text: str) -> int:
    """'2GiB', '500MB', '1.5g', '1048576' -> bytes (:func:`ckptbench.results.units.parse_size`)."""
    try:
        return parse_size(text)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def parse_seconds(text: str) -> float:
    """'5ms', '0.005', '2s', '10m' -> seconds (:func:`ckptbench.results.units.parse_duration`)."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


#: A size without a unit below this is refused as a likely slip ('--budget 8' for 8MiB).
BARE_BYTES_MIN = 1024
#: The same for a memory limit: no worker runs in under 1 MiB, so '--memory-limit 2000' is
#: 2000 MiB meant, never a limit every mode would exceed at start-up.
BARE_LIMIT_MIN = 2**20
#: Where the sizes typed in a decimal unit are noted (``ctx.meta``), for :func:`size_notes`.
SI_SIZES = "ckptbench.si_sizes"


class _Bytes(click.ParamType):
    name = "SIZE"

    def __init__(self, bare_min: int = BARE_BYTES_MIN, zero: str = "") -> None:
        self.bare_min = bare_min
        self.zero = zero  # why this option refuses 0 (said with the refusal)

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            n = parse_bytes(str(value))
        except click.BadParameter as err:
            if self.zero and _is_zero(str(value)):
                self.fail(f"{str(value).strip()!r} must be positive: {self.zero}", param, ctx)
            raise err
        if n < self.bare_min and str(value).strip().replace(".", "", 1).isdigit():
            text = str(value).strip()
            self.fail(
                f"{text} would be {n} bytes (a size without a unit is bytes): "
                f"write {text}MiB, or {text}B if you mean bytes",
                param,
                ctx,
            )
        if ctx is not None and param is not None and (twin := binary_twin(str(value))):
            name, text = param.opts[0] if param.opts else param.name, str(value).strip()
            ctx.meta.setdefault(SI_SIZES, []).append(
                f"{name} {text} is {n} B: its unit counts powers of 1000 (SI); "
                f"{twin} would be {parse_bytes(twin)} B"
            )
        return n


def size_notes(ctx: click.Context) -> tuple[str, ...]:
    """A note for each size option typed in a decimal unit ('--budget 8MB')."""
    return tuple(ctx.meta.get(SI_SIZES, ()))


class _Seconds(click.ParamType):
    name = "DURATION"

    def __init__(self, bare_min: float = 0.0) -> None:
        self.bare_min = bare_min  # a number without a unit below this is refused as a slip

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        seconds, text = parse_seconds(str(value)), str(value).strip()
        if seconds < self.bare_min and text.replace(".", "", 1).isdigit():
            self.fail(
                f"{text} would be {text} s (a duration without a unit is seconds): write "
                f"{text}m, or {text}s if you mean it",
                param,
                ctx,
            )
        return seconds


BYTES, SECONDS = _Bytes(), _Seconds()
#: ``run --max-time``, the whole job's cap (default 4m): '--max-time 4' is 4m meant, never a
#: 4-second cap that still runs two rounds and quotes their interval.
CAP_SECONDS = _Seconds(bare_min=60.0)
#: ``check --memory-floor``: 0 is refused with its reason.
FLOOR_BYTES = _Bytes(
    zero="a zero floor fails on noise (exact peaks move by about 0.03 MiB between processes); "
    "a small one such as 64KiB gates on --memory-tolerance above it"
)


def _is_zero(text: str) -> bool:
    """'0', '0B', '0.0MiB': a size of nothing, whatever its unit."""
    digits = re.match(r"^\s*([0-9]*\.?[0-9]+)", text)
    return digits is not None and float(digits.group(1)) == 0


#: ``--memory-limit``: a bare number below 1 MiB is refused as a slip, as 8 is for --budget.
LIMIT_BYTES = _Bytes(bare_min=BARE_LIMIT_MIN)


class WholeRange(click.IntRange):
    """``click.IntRange`` whose refusals say the range in words and quote what was typed cut
    (:func:`shown_value`): '--steps 1111...' of 5000 digits was echoed whole and called "not
    a valid integer range" (Python reads at most 4300 digits as an int)."""

    def range_words(self) -> str:
        """'a whole number from 1 up', 'a whole number from 1 to 100'."""
        return f"a whole number from {self.min} " + ("up" if self.max is None else f"to {self.max}")

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return super().convert(value, param, ctx)
        text, takes = value.strip(), self.range_words()
        if param is not None and param.opts:
            takes = f"{param.opts[0]} takes {takes}"
        try:
            number = int(text)
        except ValueError:
            what = "is not a number"
            if re.fullmatch(r"[+-]?[0-9]+", text):  # digits past Python's 4300
                what = "is too long a number to read (over 4300 digits)"
            self.fail(f"{shown_value(text)} {what}: {takes}", param, ctx)
        try:
            return super().convert(number, param, ctx)
        except click.BadParameter:
            if len(text) <= SHOWN_CHARS:  # click's own words: "0 is not in the range x>=1."
                raise
            self.fail(f"{shown_value(text)} is out of range: {takes}", param, ctx)


def parse_fraction(text: str, *, positive: bool = False) -> float:
    """'5%' or '0.05' -> 0.05 (:func:`ckptbench.results.units.parse_fraction_text`)."""
    try:
        return parse_fraction_text(str(text), positive=positive)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


class _Fraction(click.ParamType):
    name = "FRACTION"

    def __init__(self, *, positive: bool = False) -> None:
        self.positive = positive

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        return parse_fraction(value, positive=self.positive)


FRACTION = _Fraction()
POSITIVE_FRACTION = _Fraction(positive=True)


#: What people type for a choice that goes by another name here: suggested, never accepted
#: for it (only where that name is a choice of the option).
CHOICE_ALIASES = {
    "pytorch": "torch",
    "pt": "torch",
    "jaxlib": "jax",
    "flax": "jax",
    "numpy": "autograd",
    "binomial": "revolve",
    "treeverse": "revolve",
    "sqrt": "uniform",
    "fp64": "float64",
    "double": "float64",
    "f64": "float64",
    "fp32": "float32",
    "float": "float32",
    "f32": "float32",
    "bf16": "bfloat16",
    "md": "markdown",
    "txt": "text",
    "htm": "html",
    "cuda:0": "cuda",
    "nvidia": "cuda",
}


def nearest_choice(value: object, choices: list[str] | tuple[str, ...]) -> str | None:
    """The choice ``value`` most likely meant: its own name in another case, a known other
    name (:data:`CHOICE_ALIASES`), or the nearest by ``difflib``; None where none is near."""
    typed = str(value).strip().lower()
    by_case = {c.lower(): c for c in choices}
    if typed in by_case:
        return by_case[typed]
    alias = CHOICE_ALIASES.get(typed)
    if alias in choices:
        return alias
    near = difflib.get_close_matches(typed, list(by_case), n=1, cutoff=0.6)
    return by_case[near[0]] if near else None


def did_you_mean(value: object, choices: list[str] | tuple[str, ...]) -> str:
    """ " (Did you mean 'torch'?)" as click words an option name's, or ''."""
    near = nearest_choice(value, choices)
    return f" (Did you mean {near!r}?)" if near is not None else ""


def not_a_choice(value: object, choices: list[str] | tuple[str, ...]) -> str:
    """The refusal "'pytorch' is not one of 'autograd', 'jax', 'torch'. (Did you mean
    'torch'?)", in click's words, the value cut (:func:`shown_value`), the nearest choice
    where one is near."""
    listed = ", ".join(map(repr, choices))
    said = f"is not {listed}." if len(choices) == 1 else f"is not one of {listed}."
    return f"{shown_value(value)} {said}{did_you_mean(value, choices)}"


class SuggestingChoice(click.Choice):
    """``click.Choice`` whose refusal names the nearest choice: '--backend pytorch' is
    "'pytorch' is not one of 'autograd', 'jax', 'torch'. (Did you mean 'torch'?)", as click
    answers a mistyped option name; a long value is cut (:func:`not_a_choice`)."""

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(not_a_choice(value, [str(c) for c in self.choices]), param, ctx)
