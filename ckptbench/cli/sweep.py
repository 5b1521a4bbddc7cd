"""``ckptbench sweep``: every cell of a TOML config, saved as it is measured."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import shlex
import sys
from pathlib import Path

import click

from ckptbench.cli.costs_file import shown_notes
from ckptbench.cli.options import InputError, folder_arg, output_options, path_arg
from ckptbench.results.inputs import leads_nowhere, said_path
from ckptbench.results.units import count_text

#: Sweeps over this many cells, or about this many hours, ask before they start.
CONFIRM_CELLS, CONFIRM_HOURS = 200, 2.0


@click.command(
    epilog="Example:\n\n  ckptbench sweep configs/lstm.toml --out results/lstm\n\n"
    "  ckptbench sweep configs/lstm.toml --out results/lstm --resume   # after a crash\n\n"
    "Exit status: 0 every cell measured OK; 1 a failed measurement, a cell lost or not "
    "measured (a Dask scheduler or every worker went away: `--resume` continues); 2 bad "
    "input (config, --out, a --dask address or cluster that cannot run the sweep, files "
    "measured with other settings, or only cells no plan exists for as configured: an "
    "optimal budget below the least); 128+N stopped by signal N. On a cluster: docs/cluster.md."
)
@click.argument("config", type=path_arg())
@click.option(
    "--out",
    type=folder_arg(),
    default=None,
    help="Folder for the cells' result files (default: results/NAME, NAME the config's name).",
)
@click.option("--resume", is_flag=True, help="Measure only the cells missing from --out.")
@click.option("--retry-failed", is_flag=True, help="With --resume, re-measure failed cells.")
@click.option(
    "--dask", "dask_address", default=None, help="Send cells to this Dask scheduler address."
)
@click.option(
    "--yes",
    is_flag=True,
    help=f"Run a sweep over {CONFIRM_CELLS} cells or about {CONFIRM_HOURS} h without asking.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List every cell, its rough time and what the sweep would do with it (measure, "
    "keep, conflict) in --out; measure nothing, create nothing.",
)
@output_options
def sweep(
    config: Path, out: Path | None, resume: bool, retry_failed: bool, dask_address, yes: bool,
    dry_run: bool, quiet: bool, verbose: bool, progress_lines: bool,
):  # fmt: skip
    """Run every cell of a TOML config, saving each result the moment it is measured."""
    from ckptbench.render.console import stderr_console
    from ckptbench.render.sweepplan import total_estimate
    from ckptbench.sweep.config import load_config
    from ckptbench.sweep.progress import estimated_seconds, left_out
    from ckptbench.sweep.run import run_sweep

    if retry_failed and not resume:  # alone it would be ignored: a fresh sweep measures all
        raise InputError("--retry-failed re-measures the failed cells of --resume: give both")
    try:
        cfg = load_config(config)
    except ValueError as err:
        raise InputError(str(err)) from None
    _check_cells(config, cfg.cases)
    cfg, checked = _checked_plugins(cfg, config)
    if dry_run:
        _address_syntax(dask_address)  # the sweep's first refusal of it; nothing is reached
        _dry_run(cfg, out or Path("results") / cfg.name, resume, retry_failed,
                 _check_notes(checked))  # fmt: skip
        return
    if dask_address is None:  # on a cluster the devices are the workers'
        _check_devices(config, cfg.cases)
    out = out or Path("results") / cfg.name
    made = [p for p in (out, *out.parents) if not os.path.exists(p)]  # what opening it creates
    dask_address = _check_destination(out, dask_address)
    console = stderr_console()
    todo = _cells_to_measure(cfg, out, resume, retry_failed)
    estimates = [estimated_seconds(c) for c in todo]
    roughly = total_estimate(estimates) + left_out(todo)  # said as --dry-run says it
    if (len(todo) > CONFIRM_CELLS or sum(estimates) / 3600 > CONFIRM_HOURS) and not yes:
        try:  # before anything is said: a refusal is its one line
            _confirm(config, len(todo), roughly)
        except BaseException:  # not confirmed: leave no folder it made behind (if still empty)
            with contextlib.suppress(OSError):
                for folder in made:
                    folder.rmdir()
            raise
    if made and out.is_dir():  # kept: said as every output's folder is, so a typo is seen
        click.echo(f"note: created folder {out} for --out", err=True)
    _say_start(console, cfg, checked, todo, roughly, out, quiet)
    show_iterations = not quiet and (verbose or progress_lines or console.is_terminal)
    progress = _progress_printer(console, quiet=quiet, show_iterations=show_iterations)

    from ckptbench.measure.launch import Interrupted, stop_on_signals

    try:
        with stop_on_signals():
            outcome = run_sweep(
                cfg,
                out,
                resume=resume,
                retry_failed=retry_failed,
                progress=progress,
                dask_address=dask_address,
                plugin_checks=checked,  # each cell gets its plug-in's check, as run's case
            )
    except ValueError as err:
        raise InputError(str(err)) from None
    except (Interrupted, KeyboardInterrupt) as err:
        click.echo(_stopped_message(err, out, dask_address), err=True)
        sys.exit(128 + getattr(err, "signum", 2))
    for line in outcome.summary_lines():
        click.echo(line)
    if outcome.result_paths and not quiet:  # where the folder goes next
        where = shlex.quote(str(out))
        click.echo(
            f"next: ckptbench compare {where} (a table; --format html -o report.html: a page "
            f"with plots), ckptbench check {where} (the CI gate: every mode ok, the "
            "config's [expect])"
        )
    if outcome.resumable or outcome.ended_early:
        dask = f" --dask {dask_address}" if dask_address else ""
        click.echo(f"continue with: ckptbench sweep {config} --out {out}{dask} --resume")
    if outcome.invalid:
        click.echo(
            f"change the config: {len(outcome.invalid)} cell(s) cannot be measured as configured "
            f"(above); `--resume` does not retry them ({config})"
        )
    sys.exit(outcome.exit_code)


def _say_start(console, cfg, checked, todo: list, roughly: str, out: Path, quiet: bool) -> None:
    """The config's notes, each cell's to measure (``todo``; :func:`_cell_notes`), the
    plug-in checks' (their warnings under ``-q`` too) and the start line: the cells, how
    many to measure, ``roughly`` how long (``sweepplan.total_estimate``), where."""
    from ckptbench.render.console import escaped

    for note in (*cfg.notes, *_cell_notes(cfg.cases, todo)) if not quiet else ():
        console.print(f"[dim]{escaped(note)}[/dim]", highlight=False)
    for kind, note in shown_notes(_check_notes(checked), quiet):  # -q: the dtype warnings
        console.print(f"[yellow]{kind}[/yellow] {escaped(note)}", highlight=False)
    if not quiet:
        some = f" ({len(todo)} to measure)" if len(todo) < len(cfg.cases) else ""
        console.print(
            f"sweep {cfg.name}: {_cells_text(cfg)}{some}, {roughly} -> {out}",
            highlight=False,
            markup=False,  # '[grid]' and '[case]' are words, not rich's markup
        )


def _cell_notes(cases, measured) -> list[str]:
    """What ``Case.effective`` says of each cell in ``measured``, as ``run`` says it of its
    case (a strategy's word on its setting: checkpoint-sequential with one segment
    checkpoints nothing), once per cell, before anything is measured: named by its label
    among ``cases`` (the dry run's) and worded with the config's keys. The grid's clamps
    are said by its own notes (``cfg.notes``): a cell is canonical by now. A cell of
    ``measured`` is one of ``cases`` by its key (what the sweep saves and skips it by), so
    a copy of it (re-created, or pickled to a Dask worker and back) is still that cell."""
    from ckptbench.render.format import cell_labels
    from ckptbench.sweep.keylines import config_words

    chosen = {c.key for c in measured}
    return [
        f"{label}: {config_words(note)}"
        for case, label in zip(cases, cell_labels(cases), strict=True)
        if case.key in chosen
        for note in case.effective()[1]
    ]


def _cells_text(cfg) -> str:
    """'12 cells', or '1 cell (no [grid] axes: the [case] alone)' for a config without axes."""
    alone = "" if cfg.axes else " (no [grid] axes: the [case] alone)"
    return f"{count_text(len(cfg.cases), 'cell')}{alone}"


def _check_destination(out: Path, dask_address: str | None) -> str | None:
    """The checked ``--dask`` address (None: local), with ``--out`` checked for it: on a
    cluster only that it can be a folder (the cluster is checked before the folder is
    created), locally opened as a results folder. InputError with one line otherwise."""
    from ckptbench.results.store import open_folder

    if dask_address is None:
        try:
            open_folder(out)
        except ValueError as err:
            raise InputError(f"--out {err}") from None
        return None
    from ckptbench.sweep.cluster import usable_address

    try:
        address = usable_address(dask_address)
    except ValueError as err:
        raise InputError(str(err)) from None
    _out_is_a_folder(out)
    return address


def _address_syntax(dask_address: str | None) -> None:
    """InputError (one line) where ``--dask`` is no scheduler address by its syntax alone,
    or names a scheme that cannot be used from here (``sweep.cluster.usable_address``): a
    dry run said nothing of ``--dask nonsense`` and exited 0, where the sweep refuses it."""
    from ckptbench.sweep.cluster import usable_address

    if dask_address is not None:
        try:
            usable_address(dask_address)
        except ValueError as err:
            raise InputError(str(err)) from None


def _cells_to_measure(cfg, out: Path, resume: bool, retry_failed: bool) -> list:
    """The cells a resumed sweep will measure (all of a fresh one), for its estimate: the
    same plan the sweep makes (``sweep.preflight.plan_cells``); all where it cannot be made
    here (the sweep then says why)."""
    from ckptbench.sweep.preflight import SweepError, plan_cells

    if not resume:
        return list(cfg.cases)
    try:
        _, to_run = plan_cells(cfg, out, resume, retry_failed)
    except (SweepError, OSError):
        return list(cfg.cases)
    return [cfg.cases[i] for i in to_run]


def _out_is_a_folder(out: Path) -> None:
    """``--out`` names a folder, or nothing yet: a file there, or a symbolic link that leads
    nowhere on its way (the sweep's refusal; the dry run planned into it), is one line."""
    if (nowhere := leads_nowhere(out)) is not None:
        raise InputError(f"--out {said_path(out)}: {nowhere}")
    if os.path.exists(out) and not os.path.isdir(out):  # pathlib's raised on a long name
        raise InputError(
            f"--out {said_path(out)}: exists and is not a folder (results go into a folder)"
        )


def _dry_run(cfg, out: Path, resume: bool, retry_failed: bool, check_notes=()) -> None:
    """``--dry-run``: the plan a sweep into ``out`` would make (``sweep.preflight.plan_cells``:
    refused where the sweep would be), printed as a table; the folder is read, never created."""
    from ckptbench.render.console import stdout_console
    from ckptbench.render.sweepplan import (
        conflict_lines,
        dry_run_table,
        remeasure_lines,
        total_estimate,
    )
    from ckptbench.sweep.preflight import SweepError, check_manifest, plan_cells
    from ckptbench.sweep.progress import estimated_seconds, left_out

    _out_is_a_folder(out)
    try:
        check_manifest(out, cfg.name)
        cells, to_run = plan_cells(cfg, out, resume, retry_failed)
    except (SweepError, OSError) as err:
        if getattr(err, "errno", None) == errno.ENAMETOOLONG:  # said as everywhere else
            raise  # (the command line's one line: "'xxx…'... (N characters): name too long")
        raise InputError(str(err)) from None
    estimates = [estimated_seconds(c) for c in cfg.cases]
    console = stdout_console()
    console.print(dry_run_table(cells, to_run, estimates))
    for line in (*remeasure_lines(cells, to_run), *conflict_lines(cells)):
        click.echo(line)
    # as the sweep says them: cells the grid clamped or merged, each cell's own
    for note in (*cfg.notes, *_cell_notes(cfg.cases, [cfg.cases[i] for i in to_run])):
        click.echo(note)
    for kind, note in shown_notes(check_notes, quiet=False):  # the plug-in checks'
        click.echo(f"{kind} {note}")
    total = total_estimate([estimates[i] for i in to_run])  # the shown figures' sum
    total += left_out([cfg.cases[i] for i in to_run])  # what no estimate knows ahead
    click.echo(
        f"sweep {cfg.name}: {_cells_text(cfg)}, {len(to_run)} to measure, "
        f"{total} -> {out}; dry run: nothing measured, nothing written"
    )


def _confirm(config: Path, cells: int, roughly: str) -> None:
    """Ask before a large sweep starts (``roughly``: how long, ``sweepplan.total_estimate``):
    InputError when not on a terminal (pass --yes) or when the answer is no."""
    size = f"{count_text(cells, 'cell')}, {roughly}"
    if not sys.stdin.isatty():
        raise InputError(f"{config}: {size}; pass --yes to run them")
    if not click.confirm(f"{size}: run them?", err=True):
        raise InputError("sweep not started")


def _progress_printer(console, *, quiet: bool, show_iterations: bool):
    """The sweep's progress callback: a line per cell started, retried or done, and per
    iteration where ``show_iterations``; nothing when ``quiet``."""

    def progress(event):
        if quiet:
            return
        if event.event in ("cell-start", "cell-retry", "cell-done") or (
            event.event == "mode-iteration" and show_iterations
        ):
            console.print(event.line(), highlight=False, markup=False)

    return progress


def _check_devices(config: Path, cases) -> None:
    """Each accelerator the cells name, and each backend installed as an extra, asked once
    per backend of a disposable worker (``measure.tasks.probe_device``), as ``run`` asks
    (``run_steps.imports_framework``): InputError with one line where one cannot compute
    here or its framework cannot be imported, before anything is printed or measured."""
    from ckptbench.cli.run_steps import imports_framework
    from ckptbench.measure.tasks import probe_device

    first = {}
    for case in cases:
        if imports_framework(case):
            first.setdefault((case.backend, case.device), case)
    with _checking("devices"):
        for (backend, device), case in first.items():
            if (why := probe_device(case)) is not None:
                raise InputError(f"{config}: cells on {backend}/{device}: {why}")


def _checked_plugins(cfg, config: Path):
    """``cfg`` with each plug-in checked in a disposable worker and every cell of it under the
    rules of the kind of model found (:func:`ckptbench.measure.tasks.check_plugins`), before
    anything is printed or measured: InputError with one line (where in ``config``) if one
    cannot be measured. Cells the check made one (an autograd plug-in's own dtype recorded
    over a ``dtype`` axis) are measured once, with a note. Beside it, each check's outcome
    by ``sources.plugin_key`` (``tasks.checked_plugins``): its notes, said once before the
    sweep measures, and what every cell of that plug-in gives ``run_case``."""
    from ckptbench.measure.tasks import checked_plugins
    from ckptbench.schedules.optimal import PlanError
    from ckptbench.sweep.grid import unique_cells

    with _checking("plug-ins"):
        try:
            checked, checks = checked_plugins(cfg.cases)
            cases, merged = unique_cells(checked)
        except PlanError as err:  # a plug-in's chain too long to plan: as a built-in's
            raise _in_config(config, err, "steps") from None
        except ValueError as err:
            raise _in_config(config, err, "model") from None
    said = (f"{merged} grid cell(s) the same as another once their plug-in was checked (an "
            "autograd plug-in computes in its own dtype) measured once",)  # fmt: skip
    notes = cfg.notes + (said if merged else ())
    return dataclasses.replace(cfg, cases=cases, notes=notes), checks


def _check_notes(checks) -> list[str]:
    """The notes of a sweep's plug-in checks, each once (a plug-in checked on two backends
    says a note of its own file once): said before it measures, as ``run`` says its own,
    a ``tasks.PluginWarning`` (recorded in another dtype than asked) under ``-q`` too."""
    return list(dict.fromkeys(n for check in checks.values() for n in check.notes))


def _check_cells(config: Path, cases) -> None:
    """Each cell within its memory limit (``Case.check_fits_memory``) and sampled usefully
    (``sampling.sample_interval_problem``), and no planned cell
    (``optimal``) whose plan would be too large to compute: refused as ``run`` refuses it,
    before anything is measured (``planner.check_plannable``: from the steps alone). A
    budget below the least is known only once step costs are measured: that cell is the
    sweep's config error then (state ``invalid``)."""
    from ckptbench.measure.sampling import sample_interval_problem
    from ckptbench.schedules import get_strategy
    from ckptbench.schedules.optimal import PlanError, check_plannable
    from ckptbench.workloads import BUILTIN_CHAINS

    try:
        for case in cases:
            case.check_fits_memory()
    except ValueError as err:
        raise _in_config(config, err) from None
    for case in cases:
        if (why := sample_interval_problem(case.sample_interval_s, case.timeout_s)) is not None:
            raise _in_config(config, ValueError(why), "sample_interval_s")
    for case in cases:
        if get_strategy(case.strategy).planned:
            try:
                check_plannable(case.steps, per_step=case.model in BUILTIN_CHAINS)
            except PlanError as err:
                raise _in_config(config, err, "steps") from None


def _in_config(config: Path, err: Exception, key: str | None = None) -> InputError:
    """A cell's problem found after its config was read, as the config's errors read:
    'FILE:LINE: ...', in the config's keys (``sweep.keylines.where_in_config``)."""
    from ckptbench.sweep.keylines import where_in_config

    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    return InputError(where_in_config(str(config), text, str(err), key))


@contextlib.contextmanager
def _checking(what: str):
    """A check in disposable workers before a sweep measures: its problem one line (exit 2),
    a stop signal one true line (nothing was measured) and exit 128 + N."""
    from ckptbench.measure.launch import Interrupted, stop_on_signals, stop_reason

    try:
        with stop_on_signals():
            yield
    except ValueError as err:
        raise InputError(str(err)) from None
    except (Interrupted, KeyboardInterrupt) as err:
        click.echo(
            f"ckptbench: sweep interrupted by {stop_reason(err)} while its {what} were "
            "checked; nothing was measured",
            err=True,
        )
        sys.exit(128 + getattr(err, "signum", 2))


def _stopped_message(err: BaseException, out: Path, dask_address: str | None) -> str:
    """What a stopped sweep did, truthfully: the local worker, or the cells on Dask."""
    from ckptbench.measure.launch import stop_reason
    from ckptbench.results.store import MANIFEST_NAME

    head = f"ckptbench: sweep interrupted by {stop_reason(err)}"
    tail = f"`--resume` measures the rest ({out})"
    if dask_address is None:
        return f"{head}: workers stopped; the mode in flight is saved as interrupted; {tail}"
    report = getattr(err, "dask_stop", None)
    if report is None:
        if not (out / MANIFEST_NAME).exists():  # the folder was never made: nothing to resume
            return f"{head} before any cell was sent to {dask_address}; nothing was measured"
        return f"{head} before any cell was sent to {dask_address}; {tail}"
    parts = []
    if report.saved:
        parts.append(
            f"{len(report.saved)} cell(s) in flight stopped on their Dask workers, the mode "
            "in flight saved as interrupted"
        )
    if report.empty:
        parts.append(f"{len(report.empty)} stopped before their first mode (nothing to save)")
    if report.unconfirmed:
        where = ", ".join(f"{k} on {w}" for k, w in report.unconfirmed)
        parts.append(
            f"{len(report.unconfirmed)} did not confirm the stop and may still run ({where})"
        )
    if not parts:
        parts.append("no cell was in flight")
    return f"{head}: {'; '.join(parts)}; {tail}"
