"""``ckptbench compare``: tables, reports and plots of results."""

from __future__ import annotations

import click

from ckptbench.cli.options import (
    STDOUT,
    InputError,
    against_option,
    any_host_option,
    file_arg,
    folder_arg,
    format_asked,
    mprof_option,
    path_arg,
    quiet_option,
)
from ckptbench.cli.outputs import (
    check_mprof_files,
    check_side_output,
    expect_verdicts,
    json_and_format_options,
    make_folder,
    note_writers,
    probe_folder,
    probe_writable,
    refuse_duplicates,
    refuse_folder_clashes,
    say_made_folders,
    write_bytes,
    write_mprof,
)
from ckptbench.cli.values import FRACTION
from ckptbench.results.inputs import said_path
from ckptbench.results.kinds import PLOTS, REPORTS


def _sections():
    from ckptbench.render.compare import SECTIONS

    return SECTIONS


@click.command(
    epilog="Example:\n\n  ckptbench compare results/lstm --format html -o report.html\n\n"
    "  ckptbench compare results/after --against results/before --format markdown"
)
@click.argument("results", nargs=-1, required=True, type=path_arg())
@against_option("Results measured before (files or sweep folders); repeatable.")
@json_and_format_options(
    _sections,
    "the report is",
    "Print the report as JSON (on stdout, or in the -o file): the same as --format json.",
    formats="text (or its older name, table): aligned text for a terminal; markdown, html "
    "(one self-contained page with plots), csv (raw numbers in bytes and seconds), json, or "
    "any format registered in ckptbench.render.formats.",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=file_arg("report.html", dash=STDOUT),
    default=None,
    help="Write the report to this file instead of stdout (never replaces a file without "
    "--force); '-' is stdout, as without -o (./- names a file '-').",
)
@click.option(
    "--min-effect",
    type=FRACTION,
    default="10%",
    show_default=True,
    help="Time is slower/faster when the interval of new/old lies beyond 1 +/- this (95% over "
    "the worker processes, or with one a side from the iterations, as the legend says).",
)
@any_host_option
@click.option(
    "--plots",
    type=folder_arg(file_okay=False),
    default=None,
    help="Also write the plots as PNG files into this folder (e.g. for a README).",
)
@mprof_option
@click.option(
    "--force",
    is_flag=True,
    help="Allow -o, --plots and --mprof to replace the reports, plots and timelines ckptbench "
    "wrote there before (never another file).",
)
@quiet_option
def compare(results, against, as_json, fmt, output, min_effect, any_host, plots, mprof_dir, force,
            quiet):  # fmt: skip
    """Tabulate results; with --against, memory deltas and time ratios with intervals."""
    from ckptbench.analysis import compare as compare_results
    from ckptbench.render import render
    from ckptbench.render.compare import set_aside_counts
    from ckptbench.render.console import stdout_console
    from ckptbench.render.formats import get_format
    from ckptbench.results.schema import write_atomic
    from ckptbench.results.store import ManifestFiles, load_readable, load_results, missing_cells

    fmt = format_asked(as_json, fmt)  # --json is --format json; a clash is one line
    manifests = ManifestFiles()  # each sweep manifest read once by this command
    try:  # a broken, misfiled or copied cell of a folder is named, the others shown; a
        # file given by name stops
        after, set_aside = load_readable(results, manifests)
        if not after:
            for cell in set_aside:
                click.echo(f"compare: {cell.problem}", err=True)
            raise InputError(f"no results to compare: {set_aside_counts(set_aside)}")
        before = load_results(against, manifests) if against else None
        comparison = compare_results(after, before, min_effect=min_effect, match_host=not any_host)
        missing = missing_cells(results, manifests)
        page = get_format(fmt).page  # the full report: the [expect] verdicts too
        text = render(
            comparison,
            fmt,
            width=stdout_console().width,
            verdicts=expect_verdicts(after, results, manifests) if page else None,
            missing=missing,
            set_aside=set_aside,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    note_writers([*results, *(against or ())], "compare")
    _say_not_shown([*results, *(against or ())], missing, set_aside, manifests)
    figures = _check_outputs(after, before, output, plots, mprof_dir, [*results, *against], force)
    if figures:
        _make_folder(plots, "--plots")
    for path, fig in figures:
        write_bytes(path, fig, "--plots", force)
        if not quiet:
            click.echo(f"wrote {path}", err=True)
    if mprof_dir is not None:
        write_mprof(after, mprof_dir, quiet, replace=force)
    if output is not None:
        _make_folder(output.parent, "-o")
        try:
            write_atomic(output, text, replace=force)
        except OSError as err:
            raise InputError(f"-o {output}: cannot write ({err.strerror or err})") from None
        if not quiet:
            click.echo(f"wrote {output}")
    else:
        click.echo(text)


def _make_folder(folder, what: str) -> None:
    """``folder`` made for ``what`` and said (``outputs.make_folder``); exit 2 if it cannot."""
    try:
        make_folder(folder, what)
    except OSError as err:
        raise InputError(f"{what} {said_path(folder)}: {err.strerror or err}") from None
    say_made_folders()  # past its checks (``_check_outputs``): said before its files are


def _check_outputs(after, before, output, plots, mprof_dir, inputs, force) -> list:
    """Every file compare will write (-o, --plots, --mprof) checked before any is: none
    replaces what it must not (``store.check_output``), none is written twice, every
    timeline can be formatted, and each folder takes a new file (or, missing, could be made:
    each is made as it is written); one line
    and exit 2 otherwise, with nothing written. The plots to write, (path, PNG bytes)."""
    if output is not None:
        check_side_output(output, "-o", inputs, force, own=REPORTS)
    figures = []
    if plots is not None:
        from ckptbench.render.plots import plot_files

        figures = plot_files(after, before or (), plots)
    targets = [p for p, _ in figures] + ([output] if output is not None else [])
    refuse_folder_clashes({"--plots": plots, "--mprof": mprof_dir}, targets)
    if mprof_dir is not None:
        targets += check_mprof_files(after, mprof_dir, inputs, force)
    for path, _ in figures:  # a link is named as one, before two links to one file
        check_side_output(path, "--plots", inputs, force, own=PLOTS)
    refuse_duplicates(targets)
    if output is not None:  # folders made as each is written, once all are checked
        probe_writable(output, "-o", make=False)
    if figures:
        probe_folder(plots, "--plots")
    if mprof_dir is not None:
        probe_folder(mprof_dir, "--mprof")
    return figures


def _say_not_shown(paths: list, missing: list, set_aside: list, manifests) -> None:
    """On stderr, what the tables leave out of the folders among ``paths``: result files
    their manifest does not list, JSON files that are no result, cells the manifest lists
    but the folder lacks, and cells set aside (a file that cannot be read, a misfiled one, a
    measurement in several files); ``check`` fails the last two kinds. ``manifests``: the
    command's, each read once."""
    from ckptbench.render.compare import missing_lead, set_aside_groups
    from ckptbench.sweep.preflight import unlisted_other_json, unlisted_results

    for path in unlisted_results(paths, manifests):
        click.echo(
            f"compare: {path} is not a cell of its folder's sweep manifest (not in the tables; "
            "pass the file itself to compare it)",
            err=True,
        )
    for path in unlisted_other_json(paths, manifests):  # a costs file, a report
        click.echo(f"compare: {path} is not a ckptbench result (not read)", err=True)
    if missing:
        for line in (missing_lead(missing), *(f"{key}: {what}" for key, what in missing)):
            click.echo(f"compare: {line}", err=True)
    for _, lines in set_aside_groups(set_aside):
        for line in lines:
            click.echo(f"compare: {line}", err=True)
