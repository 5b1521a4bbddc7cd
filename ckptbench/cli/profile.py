"""``ckptbench profile``: one gradient's memory line by line."""

from __future__ import annotations

import contextlib
import json
import sys

import click

from ckptbench.cli.options import (
    EXIT_FAILED,
    POS,
    SNAPS_HELP,
    SNAPS_STREAMS,
    InputError,
    size_options,
)
from ckptbench.results import Case


@click.command(
    epilog="Example:\n\n  ckptbench profile --model lstm --steps 50 --snaps 5 --mode normal"
)
@click.option("--model", default="lstm", show_default=True, help="As for run.")
@click.option("--steps", type=POS, default=50, show_default=True, help="Sequence length l.")
@click.option("--snaps", type=POS, default=5, show_default=True, help=SNAPS_HELP)
@click.option("--strategy", type=click.Choice(SNAPS_STREAMS), default="revolve", show_default=True)
@click.option(
    "--mode",
    type=click.Choice(["checkpointed", "normal", "baseline"]),
    default="checkpointed",
    show_default=True,
)
@size_options
@click.option("--top", type=POS, default=25, show_default=True, help="Lines to show.")
@click.option("--json", "as_json", is_flag=True, help="Print every row as JSON.")
def profile(model, steps, snaps, strategy, mode, hidden, batch, input_, output, seed, top,
            as_json):  # fmt: skip
    """Where one gradient's memory goes, line by line (memory_profiler's line profiler).

    Runs one gradient in a fresh process under memory_profiler's LineProfiler over the
    workload's step/post/loss and the executor's loops, and prints the lines that hold the
    most memory: what each line of a step keeps on autograd's tape.
    """
    import subprocess

    from ckptbench.launch import child_env
    from ckptbench.render.console import stdout_console
    from ckptbench.render.profile import profile_lines, profile_table

    try:
        case = Case(
            model=model, steps=steps, snaps=snaps, strategy=strategy, hidden=hidden,
            batch=batch, input=input_, output=output, seed=seed,
        )  # fmt: skip
        case, _ = case.effective()
        case.check_fits_memory()
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
