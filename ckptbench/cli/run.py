"""``ckptbench run``: one case, baseline / normal / checkpointed, each in fresh workers."""

from __future__ import annotations

import difflib
import os
import re
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import click

from ckptbench.cli.costs_file import shown_notes
from ckptbench.cli.options import (
    CASE_DEFAULTS,
    NATURAL,
    POS,
    SNAPS_HELP,
    GroupedCommand,
    InputError,
    ModelOption,
    backend_option,
    device_option,
    file_arg,
    format_asked,
    mprof_option,
    numerics_options,
    output_options,
    path_arg,
    relative_model,
    size_options,
    steps_option,
    strategy_help,
)
from ckptbench.cli.outputs import (
    check_mprof_dir,
    check_out,
    claim_out,
    input_files,
    json_and_format_options,
    say_made_folders,
    write_mprof,
)
from ckptbench.cli.precision import precision_option
from ckptbench.cli.run_steps import (
    checked_case,
    checked_in_worker,
    measure,
    report_outcome,
    show_result,
)
from ckptbench.cli.values import (
    BYTES,
    CAP_SECONDS,
    LIMIT_BYTES,
    SECONDS,
    SuggestingChoice,
    WholeRange,
    shown_value,
)
from ckptbench.results.schema import MAX_THREADS, Case
from ckptbench.schedules import strategy_names


def _default_out(model: str) -> Path:
    """results/run-<model>-<date>-<time>.<microseconds>-<random>.json: unique per run."""
    import secrets

    now = datetime.now()
    stamp = now.strftime("%Y%m%d-%H%M%S") + f".{now.microsecond:06d}"
    target, _, name = model.rpartition(":")  # a plug-in: its file's or module's last part
    if target:
        model = f"{Path(target).stem if target.endswith('.py') else target.split('.')[-1]}_{name}"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_")[:30].strip("_") or "model"
    return Path("results") / f"run-{slug}-{stamp}-{secrets.token_hex(3)}.json"


def _round_seconds(case: Case, modes) -> float:
    """A rough duration of one round before any is measured (the sweep's cell estimate of
    its rounds, ``sweep.progress.rounds_seconds``)."""
    from ckptbench.sweep.progress import rounds_seconds

    one = rounds_seconds(replace(case, rounds=1))
    return one * len(modes) / 3


def _announce(err_console, case: Case, modes, target, costs, quiet: bool):
    """(a round's rough duration, the plan line to say as the first mode starts). Where a
    plan's step costs are measured first (strategy optimal without ``--costs``, the
    checkpointed mode run), the line says them, is in its total (``sweep.progress.
    costs_seconds``) and is said now, before they are measured: the returned line is None."""
    from ckptbench.backends import registry
    from ckptbench.render.console import plan_line
    from ckptbench.results.schema import Mode
    from ckptbench.schedules import get_strategy
    from ckptbench.sweep.progress import costs_seconds

    guess = _round_seconds(case, modes)
    first = costs is None and get_strategy(case.strategy).planned and Mode.CHECKPOINTED in modes
    costs_s = costs_seconds(case) if first else None
    unknown = registry.spec(case.backend).costs_work.unknown if first else ""
    line = plan_line(case, modes, target, guess, _load(), costs_s, unknown)
    if not first:
        return guess, line
    if not quiet:
        err_console.print(line, highlight=False, markup=False)
    return guess, None


def _load() -> tuple[float, int] | None:
    """(1-minute load average, cores) where the platform says."""

    from ckptbench.measure.noise import load_average

    load = load_average()
    return None if load is None else (load[0], os.cpu_count() or 1)


def _parse_modes(text: str, trace: bool = False):
    from ckptbench.results.schema import Mode

    if trace and Mode.CHECKPOINTED.value not in [m.strip() for m in text.split(",")]:
        raise InputError("--trace records the checkpointed mode; --modes must include it")

    names = [m.strip() for m in text.split(",")]
    if not any(names):
        raise InputError("--modes is empty")
    if not all(names):  # 'baseline,,normal': a mode left out, or a stray comma
        raise InputError(
            f"--modes {shown_value(text)} has an empty entry: use baseline, normal, checkpointed"
        )
    known = [m.value for m in Mode]
    for name in names:
        if name not in known:
            near = difflib.get_close_matches(name, known, n=1)
            guess = f" ({shown_value(name)}: did you mean {near[0]}?)" if near else ""
            said = f"--modes {shown_value(text)}{guess}"
            raise InputError(f"{said}: use baseline, normal, checkpointed")
    modes = tuple(Mode(m) for m in names)
    if len(set(modes)) != len(modes):
        raise InputError(f"--modes {shown_value(text)} names a mode twice")
    return modes


RUN_SECTIONS = {
    "Workload (what is differentiated)": (
        "model", "steps", "hidden", "batch", "input_", "output", "seed", "dtype", "backend",
        "device",
    ),
    "Strategy (how the checkpointed gradient keeps memory)": (
        "strategy", "snaps", "budget", "costs_file", "executor",
    ),
    "Measurement (rounds, limits, precision)": (
        "modes", "rounds", "precision", "max_rounds", "max_time", "warmup", "repeats",
        "threads", "timeout", "memory_limit", "expect_oom", "retry_oom", "sample_interval",
        "trace",
    ),
    "Output": ("out", "force", "as_json", "fmt", "mprof_dir", "quiet", "verbose", "progress_lines"),
}  # fmt: skip


#: Why ``--out -`` is refused (``options.file_arg``).
_OUT_DASH = (
    "stdout carries run's table, and the result file is saved after every mode; --json "
    "prints the result document on stdout"
)


def _sections():
    from ckptbench.render.reports import RUN_SECTIONS

    return RUN_SECTIONS


@click.command(
    cls=GroupedCommand,
    sections=RUN_SECTIONS,
    epilog="The default job runs 6 rounds of a fresh worker per mode, then more until the "
    "slowdown's 95% interval is within +/-5%, within --max-time (4 min). Your own model: "
    "docs/plugins.md.\n\nExample:\n\n  ckptbench run --model lstm --steps 1000 --snaps 31",
)
@click.option(
    "--model",
    cls=ModelOption,
    default="lstm",
    show_default=True,
    help="A built-in workload or your own plug-in (docs/plugins.md).",
)
@steps_option(1000)
@click.option(
    "--snaps",
    type=POS,
    default=31,
    show_default=True,
    help=SNAPS_HELP + " More than --steps is clamped to --steps (and said so).",
)
@click.option(
    "--strategy",
    type=SuggestingChoice(strategy_names()),
    default="revolve",
    show_default=True,
    help=strategy_help(strategy_names()),
)
@backend_option
@device_option
@click.option(
    "--budget",
    type=BYTES,
    default=None,
    help="Strategy optimal: bytes the schedule may keep in states and tapes (e.g. 8MiB; "
    "8MB is SI, 8 000 000 B).",
)
@click.option(
    "--costs",
    "costs_file",
    type=path_arg(),
    default=None,
    help="Strategy optimal: plan with these step costs (a JSON costs file, see "
    "docs/planner.md) instead of measuring them in a fresh worker first.",
)
@size_options
@numerics_options
@click.option(
    "--warmup",
    type=NATURAL,
    default=CASE_DEFAULTS.warmup,
    show_default=True,
    help="Unmeasured iterations per round before the measured ones.",
)
@click.option(
    "--repeats",
    type=POS,
    default=CASE_DEFAULTS.repeats,
    show_default=True,
    help="Measured iterations per round.",
)
@click.option(
    "--rounds",
    type=POS,
    default=CASE_DEFAULTS.rounds,
    show_default=True,
    help="Measure every mode this many times, each in a fresh worker, in rotated order; "
    "the slowdown's 95% interval comes from the spread between rounds.",
)
@click.option(
    "--threads",
    type=WholeRange(1, MAX_THREADS),
    default=1,
    show_default=True,
    help="BLAS/OpenMP threads in workers.",
)
@click.option(
    "--timeout",
    type=SECONDS,
    default="15m",
    show_default=True,
    help="Per mode, counted from the worker's ready signal (imports and data built; start-up "
    "has its own limit of the same length). A stopped mode keeps its completed iterations.",
)
@click.option(
    "--memory-limit",
    type=LIMIT_BYTES,
    default=None,
    help="Stop a mode whose RSS exceeds this (e.g. 2GiB) and report it out of memory.",
)
@click.option(
    "--sample-interval",
    type=SECONDS,
    default="5ms",
    show_default=True,
    help="How often the parent samples each worker's RSS for the timeline and the sampled "
    "peak (the exact peak is read inside the worker); at least 1ms (faster, the sampler keeps "
    "a core busy), at most 10s, and below --timeout.",
)
@click.option(
    "--modes",
    default="baseline,normal,checkpointed",
    show_default=True,
    help="Comma-separated subset of baseline, normal, checkpointed (each at most once).",
)
@click.option(
    "--trace",
    is_flag=True,
    help="After the measured iterations, run the checkpointed gradient once more and record "
    "every action: what it stored, freed, taped or recomputed, the planned stored bytes and "
    "the memory measured (docs/trace.md). The measured figures do not include it.",
)
@click.option(
    "--out",
    type=file_arg("result.json", dash=_OUT_DASH),
    default=None,
    help="Result JSON file (default: a new, unique name under results/). An existing file is "
    "never replaced without --force; a link, folder or device never. Not '-': --json prints "
    "the result on stdout.",
)
@click.option("--force", is_flag=True, help="Allow --out to replace a result file, and --mprof "
              "the timelines ckptbench wrote (never another file).")  # fmt: skip
@click.option(
    "--retry-oom",
    is_flag=True,
    help="Measure a mode that exceeded --memory-limit again in every round (default: later "
    "rounds skip it, and say so).",
)
@click.option(
    "--precision",
    default="5%",
    show_default=True,
    envvar="CKPTBENCH_PRECISION",
    callback=precision_option,
    help="After --rounds, add rounds until the slowdown's 95% interval is within this, up "
    "to --max-rounds and --max-time, and say when it stopped short. 'off' (or 0, 0%) adds none. An "
    "explicit --rounds N without --precision runs exactly N rounds. Environment: "
    "CKPTBENCH_PRECISION.",
)
@click.option(
    "--max-rounds",
    type=POS,
    default=30,
    show_default=True,
    help="With --precision: never more rounds than this.",
)
@click.option(
    "--max-time",
    type=CAP_SECONDS,
    default="4m",
    show_default=True,
    help="With --precision: the time cap of the whole measurement. No round starts that would "
    "end past it (judged by the mean round so far), the planned --rounds included; at least "
    "two rounds always run. The run says the interval it reached.",
)
@click.option(
    "--expect-oom",
    multiple=True,
    type=SuggestingChoice(["baseline", "normal", "checkpointed"]),
    help="This mode is meant to exceed --memory-limit (e.g. normal, to show that only the "
    "checkpointed gradient fits): its out-of-memory is the result, exit 0; if it fits, exit 1.",
)
@mprof_option
@json_and_format_options(_sections, "the result is", "Print the result document on stdout.")
@output_options
def run(
    model, steps, snaps, strategy, backend, device, budget, costs_file, hidden, batch, input_,
    output, seed, dtype, executor, warmup, repeats, rounds, threads, timeout, memory_limit,
    sample_interval, modes, out, force, retry_oom, precision, max_rounds, max_time, expect_oom,
    mprof_dir, as_json, fmt, quiet, verbose, progress_lines, trace,
):  # fmt: skip
    """Measure baseline, normal and checkpointed gradients, each in a fresh process."""
    from ckptbench.render.console import escaped, mode_progress, stderr_console
    from ckptbench.results.schema import snaps_ignored

    fmt = format_asked(as_json, fmt)
    mode_list = _parse_modes(modes, trace)
    model = relative_model(model)
    _check_expect_oom(expect_oom, memory_limit, mode_list, retry_oom)
    ctx = click.get_current_context()
    given = ctx.get_parameter_source("snaps")
    if snaps_ignored(strategy) and given is click.core.ParameterSource.DEFAULT:
        snaps = steps  # not given and not used: no note
    fields = dict(
        model=model, steps=steps, snaps=snaps, strategy=strategy, backend=backend,
        device=device, budget_bytes=budget, hidden=hidden, batch=batch, input=input_,
        output=output, seed=seed, dtype=dtype, executor=executor,
        warmup=warmup, repeats=repeats, rounds=rounds, threads=threads, timeout_s=timeout,
        memory_limit_bytes=memory_limit, sample_interval_s=sample_interval, trace=trace,
    )  # fmt: skip
    case, notes, costs, target = checked_case(
        ctx, fields, costs_file, precision, max_rounds=max_rounds, max_time=max_time, modes=modes
    )
    out = out or _default_out(model)
    inputs = input_files(model, costs_file)
    check_out(out, force, inputs)
    claim_out(ctx, out)  # before anything is measured; held until the command ends
    check_out(out, force, inputs)  # again: it may have appeared before the claim
    if mprof_dir is not None:
        rounds_up_to = target.max_rounds if target is not None else 0  # --precision adds rounds
        check_mprof_dir(mprof_dir, case, mode_list, out, max_rounds=rounds_up_to, force=force)
    case, plugin_notes, checked = checked_in_worker(ctx, case, device, costs, costs_file)
    notes += plugin_notes
    say_made_folders(ctx)  # past its checks: the folders made for --out and --mprof are kept

    err_console = stderr_console()
    for kind, note in shown_notes(notes, quiet):  # -q: the warnings only (costs file, dtype)
        err_console.print(f"[yellow]{kind}[/yellow] {escaped(note)}", highlight=False)
    guess, announce = _announce(err_console, case, mode_list, target, costs, quiet)
    progress_cb, stop = mode_progress(
        err_console,
        mode_list,
        case,
        quiet=quiet,
        verbose=verbose,
        lines=progress_lines,
        precision=target,
        guess_round_s=guess,
        announce=announce,  # said as measuring starts (None: said already)
    )
    measured = measure(
        case,
        err_console,
        progress_cb,
        stop,
        out=out,
        force=force,
        modes=mode_list,
        costs=costs,
        retry_oom=retry_oom,
        precision=target,
        expect_oom=expect_oom,
        checked_sources=checked.sources,  # the watch of the plug-in's files starts at the check
        plugin_dtypes=checked.dtypes,  # the dtypes of what loss gets and of the loss
    )
    result, out = measured.result, measured.out
    show_result(result, fmt, quiet=quiet, out=out)
    if mprof_dir is not None:
        write_mprof([result], mprof_dir, quiet, replace=force)
    code = report_outcome(result, expect_oom, err_console)
    sys.exit(code if measured.code is None else measured.code)


def _check_expect_oom(expect_oom, memory_limit, mode_list, retry_oom=False) -> None:
    """``--expect-oom`` and ``--retry-oom`` need ``--memory-limit`` (no mode runs out of
    memory without one), and ``--expect-oom`` names only modes that run."""
    for given, option in ((expect_oom, "--expect-oom"), (retry_oom, "--retry-oom")):
        if given and memory_limit is None:
            raise InputError(f"{option} needs --memory-limit")
    if set(expect_oom) - {m.value for m in mode_list}:
        raise InputError("--expect-oom names a mode that --modes does not run")
