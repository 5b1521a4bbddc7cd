"""The steps of ``ckptbench run`` around its measurement: the case checked (here, then in
a disposable worker), the measurement under signal handling, the report printed and the
exit status of the outcome. Each turns a problem into the command line's one-line error or
exit status; the measuring itself is :func:`ckptbench.measure.runner.run_case`'s."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ckptbench.backends import registry
from ckptbench.cli.costs_file import costs_note, read_costs
from ckptbench.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    InputError,
    check_backend,
    device_words,
    given_sizes,
    stdout_console,
)
from ckptbench.cli.precision import precision_target
from ckptbench.cli.values import size_notes
from ckptbench.results.chains import chain_executor
from ckptbench.results.resultsize import check_result_size
from ckptbench.results.schema import Case, RunResult
from ckptbench.schedules import STRATEGIES, get_strategy

if TYPE_CHECKING:
    from ckptbench.measure.tasks import PluginChecked

__all__ = [
    "Measured",
    "checked_case",
    "checked_in_worker",
    "executor_notes",
    "measure",
    "report_outcome",
    "show_result",
]


def executor_notes(case: Case) -> tuple[str, ...]:
    """What the backend tells a user of the case's executor on its device (one-call on the
    CPU); nothing for a peer, which runs no executor of ours."""
    if case.executor_ran is None:
        return ()
    said = registry.spec(case.backend).executor_note(case.executor_ran, case.device)
    return (said,) if said else ()


def snaps_notes(ctx: click.Context, notes: tuple[str, ...]) -> tuple[str, ...]:
    """``Case.effective``'s notes as the user typed the command: where ``--snaps`` was not
    given, its default is called the default when clamped ('the default --snaps 31 clamped
    to 20'), and not said at all where the strategy does not use it."""
    if ctx.get_parameter_source("snaps") not in (None, click.core.ParameterSource.DEFAULT):
        return notes
    said = []
    for note in notes:
        if note.startswith("--snaps ") and " is not used by strategy " in note:
            continue
        said.append(f"the default {note}" if note.startswith("--snaps ") else note)
    return tuple(said)


def checked_case(ctx, fields: dict, costs_file, precision, *, max_rounds, max_time, modes):
    """The case of the options, checked here (its effective values, memory, backend), with
    the notes to print, the step costs read from ``costs_file`` (None: measured; refused for
    a strategy that plans nothing, as ``--budget`` is) and the precision target. InputError
    with one line otherwise."""
    from ckptbench.measure.sampling import sample_interval_problem

    strategy, device = fields["strategy"], fields["device"]
    try:
        case, notes = chain_executor(Case(**fields)).effective()
        check_result_size(case)
        if (why := sample_interval_problem(case.sample_interval_s, case.timeout_s)) is not None:
            raise InputError(why)
        notes = snaps_notes(ctx, notes) + size_notes(ctx)
        case.check_fits_memory()
        check_backend(case)
        notes += executor_notes(case)
        if costs_file and not get_strategy(strategy).planned:  # refused as --budget is
            planned = " or ".join(repr(s.name) for s in STRATEGIES.values() if s.planned)
            raise InputError(f"a costs file (--costs) is only used by strategy {planned}, "
                             f"not {strategy!r}")  # fmt: skip
        costs = read_costs(costs_file, case.steps) if costs_file else None
        if costs is not None and (note := costs_note(costs_file, costs, case)):
            notes += (note,)
        target, more = precision_target(ctx, precision, max_rounds, max_time, case, modes)
        notes += more
    except ValueError as err:
        raise InputError(device_words(ctx, device, str(err))) from None
    return case, notes, costs, target


def checked_in_worker(
    ctx, case: Case, device: str, costs: dict | None = None, costs_file=None, *,
    stopped: str = "nothing measured",
) -> tuple[Case, tuple[str, ...], PluginChecked]:  # fmt: skip
    """The device probe (:func:`imports_framework`) and the plug-in check, in a disposable
    worker, never in this process, on every backend: the plug-in's protocol once (and its
    factory's own sizes where no size option was given; a chain too long to plan from
    per-layer costs refused, unless ``costs`` were given). Returns the case with those
    sizes, the notes (with ``costs`` read from ``costs_file``: whether its states are the
    plug-in's, by the bytes the check measured) and what the check found
    (``tasks.PluginChecked``: the user's files it loaded, with their digests, where the
    run's watch of them starts, ``run_case(checked_sources=...)``, and the dtypes of the
    loss and what it gets, ``run_case(plugin_dtypes=...)``); InputError on a problem
    (naming ``device`` as typed), exit 128 + N when stopped by signal N, saying ``stopped``
    (what the command then did not do). ``run`` and ``plan`` both check here."""
    from ckptbench.measure.launch import Interrupted, stop_on_signals, stop_reason
    from ckptbench.measure.tasks import checked_plugin, probe_device

    try:
        with stop_on_signals():
            if imports_framework(case) and (why := probe_device(case)) is not None:
                raise InputError(device_words(ctx, device, f"--device {device}: {why}"))
            checked = checked_plugin(case, given_sizes=given_sizes(ctx), costs=costs)
            case, notes = checked.case, checked.notes
            case.check_fits_memory()
            if costs is not None and checked.state_bytes is not None:
                note = costs_note(costs_file, costs, case, checked.state_bytes)
                notes += (note,) if note else ()
    except ValueError as err:
        raise InputError(str(err)) from None
    except (Interrupted, KeyboardInterrupt) as err:
        click.echo(f"ckptbench: interrupted by {stop_reason(err)}; {stopped}", err=True)
        sys.exit(128 + getattr(err, "signum", 2))
    return case, notes, checked


def imports_framework(case: Case) -> bool:
    """Whether ``run`` and ``plan`` ask a disposable worker before measuring: on an
    accelerator (can the framework compute there?) and on a backend installed as an extra
    (one with an install hint: torch, JAX), whose package may be found yet raise on import
    (a CUDA library missing), on the CPU too. One import in a worker, about as long as a
    worker's start-up (``BackendSpec.worker_start_s``); a broken install is then one line
    and exit 2 instead of every worker failing (``measure.tasks.probe_device``)."""
    return case.device != "cpu" or bool(registry.spec(case.backend).install_hint)


@dataclass(frozen=True)
class Measured:
    """What :func:`measure` ends with: the result (partial when stopped), the file it was
    saved in, and the exit status a stop by signal dictates (None: the result's own)."""

    result: RunResult
    out: Path
    code: int | None


def measure(case, err_console, progress, stop, *, out, force, **run_options) -> Measured:
    """Run the case's modes under signal handling, with the live display ``progress``
    (closed by ``stop`` before any message). A plan that cannot be made is an InputError,
    step costs that cannot be measured exit 1, a stop by signal is said and, where nothing
    was measured, exits 128 + N."""
    from ckptbench.measure.follow import LimitBelowStart
    from ckptbench.measure.launch import Interrupted, stop_on_signals
    from ckptbench.measure.runner import run_case
    from ckptbench.measure.tasks import CostsError
    from ckptbench.render.console import escaped
    from ckptbench.schedules.optimal import PlanError

    code = None

    def saved_elsewhere(path: str, why: str) -> None:  # said at once; the result says where
        err_console.print(
            f"[yellow]warning[/yellow] {escaped(f'cannot save the result as asked ({why}); ')}"
            f"{escaped(f'saved it as {path} instead')}",
            highlight=False,
        )

    try:
        with stop_on_signals():
            result = run_case(
                case,
                saved_elsewhere=saved_elsewhere,
                out_path=out,
                replace_out=force,
                progress=progress,
                **run_options,
            )
    except (PlanError, LimitBelowStart) as err:  # nothing measured, no file written
        stop()
        raise InputError(str(err)) from None
    except CostsError as err:
        stop()
        click.echo(f"ckptbench: {err}", err=True)
        sys.exit(EXIT_FAILED)
    except (Interrupted, KeyboardInterrupt) as err:
        stop()  # the live display goes before the message
        result = getattr(err, "result", None)  # None: stopped while measuring step costs
        code = 128 + getattr(err, "signum", 2)
        _say_interrupted(err_console, err, result, _saved_in(result, out))
        if result is None:
            stop()
            sys.exit(code)
    finally:
        stop()
    return Measured(result, _saved_in(result, out), code)


def _saved_in(result, out: Path) -> Path:
    """The file ``result`` is saved in: ``out``, or where the runner saved it instead."""
    saved_as = getattr(result, "saved_as", None)
    return out if saved_as is None else Path(saved_as.path)


def _say_interrupted(err_console, err: BaseException, result, out: Path) -> None:
    """One line on a run stopped by a signal: what was measured and where it is saved."""
    from ckptbench.measure.launch import stop_reason
    from ckptbench.render.console import escaped
    from ckptbench.render.run import interruption_line

    saved = result is not None and result.modes
    measured = saved and any(m.iterations for m in result.modes)
    where = f"what was measured is saved in {out}" if measured else "nothing measured"
    cut = interruption_line(result) if measured else None
    if saved and not measured:
        where += f" (no iteration completed; {out} records the stop)"
    if (aside := getattr(err, "kept_aside", None)) is not None:  # run --force, interrupted
        where += f"; the result it was replacing is kept as {aside}"
    err_console.print(
        "[yellow]interrupted[/yellow] "
        + escaped(
            f"by {stop_reason(err)}: workers stopped; {where}" + (f" ({cut})" if cut else "")
        ),
        highlight=False,
    )


def show_result(result, fmt: str, *, quiet: bool, out: Path) -> None:
    """Print the run's report in format ``fmt`` on stdout (a terminal format at the
    console's width and colours, with where the result was saved)."""
    from ckptbench.render.console import escaped
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import run_report

    shown = get_format(fmt)
    report = run_report(result, quiet=quiet)
    if shown.show is not None:  # a terminal format: the console's width and colours
        console = stdout_console()
        shown.show(report, console)
        if not quiet and result.modes:  # and where the file goes next: a page to share
            page = f"ckptbench compare {shlex.quote(str(out))} --format html -o report.html"
            console.print(f"[dim]{escaped(f'saved {out}; a page with plots: {page}')}[/dim]")
    else:
        click.echo(shown.render(report, stdout_console().width))


def report_outcome(result, expect_oom, err_console) -> int:
    """Print the result's warnings and failures (an out-of-memory that ``--expect-oom``
    expected is said as expected, one that did not happen is a failure) and return the
    exit status: 0 when every other mode is ok and every expected one ran out."""
    from ckptbench.measure.runner import expected_oom
    from ckptbench.render import failure_lines, warning_lines
    from ckptbench.render.console import escaped

    for line in warning_lines(result):
        err_console.print(f"[yellow]warning[/yellow] {escaped(line)}", highlight=False)
    expected, unmet = expected_oom(result, expect_oom)
    for line in failure_lines(result):
        if not any(line.startswith(f"{m}:") for m in expected):
            err_console.print(f"[red]failed[/red] {escaped(line)}", highlight=False)
    for m in expected:
        err_console.print(f"expected: {m} exceeded the memory limit, as --expect-oom said")
    for m in unmet:
        err_console.print(
            f"[red]failed[/red] {m} was expected to exceed --memory-limit but did not",
            highlight=False,
        )
    others_ok = all(m.ok for m in result.modes if m.mode.value not in expected)
    return EXIT_OK if others_ok and not unmet else EXIT_FAILED
