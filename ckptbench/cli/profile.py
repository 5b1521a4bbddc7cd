"""``ckptbench profile``: one gradient's memory line by line."""

from __future__ import annotations

import sys

import click

from ckptbench.cli.options import (
    EXIT_FAILED,
    POS,
    SNAPS_HELP,
    SNAPS_STREAMS,
    InputError,
    format_asked,
    relative_model,
    size_options,
    steps_option,
    timeout_option,
)
from ckptbench.cli.outputs import json_and_format_options
from ckptbench.cli.run_steps import snaps_notes
from ckptbench.cli.values import SuggestingChoice
from ckptbench.results.chains import chain_executor
from ckptbench.results.schema import Case


def _sections():
    from ckptbench.render.profile import PROFILE_SECTIONS

    return PROFILE_SECTIONS


@click.command(
    epilog="Example:\n\n  ckptbench profile --model lstm --steps 50 --snaps 5 --mode normal"
)
@click.option("--model", default="lstm", show_default=True, help="As for run.")
@steps_option(50)
@click.option("--snaps", type=POS, default=5, show_default=True, help=SNAPS_HELP)
@click.option(
    "--strategy",
    type=SuggestingChoice(SNAPS_STREAMS),
    default="revolve",
    show_default=True,
    help="The schedule the checkpointed mode runs.",
)
@click.option(
    "--mode",
    type=SuggestingChoice(["checkpointed", "normal", "baseline"]),
    default="checkpointed",
    show_default=True,
    help="Which gradient to profile: checkpointed, normal (plain) or baseline (forward only).",
)
@size_options
@click.option("--top", type=POS, default=25, show_default=True, help="Lines to show.")
@timeout_option(
    "For the worker that checks a plug-in and the one that profiles, each "
    "counted from its ready signal (start-up has a limit of the same length)."
)
@json_and_format_options(
    _sections,
    "the profile is",
    "Print the profile's document (every row) as JSON: the same as --format json.",
    formats="text: the top lines for a terminal; markdown, html, csv (every row, raw "
    "numbers), json (the profile's document), or any format registered in "
    "ckptbench.render.formats.",
)
def profile(model, steps, snaps, strategy, mode, hidden, batch, input_, output, seed, top,
            timeout, as_json, fmt):  # fmt: skip
    """Where one gradient's memory goes, line by line (memory_profiler's line profiler).

    Runs one gradient in a fresh process under memory_profiler's LineProfiler over the
    workload's step/post/loss and the executor's loops, and prints the lines whose traced
    memory (tracemalloc) changed the most, summed over their runs: what each line of a step
    keeps on autograd's tape (negative: a line that freed more than it allocated).
    """
    from ckptbench.measure.launch import Interrupted, stop_on_signals, stop_reason
    from ckptbench.measure.tasks import TaskError, check_plugin
    from ckptbench.measure.tasks import profile_lines as run_profile
    from ckptbench.render.console import stdout_console
    from ckptbench.render.formats import get_format
    from ckptbench.render.profile import profile_report

    fmt = format_asked(as_json, fmt)  # --json is --format json; a clash is one line
    try:
        case = Case(
            model=relative_model(model), steps=steps, snaps=snaps, strategy=strategy,
            hidden=hidden, batch=batch, input=input_, output=output, seed=seed,
            timeout_s=timeout,
        )  # fmt: skip
        case, notes = chain_executor(case).effective()  # a stack's fewest layers, as run's
        notes = snaps_notes(click.get_current_context(), notes)
        case.check_fits_memory()
    except ValueError as err:
        raise InputError(str(err)) from None
    job = {
        "model": case.model, "steps": case.steps, "snaps": case.snaps, "mode": mode,
        "strategy": strategy, "hidden": hidden, "batch": batch, "input": input_,
        "output": output, "seed": seed,
    }  # fmt: skip
    try:
        with stop_on_signals():  # the profiling worker goes through the launcher's guard
            check_plugin(case)  # bad input (a model that is none) refused first: one line
            for note in notes:  # as run says them: snaps clamped, or unused
                click.echo(f"note: {note}", err=True)
            doc = run_profile(case, job)
    except ValueError as err:
        text = str(err)
        if ": use --backend " in text:  # run's advice: profile has no --backend
            text = text.split(": use --backend ")[0] + (
                ": profile runs autograd plug-ins only (memory_profiler's line profiler); "
                "for another backend, `ckptbench run --backend ... --mprof DIR` records its "
                "memory over time"
            )
        raise InputError(text) from None
    except TaskError as err:
        click.echo(f"ckptbench: profiling failed: {err}", err=True)
        sys.exit(EXIT_FAILED)
    except (Interrupted, KeyboardInterrupt) as err:
        click.echo(f"ckptbench: interrupted by {stop_reason(err)}; the worker stopped", err=True)
        sys.exit(128 + getattr(err, "signum", 2))
    shown, report = get_format(fmt), profile_report(doc, top)
    if shown.show is not None:  # a terminal format: the console's width
        shown.show(report, stdout_console())
    else:
        click.echo(shown.render(report, stdout_console().width))
