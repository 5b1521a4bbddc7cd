"""``ckptbench check``: the CI gate."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ckptbench.cli.appending import append_text, tear_text
from ckptbench.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    InputError,
    against_option,
    any_host_option,
    file_arg,
    format_asked,
    path_arg,
    quiet_option,
)
from ckptbench.cli.outputs import (
    json_and_format_options,
    make_folder,
    note_writers,
    probe_writable,
    refuse_duplicates,
    say_made_folders,
)
from ckptbench.cli.values import FLOOR_BYTES, FRACTION, POSITIVE_FRACTION
from ckptbench.results.inputs import real_path

#: The start of a summary record's first line (``render.verdicts.check_markdown``'s
#: heading): the file's last record, from its last line starting so, has the blocks a cut
#: left open closed before the next one (``appending.append_text``).
_RECORD_HEADING = "### ckptbench check"
#: What prints on stdout what ``--summary -`` and ``--junit -`` would have (both refused).
_MARKDOWN_THERE = "--format markdown prints the summary there"
_JUNIT_THERE = "--format junit prints the JUnit XML there"


def _sections():
    from ckptbench.render.formats import Verdicts

    return (Verdicts,)


@click.command(
    epilog="Example:\n\n  ckptbench sweep configs/ci.toml --out ci && ckptbench check ci\n\n"
    "  ckptbench check results/new --against results/main --time-tolerance 25%"
)
@click.argument("results", nargs=-1, required=True, type=path_arg())
@against_option("Reference results to gate against; repeatable.")
@click.option(
    "--config",
    type=path_arg(),
    default=None,
    help="Take [expect] from this config (default: the sweep manifest's).",
)
@click.option(
    "--memory-tolerance",
    type=FRACTION,
    default="5%",
    show_default=True,
    help="With --against: a peak or overhead may grow by this fraction of the reference, or "
    "by --memory-floor, whichever is larger.",
)
@click.option(
    "--memory-floor",
    type=FLOOR_BYTES,
    default="256KiB",
    show_default=True,
    help="With --against: the least growth allowed, in bytes (exact peaks move by about "
    "0.03 MiB between processes).",
)
@click.option(
    "--time-tolerance",
    type=POSITIVE_FRACTION,
    default=None,
    help="Also gate time: fail when the interval of new/old time lies above 1 + this, taken as "
    "compare --against takes it: 95% over the worker processes where either side has two or "
    "more; with one a side, from the iterations (their noise alone). Off by default: time is "
    "noisy.",
)
@any_host_option
@click.option(
    "--summary",
    type=file_arg("summary.md", dash=f"stdout carries the verdicts; {_MARKDOWN_THERE}"),
    default=None,
    help="Append the markdown summary here (done by itself when $GITHUB_STEP_SUMMARY is set). "
    f"Not '-': {_MARKDOWN_THERE}.",
)
@json_and_format_options(
    _sections,
    "the verdicts are",
    "Print the verdicts as JSON (on stdout): the same as --format json.",
    formats="plain lines, markdown for a CI summary, junit, json, html, or any format "
    "registered in ckptbench.render.formats.",
)
@click.option(
    "--junit",
    type=file_arg("junit.xml", dash=f"stdout carries the verdicts; {_JUNIT_THERE}"),
    default=None,
    help=f"Also write JUnit XML here (one testcase per check) for CI test reports. Not '-': "
    f"{_JUNIT_THERE}.",
)
@click.option(
    "--force", is_flag=True, help="Allow --junit to replace JUnit XML ckptbench wrote, no other."
)
@quiet_option
def check(results, against, config, memory_tolerance, memory_floor, time_tolerance, any_host,
          summary, as_json, fmt, junit, force, quiet):  # fmt: skip
    """CI gate: exit 1 on a memory regression, a failed cell or an unmet expectation."""
    from ckptbench.analysis.gate import run_check
    from ckptbench.analysis.limits import ConfigFiles, config_sources
    from ckptbench.render.formats import render
    from ckptbench.render.reports import check_report
    from ckptbench.results.kinds import JUNIT
    from ckptbench.results.store import StoreError, check_output

    fmt = format_asked(as_json, fmt)  # --json is --format json; a clash is one line
    _needs_against(against)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    targets = [(summary, "--summary", True)] if summary is not None else []  # appended to
    if step_summary and (summary is None or real_path(step_summary) != real_path(summary)):
        targets.append((Path(step_summary), "$GITHUB_STEP_SUMMARY", True))
    if junit is not None:
        targets.append((junit, "--junit", False))
    refuse_duplicates([path for path, _, _ in targets])
    inputs = [*results, *against, *([config] if config is not None else [])]
    configs = ConfigFiles()  # each config file parsed once, here and by the gate
    try:
        inputs += config_sources([*results, *against], configs)  # compared with their copies
    except StoreError as err:  # a damaged manifest: one line, before any verdict
        raise InputError(str(err)) from None
    for path, what, append in targets:  # refused before any verdict is printed (exit 2)
        try:
            check_output(path, what, inputs=inputs, replace=force, append=append,
                         own=None if append else JUNIT)  # fmt: skip
        except StoreError as err:
            raise InputError(str(err)) from None
    for path, what, _ in targets:  # folders made as each file is written, once all pass
        probe_writable(path, what, make=False)
    note_writers([*results, *against], "check")
    try:
        report = run_check(
            results,
            against=against or None,
            config=config,
            memory_tolerance=memory_tolerance,
            memory_floor_bytes=memory_floor,
            time_tolerance=time_tolerance,
            match_host=not any_host,
            configs=configs,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    say_made_folders()  # past its checks: the folders made for its outputs are kept
    shown = check_report(report, quiet=quiet)
    md = render(check_report(report), "markdown")
    click.echo(render(shown, fmt))
    problems = []
    for path, what, _ in targets:
        if what == "--junit":
            continue
        try:  # appended in place, whole or not at all (appending.append_text)
            make_folder(path.parent, what)
            if tear := append_text(path, md + "\n", heading=_RECORD_HEADING):
                click.echo(f"warning: {what} {path}: {tear_text(tear)}", err=True)
        except OSError as err:
            problems.append(f"{what} {path}: cannot write ({err.strerror or err})")
    if junit is not None:
        from ckptbench.results.schema import write_atomic

        try:
            make_folder(junit.parent, "--junit")
            write_atomic(junit, render(shown, "junit"), replace=force)
            if not quiet:
                click.echo(f"wrote {junit}", err=True)
        except OSError as err:
            problems.append(f"--junit {junit}: cannot write ({err.strerror or err})")
    for problem in problems:
        click.echo(f"ckptbench: error: {problem}", err=True)
    # a failed gate stays exit 1 whatever else went wrong; a write error alone is exit 2
    if report.exit_code != EXIT_OK:
        sys.exit(report.exit_code)
    sys.exit(EXIT_USAGE if problems else EXIT_OK)


def _needs_against(against) -> None:
    """A gate option that compares with a reference, given without one, is one line and exit
    2: ignored, it would leave a CI job believing time or memory growth is gated."""
    if against:
        return
    ctx = click.get_current_context()
    given = [
        f"--{name.replace('_', '-')}"
        for name in ("memory_tolerance", "memory_floor", "time_tolerance")
        if ctx.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)
    ]
    if given:
        raise InputError(
            f"{given[0]} gates changes against reference results: give --against (without it, "
            "check gates status and the [expect] table only)"
        )
