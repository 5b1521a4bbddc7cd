"""``run --precision``: the option's value (or ``CKPTBENCH_PRECISION``'s) and the rounds
target it sets, checked against ``--rounds``, ``--max-rounds`` and ``--modes`` in the
user's own words before anything is measured."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import click

from ckptbench.cli.options import InputError
from ckptbench.cli.values import parse_fraction
from ckptbench.results.units import count_text, decimal_text

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

DEFAULT = click.core.ParameterSource.DEFAULT


def precision_value(text: str | None) -> float | None:
    """``--precision``: '5%' or 0.05 -> 0.05; 'off' (or none, or any zero: 0, 0%, 0.0) ->
    None (add no rounds)."""
    if text is None or str(text).strip().lower() in ("off", "none"):
        return None
    try:
        value = parse_fraction(text)
    except click.BadParameter:
        value = -1.0  # not a fraction in range: said in the one message below
    if not 0 <= value < 1:
        raise click.BadParameter(
            f"{text!r}: the slowdown interval's half-width, as a fraction from 0% (off) to "
            f"below 100%{percent_meant(str(text))}"
        )
    return value or None


def percent_meant(text: str) -> str:
    """'5' (typed for 5%, read 500%) -> ': write 5% (or 0.05)'; anything else -> ' (e.g. 5%)'."""
    t = text.strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", t) and 1 <= Decimal(t) < 100:
        return f": write {t}% (or {decimal_text(Decimal(t) / 100)})"
    return " (e.g. 5%)"


def precision_option(ctx: click.Context, param: click.Parameter, value: str | None):
    """``--precision``, or ``CKPTBENCH_PRECISION`` when the option is not given: a bad value
    of the variable names the variable, not the option."""
    try:
        return precision_value(value)
    except click.BadParameter as err:
        if ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.ENVIRONMENT:
            raise InputError(
                f"CKPTBENCH_PRECISION={value!r} in the environment (--precision was not given): "
                f"{err.message}; set it to a fraction such as 5%, or to off"
            ) from None
        raise


def precision_target(
    ctx: click.Context,
    precision: float | None,
    max_rounds: int,
    max_time: float,
    case: Case,
    modes: str,
) -> tuple[Any, tuple[str, ...]]:
    """The runner's ``Precision`` target (None: add no rounds) and notes to print. An
    explicit ``--rounds`` without ``--precision`` runs exactly those rounds; a
    ``--max-rounds`` below ``--rounds`` (or below 2), or above ``--rounds``' own bound
    (``schema.MAX_ROUNDS``), is refused naming both; without the
    normal and checkpointed modes there is no slowdown to narrow, which is said."""
    from ckptbench.measure.runner import Precision
    from ckptbench.render.format import fmt_percent
    from ckptbench.results.resultsize import check_result_size
    from ckptbench.results.schema import check_count

    check_count("--max-rounds", max_rounds)  # --rounds' bound, used or not
    fixed_rounds = (
        ctx.get_parameter_source("rounds") is not DEFAULT
        and ctx.get_parameter_source("precision") is DEFAULT
    )
    if precision is None or fixed_rounds:
        caps = [f"--{n.replace('_', '-')}" for n in ("max_time", "max_rounds")
                if ctx.get_parameter_source(n) not in (None, DEFAULT)]  # fmt: skip
        if not caps:
            return None, ()
        named = " and ".join(caps)
        why = "--precision is off" if precision is None else "--rounds is given alone"
        return None, (  # given, and unused: said, as an unused --costs is
            f"{named} not used: {why}, so exactly {case.rounds} round"
            f"{'s' * (case.rounds != 1)} run; {named} {'cap' if len(caps) > 1 else 'caps'} only "
            "the rounds --precision adds",
        )
    if ctx.get_parameter_source("max_rounds") is not DEFAULT and max_rounds < max(case.rounds, 2):
        default = " (its default)" if ctx.get_parameter_source("rounds") is DEFAULT else ""
        raise InputError(
            f"--max-rounds {max_rounds} is below --rounds {case.rounds}{default}: --max-rounds "
            f"counts every round, so give at least {max(case.rounds, 2)} (an interval needs "
            "two), fewer --rounds, or --precision off"
            if max_rounds < case.rounds
            else f"--max-rounds {max_rounds}: --precision needs at least 2 rounds (its interval "
            "comes from the spread between rounds); give 2 or more, or --precision off"
        )
    target = Precision(precision, max(max_rounds, case.rounds), max_time)
    check_result_size(case, target.max_rounds, "--max-rounds")  # the rounds it may add
    names = {m.strip() for m in modes.split(",")}
    if names >= {"normal", "checkpointed"}:
        return target, ()
    if ctx.get_parameter_source("precision") is DEFAULT:
        return None, ()
    return None, (  # nothing for added rounds to narrow: say so, add none
        f"--precision {fmt_percent(precision)} narrows the slowdown's interval, which needs "
        f"the normal and checkpointed modes; --modes {modes} runs "
        f"{count_text(case.rounds, 'round')} and adds none",
    )
