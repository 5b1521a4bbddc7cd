"""``ckptbench schedule``: a schedule's cost from the closed forms or a replay."""

from __future__ import annotations

import time
from collections import deque

import click

from ckptbench.cli.options import (
    POS,
    SNAPS_HELP,
    SNAPS_STREAMS,
    InputError,
    stdout_console,
    strategy_help,
)
from ckptbench.cli.values import SuggestingChoice, WholeRange
from ckptbench.schedules import get_strategy


@click.command(
    epilog="Example:\n\n  ckptbench schedule --steps 100000 --snaps 50 --time\n\n"
    "  ckptbench schedule --steps 10 --snaps 3 --actions"
)
@click.option(
    "--steps",
    type=POS,
    required=True,
    help="Number of steps l, up to 10**1000: a schedule is only computed here, while run, plan "
    "and sweep take at most 2**31 (the counts of a longer chain exceed a 64-bit integer).",
)
@click.option(
    "--snaps",
    type=POS,
    default=None,
    help=SNAPS_HELP + " Required, except by store-all, which keeps every state.",
)
@click.option(
    "--strategy",
    type=SuggestingChoice(SNAPS_STREAMS),
    default="revolve",
    show_default=True,
    help=strategy_help(SNAPS_STREAMS),
)
@click.option("--actions", is_flag=True, help="Print every action of the schedule.")
@click.option("--time", "timed", is_flag=True, help="Time generating the full schedule.")
@click.option(
    "--repeat",
    type=WholeRange(1, 100),
    default=5,
    show_default=True,
    help="Timing repetitions (--time).",
)
def schedule(steps: int, snaps: int, strategy: str, actions: bool, timed: bool, repeat: int):
    """Show a checkpointing schedule's cost: r, t, evaluations, peak snapshots.

    The figures come from the closed-form Griewank-Walther formulas up to 10**1000 steps
    (beyond the 2**31 that run, plan and sweep take, and said so); the schedule is
    enumerated (and replayed to check it) only up to 5,000,000 step evaluations, or for
    --actions/--time, which refuse larger schedules.
    """
    from ckptbench.render import closed_form_table, schedule_table
    from ckptbench.results.schema import MAX_STEPS as MEASURED_STEPS
    from ckptbench.schedules import advances_within, make_schedule, replay

    if steps > MAX_STEPS:  # its counts (t grows as steps**2 at one slot) would not print
        raise InputError(
            "--steps is over 10**1000: the counts of a longer schedule have more digits than "
            "ckptbench prints"
        )
    if steps > MEASURED_STEPS:  # deliberate: the formulas hold, no result is written
        click.echo(
            f"note: --steps {steps} is over 2**31 ({MEASURED_STEPS:,}), the most run, plan and "
            "sweep take (the evaluation counts of a longer chain exceed a 64-bit integer): "
            "these figures are the formulas' alone",
            err=True,
        )
    spec = get_strategy(strategy)
    typed = snaps is not None
    if not typed and spec.uses_snaps:
        raise InputError(f"Missing option '--snaps': the {strategy} schedule is set by it")
    if not typed:  # not given and not used (store-all): recorded as the steps, as run does
        snaps = steps
    if spec.uses_snaps and snaps > steps:  # as run says: the table shows the clamped figure
        click.echo(f"note: --snaps {snaps} clamped to {steps}: {spec.setting.clamp}", err=True)
    elif not spec.uses_snaps and snaps != steps:
        click.echo(f"note: {spec.name} keeps every state: --snaps {snaps} is not used", err=True)
    closed = spec.advances is not None
    if closed:
        small = spec.advances(steps, spec.effective_snaps(steps, snaps)) + steps <= ENUMERATE_LIMIT
    else:  # no closed form: count its advances from the stream, up to the limit
        small = (
            steps <= ENUMERATE_LIMIT // 2
            and min(steps, snaps) <= 20_000
            and advances_within(make_schedule(strategy, steps, snaps), ENUMERATE_LIMIT - steps)
            is not None
        )
    over = (
        f"{steps} steps with {snaps} snaps is over the limit of {ENUMERATE_LIMIT:,} step "
        "evaluations"
    )
    if (actions or timed) and not small:
        raise InputError(
            f"--actions/--time enumerate the schedule; {over}"
            + (" (the figures without these options come from the formulas)" if closed else "")
        )
    if not small:
        if not closed:
            formulas = " or ".join(n for n in SNAPS_STREAMS if get_strategy(n).closed_form)
            raise InputError(
                f"the {strategy} schedule has no closed form and is enumerated here; {over} "
                f"(use --strategy {formulas} for the formulas)"
            )
        stdout_console().print(closed_form_table(steps, snaps, strategy))
        return
    console = stdout_console()
    if actions:
        for act in make_schedule(strategy, steps, snaps):
            click.echo(repr(act))
    runs = []
    for _ in range(repeat if timed else 0):
        t0 = time.perf_counter()
        deque(make_schedule(strategy, steps, snaps), maxlen=0)
        runs.append(time.perf_counter() - t0)
    # a strategy that does not use snaps (store-all) is not held to them
    stats = replay(make_schedule(strategy, steps, snaps), steps, snaps if spec.uses_snaps else None)
    console.print(schedule_table(stats, snaps, strategy, runs))


#: Schedules up to this many step evaluations are enumerated (about 2 s here).
ENUMERATE_LIMIT = 5_000_000
#: The longest schedule whose closed forms are shown: Python prints integers of up to 4300
#: digits, and t(l, 1) = l(l-1)/2 has twice the digits of l.
MAX_STEPS = 10**1000
