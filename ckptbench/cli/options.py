"""Options shared by the commands: the workload's sizes, -q/-v/--progress, file and folder
names, and the one-line input error (exit status 2). The value types (sizes, durations,
fractions) are :mod:`ckptbench.cli.values`'."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import click

from ckptbench.backends.registry import DEFAULT_BACKEND, backend_names, device_aliases
from ckptbench.backends.registry import spec as backend_spec
from ckptbench.cli.readout import READOUT
from ckptbench.cli.values import SECONDS, SuggestingChoice, WholeRange
from ckptbench.results.inputs import NOT_A_FOLDER, file_with_slash, typed_path
from ckptbench.results.schema import Case
from ckptbench.schedules import get_strategy, strategy_names

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def one_line(text: str) -> str:
    """``text`` on one line: each unprintable character (a newline in a file name) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


class InputError(click.ClickException):
    """Bad input: one line on stderr (:func:`one_line`), exit status 2."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return one_line(super().format_message())


def timeout_option(help_text: str):
    """``--timeout`` (default 15 minutes, the case's): how long a worker may take."""
    return click.option("--timeout", type=SECONDS, default="15m", show_default=True,
                        help=help_text)  # fmt: skip


#: ``file_arg(dash=STDOUT)``: '-' writes to stdout, as hyperfine's and pyperf's '-' does.
STDOUT = "stdout"
#: ``_PathName(dash=FOLDER)`` (:func:`folder_arg`): '-' is refused, no folder is stdout.
FOLDER = "folder"


class _PathName(click.Path):
    """A file or folder name; an empty one (``--out ""``, which the OS would read as the
    current folder) is refused, and so is a name ending in '/' where a file is written
    (``--out newdir/`` wrote a file named ``newdir``: pathlib drops the slash). The path
    keeps the name as typed for errors to say (``results.files.said_path``). ``dash``: what
    '-' means, :data:`STDOUT` (the option's value is None: as without it) or why it is
    refused, where stdout carries the command's own output; ``./-`` names a file '-'; or
    :data:`FOLDER`, refused: an output folder. ``reads``: an input, where a file's name
    followed by '/' is refused, as the shell and every Unix tool refuse it ('Not a
    directory'): pathlib dropped the slash and the file was read."""

    def __init__(self, *, example: str | None = None, dash: str | None = None,
                 reads: bool = False, **kwargs) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.example = example  # a file option: how a file in that folder is named
        self.dash = dash
        self.reads = reads

    def convert(self, value, param, ctx):
        if value == "-" and self.dash == STDOUT:
            return None
        if value == "-" and self.dash == FOLDER:
            self.fail("'-' is not a folder ckptbench writes to (nor stdout): name the folder; "
                      "./- names a folder called '-'", param, ctx)  # fmt: skip
        if value == "-" and self.dash is not None:
            self.fail(f"'-' is not stdout here: {self.dash}; ./- names a file called '-'",
                      param, ctx)  # fmt: skip
        if isinstance(value, str) and not value.strip():
            self.fail("an empty name is not a file or folder", param, ctx)
        if self.example and isinstance(value, str) and value.endswith(("/", os.sep)):
            named = f"{value + self.example!r}"
            self.fail(f"{value!r} names a folder (it ends with '/'), and this option writes a "
                      f"file: name the file, e.g. {named}", param, ctx)  # fmt: skip
        if self.reads and isinstance(value, str) and file_with_slash(value):
            self.fail(f"{value!r} {NOT_A_FOLDER} (name the file {value.rstrip('/' + os.sep)!r})",
                      param, ctx)  # fmt: skip
        path = super().convert(value, param, ctx)
        return typed_path(value) if isinstance(value, str) and isinstance(path, Path) else path


def path_arg(**kwargs) -> click.Path:
    """The type of every input file or folder option: a :class:`pathlib.Path`, never empty,
    never a file's name followed by '/'."""
    return _PathName(path_type=Path, reads=True, **kwargs)


def folder_arg(**kwargs) -> click.Path:
    """The type of an option naming a folder ckptbench writes into (``--plots``, ``--mprof``,
    ``sweep --out``): :func:`path_arg`, and '-' refused (it made a folder named '-');
    ``./-`` names that folder."""
    return _PathName(path_type=Path, dash=FOLDER, **kwargs)


def file_arg(example: str, *, dash: str, **kwargs) -> click.Path:
    """The type of an option naming a file ckptbench writes: :func:`path_arg`, and a name
    ending in '/' is refused (``example``: a file name to suggest in that folder); ``dash``:
    :data:`STDOUT` where '-' means stdout, or why '-' is refused."""
    return _PathName(path_type=Path, example=example, dash=dash, **kwargs)


POS = WholeRange(min=1)
#: A count that may be 0 (--warmup, --seed).
NATURAL = WholeRange(min=0)


class GroupedCommand(click.Command):
    """A command whose --help lists its options in named sections, in order.

    Click's own help formatter does it (``formatter.section`` + ``write_dl``); a command sets
    ``sections`` (title -> option names, as the function's parameter names). Options in no
    section are listed last, under "Other options"."""

    def __init__(self, *args, sections: dict[str, tuple[str, ...]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.sections = sections or {}

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        placed: set[str | None] = set()
        for title, names in self.sections.items():
            rows = [records[n] for n in names if records.get(n)]
            placed.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        rest = [r for n, r in records.items() if n not in placed and r]
        if rest:
            with formatter.section("Other options" if self.sections else "Options"):
                formatter.write_dl(rest)


class ModelOption(click.Option):
    """``--model``, whose help lists the built-ins of the workload registry, read when the
    help is shown: the workloads package (it imports autograd) is not loaded at the command
    line's start."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        from ckptbench.workloads.registry import model_help

        self.help = model_help()
        return super().get_help_record(ctx)


def quiet_option(func):
    """-q/--quiet: only results, warnings and failures."""
    return click.option("-q", "--quiet", is_flag=True, help="Only results, warnings and failures.")(
        func
    )


def output_options(func):
    """-q/--quiet, -v/--verbose and --progress: the commands that measure. --quiet with
    either of the others is one line and exit 2 (not one of them silently winning)."""

    @functools.wraps(func)
    def checked(*args, **kwargs):
        louder = [o for o, k in (("--verbose", "verbose"), ("--progress", "progress_lines"))
                  if kwargs.get(k)]  # fmt: skip
        if kwargs.get("quiet") and louder:
            raise InputError(f"--quiet and {louder[0]} ask for opposite things: give one")
        return func(*args, **kwargs)

    command = click.option(
        "--progress",
        "progress_lines",
        is_flag=True,
        help="Progress lines (iteration k of n, elapsed, ETA) even when stderr is not a terminal.",
    )(checked)
    command = click.option(
        "-v", "--verbose", is_flag=True, help="More detail: every iteration, every note."
    )(command)
    return quiet_option(command)


#: --mprof DIR on the commands that have RSS timelines (run, compare).
mprof_option = click.option(
    "--mprof",
    "mprof_dir",
    type=folder_arg(file_okay=False),
    default=None,
    help="Also write every mode's RSS timeline in memory_profiler's mprof format into this "
    "folder (`mprof plot FILE` draws one).",
)


def against_option(help_text: str):
    """--against FILE_OR_FOLDER (repeatable): the reference of compare and check."""
    return click.option("--against", multiple=True, type=path_arg(), help=help_text)


#: --any-host: pair cells measured on different hosts (compare, check).
any_host_option = click.option(
    "--any-host", is_flag=True, help="Pair cells measured on different hosts."
)


#: --backend: the registered backends (ckptbench.backends.registry).
backend_option = click.option(
    "--backend",
    type=SuggestingChoice(backend_names()),
    default=DEFAULT_BACKEND,
    show_default=True,
    help="Library that computes the gradient (torch: pip install '.[torch]').",
)


#: Other names of a device, declared by the backends (JAX calls an NVIDIA GPU "gpu").
DEVICE_ALIASES = device_aliases()


def _device(ctx: click.Context, _param: click.Parameter, value: str) -> str:
    ctx.meta["ckptbench.device_typed"] = value  # messages say what the user typed
    return DEVICE_ALIASES.get(value, value)


def device_words(ctx: click.Context, device: str, text: str) -> str:
    """``text`` (a message about ``device``) in the user's word for it: '--device gpu', not
    the 'cuda' the alias resolved to."""
    typed = ctx.meta.get("ckptbench.device_typed", device)
    if typed == device:
        return text
    text = text.replace(f"--device {device}", f"--device {typed}")
    text = text.replace(f"; {device} needs", f"; {typed} needs")
    return text.replace(f"device {device!r}", f"device {typed!r} (that is, {device!r})")


#: --device: every device some backend runs on; Case validation pairs it with the backend.
device_option = click.option(
    "--device",
    type=SuggestingChoice(
        sorted({d for n in backend_names() for d in backend_spec(n).devices} | set(DEVICE_ALIASES))
    ),
    default="cpu",
    show_default=True,
    callback=_device,
    help="Where the gradient is computed (cuda, or gpu: a GPU, with torch or jax; run then "
    "quotes device memory beside host RSS).",
)


def check_backend(case: Case) -> None:
    """One line and exit 2 when the case's backend, or the package its strategy needs (a
    framework's own checkpointing), cannot be imported here."""
    reason = backend_spec(case.backend).available() or get_strategy(case.strategy).missing()
    if reason is not None:
        raise InputError(reason)


#: A case's defaults: `run` measures a cell the way `sweep` does unless told otherwise.
CASE_DEFAULTS = Case()


SNAPS_HELP = (
    "Snapshot slots, INCLUDING the one holding the initial state x_0 "
    "(the Revolve/pyrevolve convention)."
)


#: The strategies `schedule` and `profile` take: action streams set by snaps alone.
SNAPS_STREAMS = [n for n in strategy_names(ours=True) if get_strategy(n).stream is not None]


def strategy_help(names: list[str]) -> str:
    """One line per strategy from the registry, for --help."""
    return "; ".join(f"{n}: {get_strategy(n).help}" for n in names) + "."


def steps_option(default: int):
    """--steps: the sequence length (a stack's depth), with ``default``."""
    return click.option(
        "--steps",
        type=POS,
        default=default,
        show_default=True,
        help="Sequence length l (a layer stack: its depth).",
    )


def size_options(func):
    """--hidden, --batch, --input, --output and --seed: the workload's sizes."""
    options = [
        click.option(
            "--hidden",
            type=POS,
            default=256,
            show_default=True,
            help="Hidden state size (a layer stack: its width; docs/layers.md).",
        ),
        click.option(
            "--batch",
            type=POS,
            default=16,
            show_default=True,
            help="Sequences (samples) per batch.",
        ),
        click.option(
            "--input",
            "input_",
            type=POS,
            default=32,
            show_default=True,
            help="Input features per step (a stack: of x_0; cnn-stack: the image side).",
        ),
        click.option(
            "--output",
            type=READOUT,
            default=1,
            show_default=True,
            help="Readout size per step. Its cotangent (steps x batch x output) is needed by "
            "every gradient method and grows with steps (a stack: its last layer's width).",
        ),
        click.option(
            "--seed",
            type=NATURAL,
            default=0,
            show_default=True,
            help="Seed of the parameters and inputs (one seed: one loss on every backend).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def given_sizes(ctx: click.Context) -> set[str]:
    """The size options (hidden, batch, input, output) given on the command line or in the
    environment: the others take a plug-in factory's own defaults."""
    options = {"hidden": "hidden", "batch": "batch", "input": "input_", "output": "output"}
    return {
        name
        for name, param in options.items()
        if ctx.get_parameter_source(param) not in (None, click.core.ParameterSource.DEFAULT)
    }


def numerics_options(func):
    """--dtype and --executor: what the gradient computes in, and how our schedules run."""
    from ckptbench.results.schema import DTYPES, EXECUTORS

    func = click.option(
        "--executor",
        type=SuggestingChoice(EXECUTORS),
        default=None,
        help="How our schedules run. --backend jax: compiled (one XLA program running the "
        "action table; the default on the CPU) or engine (the shared interpreter dispatching "
        "compiled step pieces, no host round trip inside a gradient; the default on a GPU). "
        "--backend torch: engine (the default: a backward call per taped step) or one-call "
        "(the whole gradient one backward pass of autograd, steps re-run from saved-tensor "
        "hooks). Recorded in the result; a framework's own checkpointing runs none of ours.",
    )(func)
    return click.option(
        "--dtype",
        type=SuggestingChoice(DTYPES),
        default="float64",
        show_default=True,
        help="Floating-point type of the workload (torch and jax cast to it; autograd's "
        "built-in models: float64 only, a plug-in: its own arrays' dtype, docs/plugins.md). "
        "The gradient check's tolerance follows it (docs/gpu.md).",
    )(func)


def stdout_console():
    from ckptbench.render.console import stdout_console

    return stdout_console()


def relative_model(model: str) -> str:
    """A file plug-in given by an absolute path is recorded relative to the current folder
    (results never hold absolute paths of this machine)."""
    target, sep, name = model.rpartition(":")
    if sep and os.path.isabs(target) and os.path.isfile(target):
        return f"{os.path.relpath(target)}:{name}"
    return model


def format_asked(as_json: bool, fmt: str) -> str:
    """The output format of ``--json`` and ``--format`` (``--json`` is ``--format json``);
    InputError when both are given and disagree, rather than one silently winning."""
    given = click.get_current_context().get_parameter_source("fmt")
    if as_json and given is not click.core.ParameterSource.DEFAULT and fmt != "json":
        raise InputError(f"--json is --format json: give one of --json and --format {fmt}")
    return "json" if as_json else fmt
