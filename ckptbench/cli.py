"""The command line. The only module that prints or exits.

Exit status: 0 ok, 1 a failed measurement or a regression, 2 bad usage or input.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import statistics
import sys
import time
from collections import deque
from datetime import datetime
from pathlib import Path

import click

from ckptbench import __version__

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 2**20,
    "mb": 10**6,
    "mib": 2**20,
    "g": 2**30,
    "gb": 10**9,
    "gib": 2**30,
    "t": 2**40,
    "tb": 10**12,
    "tib": 2**40,
}


class InputError(click.ClickException):
    """Bad input: one line on stderr, exit status 2."""

    exit_code = EXIT_USAGE


def parse_bytes(text: str) -> int:
    """'2GiB', '500MB', '1.5g', '1048576' -> bytes (k/m/g/t alone are binary units)."""
    m = _SIZE.match(text)
    if not m or (m.group(2) or "").lower() not in _UNITS:
        raise click.BadParameter(f"{text!r} is not a size like 2GiB, 500MB or 1048576")
    n = int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])
    if n <= 0:
        raise click.BadParameter(f"{text!r} must be positive")
    return n


def parse_seconds(text: str) -> float:
    """'5ms', '0.005', '2s', '10m' -> seconds."""
    m = re.match(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h)?\s*$", text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration like 5ms, 2s or 10m")
    value = float(m.group(1)) * {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, None: 1}[m.group(2)]
    if value <= 0:
        raise click.BadParameter(f"{text!r} must be positive")
    return value


class _Bytes(click.ParamType):
    name = "SIZE"

    def convert(self, value, param, ctx):
        return value if isinstance(value, int) else parse_bytes(str(value))


class _Seconds(click.ParamType):
    name = "DURATION"

    def convert(self, value, param, ctx):
        return value if isinstance(value, float) else parse_seconds(str(value))


BYTES, SECONDS = _Bytes(), _Seconds()
POS = click.IntRange(min=1)


def output_options(func):
    """-q/--quiet, -v/--verbose and --progress, on every command."""
    func = click.option(
        "--progress",
        "progress_lines",
        is_flag=True,
        help="Progress lines (iteration k of n, elapsed, ETA) even when stderr is not a terminal.",
    )(func)
    func = click.option(
        "-v", "--verbose", is_flag=True, help="More detail: every iteration, every note."
    )(func)
    return click.option("-q", "--quiet", is_flag=True, help="Only results, warnings and failures.")(
        func
    )


SNAPS_HELP = (
    "Snapshot slots, INCLUDING the one holding the initial state x_0 "
    "(the Revolve/pyrevolve convention)."
)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Example:\n\n  ckptbench run --model lstm --steps 1000 --snaps 31",
)
@click.version_option(__version__, prog_name="ckptbench")
def cli() -> None:
    """Measure what gradient checkpointing (binomial Revolve) costs and saves.

    Runs the same RNN/LSTM gradient as baseline (forward only), normal (plain autograd) and
    checkpointed (our Revolve executor), each in a fresh process, and prints overhead over
    baseline, slowdown and memory savings.
    """


# ---------------------------------------------------------------------- schedule


@cli.command(
    epilog="Example:\n\n  ckptbench schedule --steps 100000 --snaps 50 --time\n\n"
    "  ckptbench schedule --steps 10 --snaps 3 --actions"
)
@click.option("--steps", type=POS, required=True, help="Number of steps l.")
@click.option("--snaps", type=POS, required=True, help=SNAPS_HELP)
@click.option(
    "--strategy",
    type=click.Choice(["revolve", "uniform", "store-all"]),
    default="revolve",
    show_default=True,
    help="revolve: optimal binomial; uniform: sqrt(n)-style equal segments; store-all.",
)
@click.option("--actions", is_flag=True, help="Print every action of the schedule.")
@click.option("--time", "timed", is_flag=True, help="Time generating the full schedule.")
@click.option("--repeat", type=POS, default=5, show_default=True, help="Timing repetitions.")
@output_options
def schedule(
    steps: int, snaps: int, strategy: str, actions: bool, timed: bool, repeat: int, quiet: bool,
    verbose: bool, progress_lines: bool,
):  # fmt: skip
    """Show a checkpointing schedule's cost: r, t, evaluations, peak snapshots.

    The figures come from the closed-form Griewank-Walther formulas for any size; the
    schedule is enumerated (and replayed to check it) only up to 5 000 000 step evaluations,
    or for --actions/--time, which refuse larger schedules.
    """
    from ckptbench.render import closed_form_table, schedule_table
    from ckptbench.revolve import make_schedule, optimal_forward_steps, replay

    evaluations = (
        optimal_forward_steps(steps, min(snaps, steps)) + steps
        if strategy == "revolve"
        else 2 * steps - 1
        if strategy == "store-all"
        else None
    )
    small = evaluations is not None and evaluations <= ENUMERATE_LIMIT
    if strategy == "uniform":
        small = steps <= ENUMERATE_LIMIT // 2 and min(steps, snaps) <= 20_000
    if (actions or timed) and not small:
        raise InputError(
            f"--actions/--time enumerate the schedule; {steps} steps with {snaps} snaps is "
            f"over the limit of {ENUMERATE_LIMIT:,} step evaluations (the figures without "
            "these options come from the formulas)"
        )
    if not small:
        if strategy == "uniform":
            raise InputError(
                f"the uniform schedule has no closed form; {steps} steps is too many to "
                "enumerate here (use --strategy revolve for the formulas)"
            )
        _stdout_console().print(closed_form_table(steps, snaps, strategy))
        return
    console = _stdout_console()
    if actions:
        for act in make_schedule(strategy, steps, snaps):
            click.echo(repr(act))
    gen_s = None
    if timed:
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            deque(make_schedule(strategy, steps, snaps), maxlen=0)
            runs.append(time.perf_counter() - t0)
        gen_s = min(runs)
    # store-all ignores the slot budget: it keeps every state
    stats = replay(
        make_schedule(strategy, steps, snaps), steps, None if strategy == "store-all" else snaps
    )
    console.print(schedule_table(stats, snaps, strategy, gen_s))
    if timed:
        console.print(
            f"generation time: min {min(runs) * 1e3:.1f} ms, median "
            f"{statistics.median(runs) * 1e3:.1f} ms over {repeat} runs "
            f"({stats.actions} actions)"
        )


#: Schedules up to this many step evaluations are enumerated (about 2 s here).
ENUMERATE_LIMIT = 5_000_000


# ---------------------------------------------------------------------- run


def size_options(func):
    """--hidden, --batch, --input, --output and --seed: the workload's sizes."""
    options = [
        click.option("--hidden", type=POS, default=256, show_default=True),
        click.option("--batch", type=POS, default=16, show_default=True),
        click.option("--input", "input_", type=POS, default=32, show_default=True),
        click.option(
            "--output",
            type=POS,
            default=1,
            show_default=True,
            help="Readout size per step. Its cotangent (steps x batch x output) is needed by "
            "every gradient method and grows with steps.",
        ),
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _read_costs(path: Path, steps: int) -> dict:
    """A costs file (docs/planner.md) as a ``planner.Costs`` document; one line if bad."""
    from ckptbench.planner import costs_from_json

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"--costs {path}: cannot read ({getattr(err, 'strerror', err)})") from None
    try:
        costs = costs_from_json(text)
    except ValueError as err:
        raise InputError(f"--costs {path}: {err}") from None
    if costs.steps is not None and costs.steps != steps:
        raise InputError(f"--costs {path}: has costs for {costs.steps} steps, not {steps}")
    return costs.as_dict()


@cli.command(
    epilog="Example:\n\n  ckptbench plan --model lstm --steps 1000 --budget 8MiB\n\n"
    "  ckptbench plan --model my.py:make --steps 200 --budget 4MiB --costs costs.json"
)
@click.option("--model", default="lstm", show_default=True, help="As for run.")
@click.option("--steps", type=POS, default=1000, show_default=True, help="Sequence length l.")
@click.option("--budget", type=BYTES, required=True, help="Bytes for states and tapes (8MiB).")
@click.option(
    "--costs",
    "costs_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Plan with these step costs (JSON, see docs/planner.md) instead of measuring them.",
)
@size_options
@click.option("--threads", type=POS, default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print costs and rows as JSON.")
@output_options
def plan(
    model, steps, budget, costs_file, hidden, batch, input_, output, seed, threads, as_json,
    quiet, verbose, progress_lines,
):  # fmt: skip
    """The minimum-time schedule for a byte budget, beside Revolve and equal segments.

    Measures the step costs (untaped step, taped step + reverse, state and tape bytes) in a
    fresh worker, then plans with the dynamic program over states and tapes (Beaumont et al.,
    2019) and predicts each strategy's time and peak storage at the same budget.
    """
    from ckptbench.launch import CostsError, measure_costs
    from ckptbench.planner import Costs, compare_at_budget
    from ckptbench.render import plan_table
    from ckptbench.results import Case
    from ckptbench.workloads import Sizes, load_workload

    try:
        case = Case(
            model=model, steps=steps, strategy="optimal", budget_bytes=budget, hidden=hidden,
            batch=batch, input=input_, output=output, seed=seed, threads=threads,
        )  # fmt: skip
        _check_size(case)
        load_workload(model, Sizes(**case.sizes()))
        doc = _read_costs(costs_file, steps) if costs_file else None
    except ValueError as err:
        raise InputError(str(err)) from None
    if doc is None and not quiet:
        click.echo("measuring step costs in a fresh worker ...", err=True)
    if doc is None:
        try:
            doc = measure_costs(case)["costs"]
        except CostsError as err:
            click.echo(f"ckptbench: {err}", err=True)
            sys.exit(EXIT_FAILED)
    costs = Costs.from_dict(doc)
    try:
        rows = compare_at_budget(costs, steps, budget)
    except ValueError as err:
        raise InputError(str(err)) from None
    if as_json:
        click.echo(json.dumps({"costs": doc, "budget_bytes": budget, "rows": rows}, indent=1))
        return
    _stdout_console().print(plan_table(rows, costs, steps, budget))


def _stdout_console():
    from ckptbench.render.console import stdout_console

    return stdout_console()


def _default_out(model: str) -> Path:
    """results/run-<model>-<date>-<time>.<microseconds>-<random>.json: unique per run."""
    import secrets

    now = datetime.now()
    stamp = now.strftime("%Y%m%d-%H%M%S") + f".{now.microsecond:06d}"
    slug = re.sub(r"[^A-Za-z0-9]+", "_", model).strip("_")[-30:].strip("_") or "model"
    return Path("results") / f"run-{slug}-{stamp}-{secrets.token_hex(3)}.json"


def _check_out(path: Path, force: bool) -> None:
    """Fail early (exit 2) when the result file could not be written, or would replace
    something it must not (see ``results.check_target``)."""
    import tempfile

    from ckptbench.results import TargetError, check_target

    try:
        check_target(path, replace=force)
    except TargetError as err:
        hint = "; pass --force to replace it" if path.is_file() and not path.is_symlink() else ""
        raise InputError(f"--out {err}{hint}") from None
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".ckptbench-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InputError(f"--out {path}: cannot write there ({err.strerror or err})") from None


def _relative_model(model: str) -> str:
    """A file plug-in given by an absolute path is recorded relative to the current folder
    (results never hold absolute paths of this machine)."""
    target, sep, name = model.rpartition(":")
    if sep and os.path.isabs(target) and os.path.isfile(target):
        return f"{os.path.relpath(target)}:{name}"
    return model


def _parse_modes(text: str):
    from ckptbench.results import Mode

    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise InputError("--modes is empty")
    try:
        modes = tuple(Mode(m) for m in names)
    except ValueError:
        raise InputError(f"--modes {text!r}: use baseline, normal, checkpointed") from None
    if len(set(modes)) != len(modes):
        raise InputError(f"--modes {text!r} names a mode twice")
    return modes


def _check_size(case) -> None:
    """Refuse (exit 2) a case whose inputs alone could not fit in this machine's memory."""
    import psutil

    floats = case.steps * case.batch * (case.input + case.output)
    need = 8 * floats
    total = psutil.virtual_memory().total
    if need > total:
        raise InputError(
            f"--steps {case.steps}: the inputs and outputs alone need about "
            f"{need / 2**30:,.1f} GiB, more than this machine's {total / 2**30:.1f} GiB"
        )


def _strategies() -> list[str]:
    from ckptbench.results import EXTRA_STRATEGIES
    from ckptbench.revolve import Strategy

    return [s.value for s in Strategy] + list(EXTRA_STRATEGIES)


@cli.command(epilog="Example:\n\n  ckptbench run --model lstm --steps 1000 --snaps 31")
@click.option(
    "--model",
    default="lstm",
    show_default=True,
    help="rnn, lstm, or a plug-in 'path/to/file.py:NAME' / 'package.module:NAME'.",
)
@click.option("--steps", type=POS, default=1000, show_default=True, help="Sequence length l.")
@click.option(
    "--snaps",
    type=POS,
    default=31,
    show_default=True,
    help=SNAPS_HELP + " More than --steps is clamped to --steps (and said so).",
)
@click.option(
    "--strategy",
    type=click.Choice(_strategies()),
    default="revolve",
    show_default=True,
    help="torch-checkpoint: torch.utils.checkpoint over --snaps equal segments (the peer).",
)
@click.option(
    "--backend",
    type=click.Choice(["autograd", "torch"]),
    default="autograd",
    show_default=True,
    help="Library that computes the gradient (torch: pip install '.[torch]').",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="torch only: where the gradient is computed.",
)
@click.option(
    "--budget",
    type=BYTES,
    default=None,
    help="Strategy optimal: bytes the schedule may keep in states and tapes (e.g. 8MiB).",
)
@click.option(
    "--costs",
    "costs_file",
    type=click.Path(path_type=Path),
    default=None,
    help="Strategy optimal: plan with these step costs (a JSON costs file, see "
    "docs/planner.md) instead of measuring them in a fresh worker first.",
)
@size_options
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True)
@click.option(
    "--repeats", type=POS, default=1, show_default=True, help="Measured iterations per round."
)
@click.option(
    "--rounds",
    type=POS,
    default=6,
    show_default=True,
    help="Measure every mode this many times, each in a fresh worker, in rotated order; "
    "the slowdown's 95% interval comes from the spread between rounds.",
)
@click.option(
    "--threads", type=POS, default=1, show_default=True, help="BLAS/OpenMP threads in workers."
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
    type=BYTES,
    default=None,
    help="Stop a mode whose RSS exceeds this (e.g. 2GiB) and report it out of memory.",
)
@click.option("--sample-interval", type=SECONDS, default="5ms", show_default=True)
@click.option(
    "--modes",
    default="baseline,normal,checkpointed",
    show_default=True,
    help="Comma-separated subset of baseline, normal, checkpointed (each at most once).",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Result JSON file (default: a new, unique name under results/). An existing file is "
    "never replaced without --force; a link, folder or device never.",
)
@click.option("--force", is_flag=True, help="Allow --out to replace an existing result file.")
@click.option(
    "--retry-oom",
    is_flag=True,
    help="Measure a mode that exceeded --memory-limit again in every round (default: later "
    "rounds skip it, and say so).",
)
@click.option(
    "--precision",
    default=None,
    callback=lambda _ctx, _p, v: None if v is None else parse_fraction(v),
    help="Add rounds after --rounds until the slowdown's 95% interval is within this "
    "(e.g. 3%), up to --max-rounds and --max-time; says when it stopped short.",
)
@click.option("--max-rounds", type=POS, default=30, show_default=True, help="For --precision.")
@click.option(
    "--max-time",
    type=SECONDS,
    default="30m",
    show_default=True,
    help="For --precision: start no new round after measuring this long.",
)
@click.option(
    "--expect-oom",
    multiple=True,
    type=click.Choice(["baseline", "normal", "checkpointed"]),
    help="This mode is meant to exceed --memory-limit (e.g. normal, to show that only the "
    "checkpointed gradient fits): its out-of-memory is the result, exit 0; if it fits, exit 1.",
)
@click.option(
    "--mprof",
    "mprof_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Also write every mode's RSS timeline in memory_profiler's mprof format into this "
    "folder (`mprof plot FILE` draws one).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result document on stdout.")
@output_options
def run(
    model, steps, snaps, strategy, backend, device, budget, costs_file, hidden, batch, input_,
    output, seed, warmup, repeats, rounds, threads, timeout, memory_limit, sample_interval, modes,
    out, force, retry_oom, precision, max_rounds, max_time, expect_oom, mprof_dir, as_json, quiet,
    verbose, progress_lines,
):  # fmt: skip
    """Measure baseline, normal and checkpointed gradients, each in a fresh process."""
    from ckptbench.launch import CostsError, Interrupted, stop_on_signals
    from ckptbench.render import explain_lines, failure_lines, headline, run_table, warning_lines
    from ckptbench.render.console import mode_progress, stderr_console
    from ckptbench.results import Case, result_to_dict
    from ckptbench.runner import Precision, run_case
    from ckptbench.workloads import Sizes, load_workload

    mode_list = _parse_modes(modes)
    model = _relative_model(model)
    if expect_oom and memory_limit is None:
        raise InputError("--expect-oom needs --memory-limit")
    if set(expect_oom) - {m.value for m in mode_list}:
        raise InputError("--expect-oom names a mode that --modes does not run")
    try:
        case = Case(
            model=model, steps=steps, snaps=snaps, strategy=strategy, backend=backend,
            device=device, budget_bytes=budget, hidden=hidden, batch=batch, input=input_,
            output=output, seed=seed,
            warmup=warmup, repeats=repeats, rounds=rounds, threads=threads, timeout_s=timeout,
            memory_limit_bytes=memory_limit, sample_interval_s=sample_interval,
        )  # fmt: skip
        case, notes = case.effective()
        _check_size(case)
        if backend == "autograd":
            load_workload(model, Sizes(**case.sizes()))
        else:
            _check_torch(case)
        if strategy == "optimal" and backend != "autograd":
            raise InputError("strategy 'optimal' runs on the autograd backend only (so far)")
        costs = _read_costs(costs_file, case.steps) if costs_file else None
        target = None
        if precision is not None:
            target = Precision(precision, max(max_rounds, case.rounds), max_time)
    except ValueError as err:
        raise InputError(str(err)) from None
    out = out or _default_out(model)
    _check_out(out, force)
    if mprof_dir is not None:
        try:
            mprof_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"--mprof {mprof_dir}: {err.strerror or err}") from None

    err_console = stderr_console()
    for note in notes if not quiet else ():
        err_console.print(f"[yellow]note[/yellow] {note}", highlight=False)
    progress_cb, stop = mode_progress(
        err_console, mode_list, case, quiet=quiet, verbose=verbose, lines=progress_lines
    )
    code = None
    try:
        with stop_on_signals():
            result = run_case(
                case,
                out_path=out,
                replace_out=force,
                progress=progress_cb,
                modes=mode_list,
                costs=costs,
                retry_oom=retry_oom,
                precision=target,
            )
    except CostsError as err:
        stop()
        click.echo(f"ckptbench: {err}", err=True)
        sys.exit(EXIT_FAILED)
    except (Interrupted, KeyboardInterrupt) as err:
        result = getattr(err, "result", None)  # None: stopped while measuring step costs
        code = 128 + getattr(err, "signum", 2)
        measured = result is not None and result.modes
        where = f"what was measured is saved in {out}" if measured else "nothing measured"
        err_console.print(
            f"[red]interrupted[/red] by {err or 'Ctrl-C'}: workers stopped; {where}",
            highlight=False,
        )
        if result is None:
            stop()
            sys.exit(code)
    finally:
        stop()
    if as_json:
        click.echo(json.dumps(result_to_dict(result), indent=1))
    else:
        console = _stdout_console()
        console.print(run_table(result))
        console.print(headline(result), highlight=False)
        for line in explain_lines(result) if not quiet else ():
            console.print(line, highlight=False)
        if not quiet and result.modes:
            console.print(f"[dim]saved {out}[/dim]")
    if mprof_dir is not None:
        _write_mprof([result], mprof_dir, quiet)
    for line in warning_lines(result):
        err_console.print(f"[yellow]warning[/yellow] {line}", highlight=False)
    expected, unmet = _expected_oom(result, expect_oom)
    for line in failure_lines(result):
        if not any(line.startswith(f"{m}:") for m in expected):
            err_console.print(f"[red]failed[/red] {line}", highlight=False)
    for m in expected:
        err_console.print(f"expected: {m} exceeded the memory limit, as --expect-oom said")
    for m in unmet:
        err_console.print(
            f"[red]failed[/red] {m} was expected to exceed --memory-limit but did not",
            highlight=False,
        )
    if code is None:
        others_ok = all(m.ok for m in result.modes if m.mode.value not in expected)
        code = EXIT_OK if others_ok and not unmet else EXIT_FAILED
    sys.exit(code)


def _expected_oom(result, expect_oom) -> tuple[list[str], list[str]]:
    """(modes that ran out of memory as --expect-oom said, expected modes that did not)."""
    from ckptbench.results import Mode, Status

    hit, unmet = [], []
    for name in expect_oom:
        m = result.mode(Mode(name))
        if m is not None and m.status is Status.OUT_OF_MEMORY:
            hit.append(name)
        else:
            unmet.append(name)
    return hit, unmet


def _check_torch(case) -> None:
    """One line and exit 2 when the torch backend cannot run this case here."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise InputError("--backend torch needs PyTorch: pip install 'ckptbench[torch]'")


@cli.command(
    epilog="Example:\n\n  ckptbench profile --model lstm --steps 50 --snaps 5 --mode normal"
)
@click.option("--model", default="lstm", show_default=True, help="As for run.")
@click.option("--steps", type=POS, default=50, show_default=True, help="Sequence length l.")
@click.option("--snaps", type=POS, default=5, show_default=True, help=SNAPS_HELP)
@click.option(
    "--strategy", type=click.Choice(["revolve", "uniform", "store-all"]), default="revolve"
)
@click.option(
    "--mode",
    type=click.Choice(["checkpointed", "normal", "baseline"]),
    default="checkpointed",
    show_default=True,
)
@size_options
@click.option("--top", type=POS, default=25, show_default=True, help="Lines to show.")
@click.option("--json", "as_json", is_flag=True, help="Print every row as JSON.")
@output_options
def profile(model, steps, snaps, strategy, mode, hidden, batch, input_, output, seed, top,
            as_json, quiet, verbose, progress_lines):  # fmt: skip
    """Where one gradient's memory goes, line by line (memory_profiler's line profiler).

    Runs one gradient in a fresh process under memory_profiler's LineProfiler over the
    workload's step/post/loss and the executor's loops, and prints the lines that hold the
    most memory: what each line of a step keeps on autograd's tape.
    """
    import subprocess

    from ckptbench.launch import child_env
    from ckptbench.render.console import stdout_console
    from ckptbench.render.profile import profile_lines, profile_table
    from ckptbench.results import Case

    try:
        case = Case(
            model=model, steps=steps, snaps=snaps, strategy=strategy, hidden=hidden,
            batch=batch, input=input_, output=output, seed=seed,
        )  # fmt: skip
        case, _ = case.effective()
        _check_size(case)
    except ValueError as err:
        raise InputError(str(err)) from None
    job = {
        "model": model, "steps": case.steps, "snaps": case.snaps, "mode": mode,
        "strategy": strategy, "hidden": hidden, "batch": batch, "input": input_,
        "output": output, "seed": seed,
    }  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "ckptbench.lineprofile"],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=child_env(case),
    )
    doc = None
    for line in reversed(proc.stdout.strip().splitlines()):
        with contextlib.suppress(json.JSONDecodeError):
            doc = json.loads(line)
            break
    if not isinstance(doc, dict) or not doc.get("ok"):
        why = doc.get("error") if isinstance(doc, dict) else proc.stderr.strip()[-300:]
        click.echo(f"ckptbench: profiling failed: {why}", err=True)
        sys.exit(EXIT_FAILED)
    if as_json:
        click.echo(json.dumps(doc, indent=1))
        return
    console = stdout_console()
    console.print(profile_table(doc, top))
    for line in profile_lines(doc):
        console.print(line, highlight=False)


# ---------------------------------------------------------------------- sweep / compare / check

#: Sweeps over this many cells, or about this many hours, ask before they start.
CONFIRM_CELLS, CONFIRM_HOURS = 200, 2.0


def parse_fraction(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    t = str(text).strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a fraction like 5% or 0.05") from None
    if not 0 <= value < 10:
        raise click.BadParameter(f"{text!r} is out of range")
    return value


class _Fraction(click.ParamType):
    name = "FRACTION"

    def convert(self, value, param, ctx):
        return value if isinstance(value, float) else parse_fraction(value)


FRACTION = _Fraction()


@cli.command(
    epilog="Example:\n\n  ckptbench sweep configs/lstm.toml --out results/lstm\n\n"
    "  ckptbench sweep configs/lstm.toml --out results/lstm --resume   # after a crash"
)
@click.argument("config", type=click.Path(path_type=Path))
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Folder (results/<name>)."
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
@output_options
def sweep(
    config: Path, out: Path | None, resume: bool, retry_failed: bool, dask_address, yes: bool,
    quiet: bool, verbose: bool, progress_lines: bool,
):  # fmt: skip
    """Run every cell of a TOML config, saving each result the moment it is measured."""
    from ckptbench.config import load_config
    from ckptbench.render.console import stderr_console
    from ckptbench.store import open_folder
    from ckptbench.sweep import run_sweep
    from ckptbench.sweep_progress import estimated_seconds

    try:
        cfg = load_config(config)
    except ValueError as err:
        raise InputError(str(err)) from None
    out = out or Path("results") / cfg.name
    try:
        open_folder(out)
    except ValueError as err:
        raise InputError(f"--out {err}") from None
    console = stderr_console()
    try:
        for case in cfg.cases:
            _check_size(case)
    except InputError as err:
        raise InputError(f"{config}: {err.message}") from None
    hours = sum(estimated_seconds(c) for c in cfg.cases) / 3600
    for note in cfg.notes if not quiet else ():
        console.print(f"[dim]{note}[/dim]", highlight=False)
    if not quiet:
        console.print(
            f"sweep {cfg.name}: {len(cfg.cases)} cells, roughly {hours:.1f} h -> {out}",
            highlight=False,
        )
    if (len(cfg.cases) > CONFIRM_CELLS or hours > CONFIRM_HOURS) and not yes:
        question = f"{len(cfg.cases)} cells, roughly {hours:.1f} h: run them?"
        if not sys.stdin.isatty():
            raise InputError(f"{config}: {question[:-15]}; pass --yes to run them")
        if not click.confirm(question, err=True):
            raise InputError("sweep not started")
    show_iterations = not quiet and (verbose or progress_lines or console.is_terminal)

    def progress(event):
        if quiet:
            return
        if event.event in ("cell-start", "cell-done") or (
            event.event == "mode-iteration" and show_iterations
        ):
            console.print(event.line(), highlight=False)

    try:
        outcome = run_sweep(
            cfg,
            out,
            resume=resume,
            retry_failed=retry_failed,
            progress=progress,
            dask_address=dask_address,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    for line in outcome.summary_lines():
        click.echo(line)
    sys.exit(outcome.exit_code)


@cli.command(
    epilog="Example:\n\n  ckptbench compare results/lstm --format html -o report.html\n\n"
    "  ckptbench compare results/after --against results/before --format markdown"
)
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--against",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Results measured before (files or sweep folders); repeatable.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "markdown", "html", "csv"]),
    default="table",
    show_default=True,
)
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=None)
@click.option(
    "--min-effect",
    type=FRACTION,
    default="10%",
    show_default=True,
    help="Time is slower/faster when the 95% interval of new/old lies beyond 1 +/- this.",
)
@click.option("--any-host", is_flag=True, help="Pair cells measured on different hosts.")
@click.option(
    "--plots",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Also write the plots as PNG files into this folder (e.g. for a README).",
)
@click.option(
    "--mprof",
    "mprof_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Also write every mode's RSS timeline in memory_profiler's mprof format into this "
    "folder (`mprof plot FILE` draws one).",
)
@output_options
def compare(
    results, against, fmt, output, min_effect, any_host, plots, mprof_dir, quiet, verbose,
    progress_lines,
):  # fmt: skip
    """Tabulate results; with --against, memory deltas and time ratios with intervals."""
    from ckptbench.analysis import compare as compare_results
    from ckptbench.render import render
    from ckptbench.render.console import stdout_console
    from ckptbench.results import write_atomic
    from ckptbench.store import load_results

    try:
        after = load_results(results)
        before = load_results(against) if against else None
        comparison = compare_results(after, before, min_effect=min_effect, match_host=not any_host)
        if fmt == "html":
            from ckptbench.render.html import render_html

            text = render_html(comparison, verdicts=_expect_verdicts(after, results))
        else:
            text = render(comparison, fmt, width=stdout_console().width)
    except ValueError as err:
        raise InputError(str(err)) from None
    figures = []
    if plots is not None:
        from ckptbench.render.plots import plot_files

        figures = plot_files(after, before or (), plots)
    targets = [p for p, _ in figures] + ([output] if output is not None else [])
    _refuse_duplicates(targets)
    for path, fig in figures:
        _write_bytes(path, fig, "--plots")
        if not quiet:
            click.echo(f"wrote {path}", err=True)
    if mprof_dir is not None:
        _write_mprof(after, mprof_dir, quiet)
    if output is not None:
        try:
            write_atomic(output, text)
        except OSError as err:
            raise InputError(f"-o {output}: cannot write ({err.strerror or err})") from None
        if not quiet:
            click.echo(f"wrote {output}")
    else:
        click.echo(text)


def _write_mprof(results, folder: Path, quiet: bool = False) -> None:
    """--mprof: the RSS timelines as mprof files; one line and exit 2 if they cannot be."""
    import shlex

    from ckptbench.render.mprof import export_mprof

    try:
        for path in export_mprof(results, folder, shlex.join(["ckptbench", *sys.argv[1:]])):
            if not quiet:
                click.echo(f"wrote {path}", err=True)
    except (OSError, ValueError) as err:
        raise InputError(f"--mprof {folder}: {getattr(err, 'strerror', None) or err}") from None


def _expect_verdicts(after, paths):
    """The gate's [expect] checks of the results, for the report (None without a manifest)."""
    from ckptbench.gate import check as gate_check
    from ckptbench.store import expectations_from_manifests

    expect = expectations_from_manifests(paths)
    return gate_check(after, expect=expect) if expect is not None else None


def _refuse_duplicates(paths) -> None:
    """Writing one file twice in one command would lose the first: bad input, exit 2."""
    seen: dict = {}
    for p in paths:
        real = Path(p).resolve()
        if real in seen:
            raise InputError(f"{p}: this command would write the file twice; nothing written")
        seen[real] = p


def _write_bytes(path: Path, data: bytes, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as err:
        raise InputError(f"{option} {path}: cannot write ({err.strerror or err})") from None


@cli.command(
    epilog="Example:\n\n  ckptbench sweep configs/ci.toml --out ci && ckptbench check ci\n\n"
    "  ckptbench check results/new --against results/main --time-tolerance 25%"
)
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--against",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Reference results to gate against; repeatable.",
)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help="Take [expect] from this config (default: the sweep manifest's).",
)
@click.option("--memory-tolerance", type=FRACTION, default="5%", show_default=True)
@click.option("--memory-floor", type=BYTES, default="256KiB", show_default=True)
@click.option(
    "--time-tolerance",
    type=FRACTION,
    default=None,
    help="Also gate time: fail when the 95% interval of new/old time lies above 1 + this "
    "(the estimator run reports). Off by default: time is noisy.",
)
@click.option("--any-host", is_flag=True, help="Pair cells measured on different hosts.")
@click.option(
    "--summary",
    type=click.Path(path_type=Path),
    default=None,
    help="Append the markdown summary here (done by itself when $GITHUB_STEP_SUMMARY is set).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown"]),
    default="text",
    show_default=True,
    help="How the verdict is printed: plain lines, or markdown for a CI summary.",
)
@click.option(
    "--junit",
    type=click.Path(path_type=Path),
    default=None,
    help="Also write JUnit XML here (one testcase per check) for CI test reports.",
)
@output_options
def check(results, against, config, memory_tolerance, memory_floor, time_tolerance, any_host,
          summary, fmt, junit, quiet, verbose, progress_lines):  # fmt: skip
    """CI gate: exit 1 on a memory regression, a failed cell or an unmet expectation."""
    from ckptbench.gate import run_check
    from ckptbench.render import check_junit, check_markdown, check_text

    try:
        report = run_check(
            results,
            against=against or None,
            config=config,
            memory_tolerance=memory_tolerance,
            memory_floor_bytes=memory_floor,
            time_tolerance=time_tolerance,
            match_host=not any_host,
        )
    except ValueError as err:
        raise InputError(str(err)) from None
    md = check_markdown(report)
    click.echo(md if fmt == "markdown" else check_text(report, quiet=quiet))
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    appends = [(summary, "--summary")] if summary is not None else []
    if step_summary and (summary is None or Path(step_summary).resolve() != summary.resolve()):
        appends.append((Path(step_summary), "$GITHUB_STEP_SUMMARY"))
    problems = []
    for path, what in appends:
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(md + "\n")
        except OSError as err:
            problems.append(f"{what} {path}: cannot write ({err.strerror or err})")
    if junit is not None:
        from ckptbench.results import write_atomic

        try:
            write_atomic(junit, check_junit(report))
        except OSError as err:
            problems.append(f"--junit {junit}: cannot write ({err.strerror or err})")
    for problem in problems:
        click.echo(f"ckptbench: error: {problem}", err=True)
    # a failed gate stays exit 1 whatever else went wrong; a write error alone is exit 2
    if report.exit_code != EXIT_OK:
        sys.exit(report.exit_code)
    sys.exit(EXIT_USAGE if problems else EXIT_OK)


# ---------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; usage errors become one line on stderr with exit status 2."""
    try:
        rv = cli.main(args=argv, prog_name="ckptbench", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("ckptbench: aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        click.echo(f"ckptbench: error: {e.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        click.echo(f"ckptbench: error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)


if __name__ == "__main__":
    main()
