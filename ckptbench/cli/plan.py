"""``ckptbench plan``: the budget planner's schedule beside Revolve and equal segments."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ckptbench.cli.costs_file import costs_note, read_costs, shown_notes
from ckptbench.cli.options import (
    EXIT_FAILED,
    POS,
    InputError,
    backend_option,
    check_backend,
    device_option,
    device_words,
    file_arg,
    format_asked,
    numerics_options,
    path_arg,
    quiet_option,
    relative_model,
    size_options,
    stdout_console,
    steps_option,
    timeout_option,
)
from ckptbench.cli.outputs import (
    check_side_output,
    input_files,
    json_and_format_options,
    make_folder,
)
from ckptbench.cli.run_steps import checked_in_worker
from ckptbench.cli.values import BYTES, size_notes
from ckptbench.results.chains import chain_executor
from ckptbench.results.kinds import COSTS
from ckptbench.results.schema import Case, TargetError, write_atomic

#: Why ``--save-costs -`` is refused (``options.file_arg``).
SAVE_COSTS_DASH = (
    "stdout carries the plan, and --json prints the costs there with it (its 'costs' key)"
)


def _sections():
    from ckptbench.render.reports import PLAN_SECTIONS

    return PLAN_SECTIONS


@click.command(
    epilog="Example:\n\n  ckptbench plan --model lstm --steps 1000 --budget 8MiB\n\n"
    "  ckptbench plan --model cnn-stack --steps 24 --budget 32MiB --save-costs costs.json\n\n"
    "  ckptbench plan --model my.py:make --steps 200 --budget 4MiB --costs costs.json"
)
@click.option("--model", default="lstm", show_default=True, help="As for run.")
@steps_option(1000)
@click.option("--budget", type=BYTES, required=True, help="Bytes for states and tapes (8MiB).")
@click.option(
    "--costs",
    "costs_file",
    type=path_arg(),
    default=None,
    help="Plan with these step costs (JSON, see docs/planner.md) instead of measuring them.",
)
@click.option(
    "--save-costs",
    "save_file",
    type=file_arg("costs.json", dir_okay=False, dash=SAVE_COSTS_DASH),
    default=None,
    help="Write the costs planned with to this file (the --costs format; per layer on a "
    "chain; never replaces a file without --force). Not '-': stdout carries the plan "
    "(--json prints the costs with it).",
)
@click.option("--force", is_flag=True,
              help="Allow --save-costs to replace a costs file (never another file).")  # fmt: skip
@click.option(
    "--actions",
    is_flag=True,
    help="Also list every action of the optimal plan, with the bytes each keeps stored.",
)
@backend_option
@device_option
@numerics_options
@size_options
@click.option(
    "--threads",
    type=POS,
    default=1,
    show_default=True,
    help="BLAS/OpenMP threads of the worker that measures the step costs.",
)
@timeout_option("For the worker that checks a plug-in and the one that measures the step "
                "costs, each counted from its ready signal (start-up has a limit of the same "
                "length).")  # fmt: skip
@json_and_format_options(_sections, "the plans are", "Print costs and rows as JSON.")
@quiet_option
def plan(
    model, steps, budget, costs_file, save_file, force, actions, backend, device, executor,
    dtype, hidden, batch, input_, output, seed, threads, timeout, as_json, fmt, quiet,
):  # fmt: skip
    """The minimum-time schedule for a byte budget, beside Revolve and equal segments.

    Measures the step costs (untaped step, taped step + reverse, state and tape bytes) in a
    fresh worker, then plans with the dynamic program over states and tapes (Beaumont et al.,
    2019) and predicts each strategy's time and peak storage at the same budget. On a layer
    chain (--model cnn-stack, ...) every layer's costs are measured, and a table shows per
    layer its costs and what the optimal plan does with it. --dtype and --executor are
    run's: the costs are measured in that type, through the executor that will run the
    plan.
    """
    from ckptbench.schedules.optimal import OPTIMAL, Costs, check_budget, check_plannable
    from ckptbench.workloads import BUILTIN_CHAINS, BUILTIN_WORKLOADS

    fmt = format_asked(as_json, fmt)

    try:
        case = chain_executor(Case(
            model=relative_model(model), steps=steps, strategy=OPTIMAL.name, budget_bytes=budget,
            backend=backend, device=device, hidden=hidden, batch=batch, input=input_,
            output=output, seed=seed, threads=threads, dtype=dtype, executor=executor,
            timeout_s=timeout,
        ))  # fmt: skip
        case.check_fits_memory()
        check_backend(case)
        if save_file is not None:  # before measuring: a refusal costs no measurement
            check_side_output(save_file, "--save-costs", input_files(model, costs_file), force,
                              own=COSTS)  # fmt: skip
        doc = read_costs(costs_file, steps) if costs_file else None
        notes = size_notes(click.get_current_context())
        if doc is not None and (note := costs_note(costs_file, doc, case)):
            notes += (note,)
        for kind, note in shown_notes(notes, quiet):  # -q: the warnings only (costs file, dtype)
            click.echo(f"{kind}: {note}", err=True)
        stack = case.model in BUILTIN_CHAINS
        given = Costs.from_dict(doc) if doc is not None else None
        check_plannable(steps, given, budget_bytes=budget, per_step=stack)
        if given is not None:
            check_budget(given, steps, budget)
    except ValueError as err:
        raise InputError(device_words(click.get_current_context(), device, str(err))) from None
    if doc is not None:
        if case.model not in BUILTIN_WORKLOADS:  # checked as run checks it, costs noted
            case = _checked(case, quiet, doc, costs_file)
        report = {"costs": doc, "layers": _builtin_layers(case)}
    else:
        report = _measure(case, quiet)
        keys = ("executor", "taped_method", "timing")
        report["measured"] = {"dtype": case.dtype, **{k: report[k] for k in keys if k in report}}
    _show(report, steps, budget, save_file, fmt, force, actions, quiet)


def _builtin_layers(case: Case) -> list[str] | None:
    """The layer names of a built-in chain (for a costs file, which has none), else None."""
    from ckptbench.workloads import BUILTIN_CHAINS, Sizes, load_workload
    from ckptbench.workloads.chain import layer_names

    if case.model not in BUILTIN_CHAINS:
        return None
    return list(layer_names(load_workload(case.model, Sizes(**case.sizes())), case.steps))


def _checked(case: Case, quiet: bool, costs: dict | None = None, costs_file=None) -> Case:
    """The device probe and the plug-in check in a disposable worker, as for run
    (``run_steps.checked_in_worker``: sizes, refusals, and the note on a ``costs_file`` of
    other states than the plug-in's); its notes said (``quiet``: its warnings only)."""
    ctx = click.get_current_context()
    case, notes, _ = checked_in_worker(ctx, case, case.device, costs, costs_file,
                                       stopped="nothing planned")  # fmt: skip
    for kind, note in shown_notes(notes, quiet):  # -q: the warnings only (costs file, dtype)
        click.echo(f"{kind}: {note}", err=True)
    return case


def _measure(case: Case, quiet: bool) -> dict:
    """The step costs of ``case`` measured in a fresh worker (the worker's report: ``costs``
    and, on a layer chain, ``layers``), after the plug-in check; exits on failure."""
    from ckptbench.measure.launch import Interrupted, stop_on_signals, stop_reason
    from ckptbench.measure.tasks import CostsError, measure_costs

    case = _checked(case, quiet)
    try:
        with stop_on_signals():
            if not quiet:
                on = case.backend if case.device == "cpu" else f"{case.backend} ({case.device})"
                click.echo(f"measuring step costs on {on} in a fresh worker ...", err=True)
            return measure_costs(case)
    except ValueError as err:
        raise InputError(str(err)) from None
    except CostsError as err:
        click.echo(f"ckptbench: {err}", err=True)
        sys.exit(EXIT_FAILED)
    except (Interrupted, KeyboardInterrupt) as err:
        click.echo(f"ckptbench: interrupted by {stop_reason(err)}; nothing planned", err=True)
        sys.exit(128 + getattr(err, "signum", 2))


def _show(
    report: dict, steps: int, budget: int, save_file: Path | None, fmt: str, force: bool,
    actions: bool, quiet: bool = False,
) -> None:  # fmt: skip
    """Plan with the costs of ``report`` and print the plans (and, for per-step costs, the
    optimal plan per layer) in format ``fmt``; write the costs to ``save_file`` first."""
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import plan_report
    from ckptbench.schedules.compare import compare_at_budget
    from ckptbench.schedules.optimal import Costs, check_budget, check_plannable, plan_optimal

    doc = report["costs"]
    costs = Costs.from_dict(doc)
    if save_file is not None:  # first: measured costs are kept even when no plan fits
        try:
            make_folder(save_file.parent, "--save-costs")
            write_atomic(save_file, json.dumps(costs.as_dict(), indent=1) + "\n", replace=force)
        except TargetError as err:  # it appeared, or became a link, while measuring
            raise InputError(f"--save-costs {err}") from None
        except OSError as err:
            raise InputError(f"--save-costs {save_file}: {err.strerror or err}") from None
    try:
        check_plannable(steps, costs, budget_bytes=budget)  # per layer where measured so
        check_budget(costs, steps, budget)
        rows = compare_at_budget(costs, steps, budget)
        best = plan_optimal(costs, steps, budget) if costs.steps is not None or actions else None
    except ValueError as err:
        kept = f" (the costs are saved: plan again with --costs {save_file})" if save_file else ""
        raise InputError(f"{err}{kept}") from None
    if save_file is not None and not quiet:  # as compare -o says it (a refusal says it too)
        click.echo(f"wrote {save_file} (the step costs: --costs {save_file} reuses them)", err=True)
    shown = get_format(fmt)
    measured = report.get("measured")
    out = plan_report(
        rows, costs, doc, steps, budget, plan=best if costs.steps is not None else None,
        layers=report.get("layers"), measured=measured, actions=best if actions else None,
    )  # fmt: skip
    if shown.show is not None:  # a terminal format: the console's width
        shown.show(out, stdout_console())
    else:
        click.echo(shown.render(out, stdout_console().width))
