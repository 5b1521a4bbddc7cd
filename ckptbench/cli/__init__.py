"""The command line: one module per command, shared options defined once
(docs/architecture.md). The only package that prints or exits.

Exit status: 0 ok, 1 a failed measurement or a regression, 2 bad usage or input, 74 the
output could not be written (a full disk, stdout closed), 141 the reader of stdout went away
(a pipe closed early).

Not an entry point of its own: the console script and ``python -m ckptbench`` run
:func:`main` through :mod:`ckptbench.entry`, whose guard gives a Ctrl-C its one line and
exit status 130 wherever it lands (this module run as a script had none).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys

import click

from ckptbench import __version__
from ckptbench.cli import check, compare, plan, profile, run, schedule, sweep
from ckptbench.cli.options import EXIT_OK, EXIT_USAGE, InputError, one_line
from ckptbench.cli.outputs import remove_made_folders, say_made_folders
from ckptbench.cli.readout import misread_output_option

#: stdout's reader went away (`ckptbench schedule --actions | head -1`): 128 + SIGPIPE, as a
#: process that SIGPIPE ends reports it; click says nothing and exited 1, a failure's status.
EXIT_BROKEN_PIPE = 141
#: the output could not be written (a full disk, /dev/full, an I/O error): sysexits' EX_IOERR,
#: neither a failure's 1 nor bad input's 2
EXIT_IO_ERROR = 74
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})

#: The commands that start workers (their stop signals are told apart by sender).
STARTS_WORKERS = frozenset({"run", "plan", "sweep", "profile"})

#: click >= 8.2 raises this for a group called without a command (8.1 printed the help)
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


#: The commands as ``ckptbench --help`` lists them: in the order a user meets them, each in
#: a line that an 80-column terminal shows whole (click cuts a longer one with "...").
COMMAND_MAP = {
    "run": "Measure one case: baseline, normal, checkpointed (start here).",
    "plan": "The fastest schedule within a byte budget, predicted.",
    "schedule": "A schedule's counts and actions, from formulas; measures nothing.",
    "profile": "One gradient's memory, line by line.",
    "sweep": "Measure every cell of a TOML config, saved cell by cell.",
    "compare": "Tables or an HTML report (plots) from result files.",
    "check": "CI gate: exit 1 on a regression or an unmet [expect].",
}

_EPILOG = """\b
Example: a first look (about a minute), then its report as a page with plots:
  ckptbench run --model lstm --steps 300 --snaps 8 --rounds 3
  ckptbench compare results/run-lstm-*.json --format html -o report.html

\b
Every option of a command: ckptbench COMMAND --help
Docs: README.md; docs/usage.md (files, reports, CI), docs/plugins.md (your model)."""


class _Aborted(Exception):
    """A Ctrl-C that no command handled, carried past click, which wrote a blank line to
    stderr before its own ``Abort`` (two lines where every other stop says one)."""


class _Commands(click.Group):
    """The command group; a pipe closed early ends it with :data:`EXIT_BROKEN_PIPE` before
    click's own handling (exit 1, a failure's status) sees it. ``--help`` lists the
    commands in :data:`COMMAND_MAP`'s order."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        known = [name for name in COMMAND_MAP if name in self.commands]
        return known + sorted(set(self.commands) - set(known))

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """The command, and for one that starts workers numpy imported first with the stop
        signals blocked (before its options parse: ``--format`` reads the renderers, which
        import numpy), so no numpy thread takes a signal a worker sent
        (``ckptbench.measure.senders``)."""
        name, cmd, rest = super().resolve_command(ctx, args)
        if name in STARTS_WORKERS:
            from ckptbench.measure.senders import import_blocked

            import_blocked()
        return name, cmd, rest

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise _Aborted from None
        except InputError:  # refused: no empty folder of its outputs left behind
            remove_made_folders(ctx)
            raise
        except BrokenPipeError:
            _quiet_stdout()
            raise SystemExit(EXIT_BROKEN_PIPE) from None
        except OSError as err:  # stdout on a full disk: one line, not a traceback
            if err.errno == errno.ENAMETOOLONG:  # a name typed past the system's limit
                remove_made_folders(ctx)
                click.echo(one_line(f"ckptbench: error: {_too_long(err)}"), err=True)
                raise SystemExit(EXIT_USAGE) from None
            if err.errno not in _WRITE_ERRNOS:
                raise
            _quiet_stdout()
            where = f" {err.filename}" if err.filename else " the output"
            message = f"ckptbench: error: cannot write{where} ({err.strerror})"
            click.echo(one_line(message), err=True)
            raise SystemExit(EXIT_IO_ERROR) from None
        finally:  # kept (not refused): the folders made for its outputs, said if not yet
            say_made_folders(ctx)


def _too_long(err: OSError) -> str:
    """A file name past the system's limit (255 bytes a name, 4096 a path), as bad input:
    pathlib's ``exists``/``is_dir`` raise ENAMETOOLONG where ``os.path``'s say False, and a
    result folder, ``--against``, ``--out`` or ``--mprof`` so named ended in a traceback."""
    from ckptbench.results.files import SHOWN_PATH_CHARS, shown_value

    name = shown_value(os.fsdecode(err.filename), SHOWN_PATH_CHARS) if err.filename else "a name"
    return f"{name}: name too long (a name may have 255 bytes, a path 4096)"


class StdoutClosed(OSError):
    """A write to a standard output that was closed when ckptbench started (``>&-``)."""


class _ClosedStdout(io.TextIOBase):
    """``sys.stdout`` where ckptbench started with file descriptor 1 closed (``ckptbench
    schedule ... >&-``): Python made ``sys.stdout`` None, into which click and rich drop
    every write, so a command whose output was lost exited 0 and said nothing. Every write
    raises :class:`StdoutClosed` (coreutils: 'write error: Bad file descriptor')."""

    encoding = "utf-8"
    errors = "replace"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise StdoutClosed(errno.EBADF, os.strerror(errno.EBADF))


def _guard_closed_stdout() -> None:
    """Where stdout was closed at start, descriptor 1 onto /dev/null (else the next file
    opened took it: a worker's prints would land in it) and ``sys.stdout`` a
    :class:`_ClosedStdout`, so the command's first output line ends it, in one line."""
    if sys.stdout is not None:
        return
    try:
        os.fstat(1)
    except OSError:  # still closed: taken, so no file opened later becomes stdout
        _onto_devnull(1)
    sys.stdout = _ClosedStdout()


def _onto_devnull(target: int) -> None:
    """Descriptor ``target`` onto /dev/null, for writing (where it was free, the open takes it)."""
    fd = os.open(os.devnull, os.O_WRONLY)
    if fd != target:
        os.dup2(fd, target)
        os.close(fd)


def _guard_closed_stderr() -> None:
    """Where stderr was closed at start (``2>&-``), descriptor 2 onto /dev/null: else the
    next file opened took it, and an error line (a worker's, or Python's own) landed in
    that file. ``sys.stderr`` stays None, into which click drops its lines: nothing can be
    said, and the exit status still says what happened. A descriptor 2 open for reading
    only is closed as far as ckptbench can tell (a shell script started with ``2>&-`` opens
    its own file there, and a program it runs inherits it): it goes onto /dev/null too,
    where every line written to it raised EBADF, exit 1 in place of 0 or 2 and the output
    lost."""
    import fcntl

    try:
        flags = fcntl.fcntl(2, fcntl.F_GETFL)
    except OSError:  # closed
        flags = None
    if flags is not None and (sys.stderr is None or flags & os.O_ACCMODE != os.O_RDONLY):
        return
    _onto_devnull(2)


def _quiet_stdout() -> None:
    """stdout onto /dev/null, so the interpreter's flush at exit raises nothing more."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_EPILOG,
)
@click.version_option(__version__, prog_name="ckptbench")
def cli() -> None:
    """Measure what gradient checkpointing costs and saves.

    Runs the same gradient (an RNN, an LSTM, a layer stack or your plug-in) three ways, each
    in a fresh process: baseline
    (forward only), normal (the framework's plain gradient) and checkpointed (our schedules:
    Revolve, a byte-budget planner; or the framework's own checkpointing), on autograd,
    PyTorch or JAX, and prints the memory overhead over baseline, the slowdown and the memory
    savings, with 95% intervals.
    """


cli.add_command(schedule.schedule)
cli.add_command(plan.plan)
cli.add_command(run.run)
cli.add_command(profile.profile)
cli.add_command(sweep.sweep)
cli.add_command(compare.compare)
cli.add_command(check.check)
for _name, _text in COMMAND_MAP.items():
    cli.commands[_name].short_help = _text


def _replace_unencodable() -> None:
    """stdout and stderr write '?' for a character their encoding lacks: under an ASCII or
    Latin-1 locale (``PYTHONIOENCODING=ascii``) run's headline ('—') raised
    UnicodeEncodeError after measuring, a traceback and exit 1."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict":
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors="replace")


def _drop_odd_sizes() -> None:
    """A ``COLUMNS`` or ``LINES`` of digits int() refuses ('²') is dropped: rich and
    :func:`ckptbench.render.console.plain_width` read them with ``isdigit`` and ``int``, and
    the ValueError ended a command with exit 2 and "invalid literal for int()"."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name, "")
        if value.isdigit() and not value.isdecimal():
            del os.environ[name]


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; usage errors become one line on stderr with exit status 2."""
    _guard_closed_stdout()
    _guard_closed_stderr()
    _replace_unencodable()
    _drop_odd_sizes()
    try:
        rv = cli.main(args=argv, prog_name="ckptbench", standalone_mode=False)
    except StdoutClosed as err:  # the output was lost: no success, as coreutils says it
        click.echo(f"ckptbench: error: cannot write the output ({err.strerror}: standard "
                   "output is closed)", err=True)  # fmt: skip
        sys.exit(EXIT_IO_ERROR)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except (click.exceptions.Abort, _Aborted):
        click.echo("ckptbench: aborted", err=True)
        sys.exit(130)
    except click.UsageError as e:
        if isinstance(e, click.NoSuchOption) and (said := misread_output_option(e)):
            click.echo(f"ckptbench: error: {said}", err=True)
            sys.exit(EXIT_USAGE)
        if isinstance(e, _NO_ARGS_IS_HELP):  # bare `ckptbench`: the help, as click 8.1 gave
            click.echo(e.format_message())
            sys.exit(EXIT_OK)
        click.echo(f"ckptbench: error: {one_line(e.format_message())}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as e:
        click.echo(f"ckptbench: error: {one_line(e.format_message())}", err=True)
        sys.exit(e.exit_code)
    sys.exit(rv if isinstance(rv, int) else EXIT_OK)
