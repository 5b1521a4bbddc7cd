"""Files the commands write beside their results (--mprof, --plots, -o): checked
before anything is measured and written without replacing what they must not."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import click

from ckptbench.cli.options import InputError
from ckptbench.cli.values import not_a_choice
from ckptbench.results.inputs import leads_nowhere, real_path, said_path


def input_files(model: str | None, *paths: str | os.PathLike[str] | None) -> list[str]:
    """The files a command reads, which no output of it may replace, ``--force`` or not: the
    plug-in's source (a file, or a package module's file, found without importing it) and
    each of ``paths`` that is a file."""
    files = [os.fspath(p) for p in paths if p and os.path.isfile(p)]
    if model and ":" in model:  # a plug-in: built-in names have no colon
        from ckptbench.workloads import plugin_source_file

        source = plugin_source_file(model)
        if source is not None and os.path.isfile(source):  # a name too long is no file
            files.append(str(source))
    return files


def check_out(path: Path, force: bool, inputs=()) -> None:
    """Fail early (exit 2) when the result file could not be written, or would replace
    something it must not: one of ``inputs`` (the plug-in's file, a costs file), or with
    ``force`` anything but a result (see ``store.check_output``)."""
    from ckptbench.results.store import StoreError, check_output

    try:
        check_output(path, "--out", inputs=inputs, replace=force, result=True)
    except StoreError as err:
        raise InputError(str(err)) from None
    probe_writable(path, "--out")


def probe_writable(path: Path, what: str, make: bool = True) -> None:
    """Before anything is measured or any verdict printed: ``path``'s folder exists (made,
    parents too, and said, as for every file ckptbench writes: :func:`make_folder`; without
    ``make``, only found makeable: the writer makes it) and takes a new file, and an
    existing ``path`` opens for appending (nothing written); one line and exit 2 otherwise.
    The folder is asked even for a file appended to in place: a file such as /proc/version
    opens for appending yet takes no write, and only its folder tells."""
    try:
        if make:
            make_folder(path.parent, what)
        _probe(path.parent)
        if path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as err:
        raise InputError(f"{what} {path}: cannot write there ({err.strerror or err})") from None


def probe_folder(folder: Path, what: str) -> None:
    """Before anything is written: the folder option ``what`` (``--plots``, ``--mprof``)
    takes a new file, or is missing and could be made (nothing is made: the writer makes it,
    and says so, :func:`make_folder`); one line and exit 2 otherwise."""
    try:
        _probe(folder)
    except OSError as err:
        raise InputError(f"{what} {folder}: cannot write there ({err.strerror or err})") from None


def _probe(folder: Path) -> None:
    """A new file made in ``folder`` and removed, or, where it is missing, a new folder in
    the nearest folder above it that exists; OSError if it cannot be (nothing left)."""
    import tempfile

    there = next(p for p in (folder, *folder.parents) if p.exists())  # the root exists
    if not there.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
    if there == folder:
        fd, probe = tempfile.mkstemp(prefix=".ckptbench-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    else:
        os.rmdir(tempfile.mkdtemp(prefix=".ckptbench-probe-", dir=there))


#: ``click.Context.meta`` keys: the folders this command made, innermost first
#: (:func:`remove_made_folders`), the notes that say so, not said yet, and whether the
#: command is past its checks (a folder made then is said at once; :func:`say_made_folders`).
MADE_FOLDERS = "ckptbench.made_folders"
MADE_NOTES = "ckptbench.made_folder_notes"
PAST_CHECKS = "ckptbench.past_checks"


def make_folder(folder: Path, what: str) -> None:
    """``folder`` made for the output ``what`` (parents too), said in one line on stderr when
    it was missing ('note: created folder X for --out'), so a typo in a path is seen; OSError
    if it cannot be. Each folder made is recorded in the command's context, so one left
    empty by a refusal is removed again, unsaid (:func:`remove_made_folders`); the note is
    said once the command is past its checks (:func:`say_made_folders`)."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    if (nowhere := leads_nowhere(folder)) is not None:  # mkdir: "File exists"
        raise FileExistsError(errno.EEXIST, nowhere)
    folder.mkdir(parents=True, exist_ok=True)
    if missing:
        note = f"note: created folder {folder} for {what}"
        ctx = click.get_current_context(silent=True)
        if ctx is None:  # no command to refuse it: said at once
            click.echo(note, err=True)
            return
        meta = ctx.find_root().meta
        meta.setdefault(MADE_FOLDERS, []).extend(missing)
        meta.setdefault(MADE_NOTES, []).append(note)
        if meta.get(PAST_CHECKS):  # past its checks: said at once, before its files
            say_made_folders(ctx)


def say_made_folders(ctx: click.Context | None = None) -> None:
    """Say the folders this command made (:func:`make_folder`) and has not said yet: once it
    is past its checks (``run`` before it measures) or done, never before a refusal's line
    (a refusal removes them, :func:`remove_made_folders`, and they go unsaid)."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return
    ctx.find_root().meta[PAST_CHECKS] = True  # folders made from now on are said at once
    for note in ctx.find_root().meta.pop(MADE_NOTES, []):
        click.echo(note, err=True)


def remove_made_folders(ctx: click.Context) -> None:
    """The folders this command made (:func:`make_folder`) removed where they are still
    empty: a command refused after making its output's folder (a plug-in refused at its
    check, say) leaves nothing behind. A folder holding anything stays, and so do those
    above it."""
    ctx.find_root().meta.pop(MADE_NOTES, None)  # removed: nothing to say of them
    for folder in ctx.find_root().meta.pop(MADE_FOLDERS, []):
        try:
            folder.rmdir()
        except OSError:
            return


def claim_out(ctx: click.Context, path: Path) -> None:
    """Hold ``--out`` for this command (``store.writer_lock``) and a shared lock on its
    folder (``folderlocks.folder_shared``: refused while a sweep writes there), until the command
    ends; exit 2 when another live ckptbench holds either."""
    from ckptbench.results.folderlocks import folder_shared
    from ckptbench.results.schema import TargetError, writer_lock
    from ckptbench.results.store import StoreError

    try:
        ctx.with_resource(folder_shared(path.parent))
        ctx.with_resource(writer_lock(path))
    except (StoreError, TargetError) as err:
        raise InputError(str(err)) from None


def check_mprof_dir(
    folder: Path, case, modes, out: Path | None = None, *, max_rounds: int = 0, force=False
) -> None:
    """--mprof, checked before anything is measured: a folder ckptbench can write, holding
    none of the files this run may write in up to ``max_rounds`` rounds (``--precision``
    adds rounds; see ``store.check_output``) but timelines ckptbench wrote, with ``force``,
    none of them the result file ``out``."""
    from ckptbench.render.mprof import mprof_name
    from ckptbench.results.kinds import MPROF
    from ckptbench.results.store import StoreError, check_output

    # as render.mprof names them: a round suffix once the result has more than one round
    # (rounds --precision adds count); a one-round result's files have none
    up_to = max(case.rounds, max_rounds)
    names = [mprof_name(case.key, m.value, None) for m in modes if case.rounds == 1]
    if up_to > 1:
        names += [mprof_name(case.key, m.value, k) for k in range(up_to) for m in modes]
    if out is not None:
        refuse_folder_clashes({"--mprof": folder}, [out])
        if real_path(out).parent == real_path(folder) and out.name in names:
            raise InputError(
                f"--out {out}: is also one of --mprof's timeline files; nothing measured"
            )
    try:
        make_folder(folder, "--mprof")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "the folder is not writable")
        for name in names:
            check_output(folder / name, "--mprof", replace=force, own=MPROF, hint=_MPROF_HINT)
    except OSError as err:
        raise InputError(f"--mprof {said_path(folder)}: {err.strerror or err}") from None
    except StoreError as err:
        raise InputError(str(err)) from None


#: What to do about an --mprof file there already.
_MPROF_HINT = "pass --force to replace ckptbench's timelines, or use another folder"


def check_mprof_files(results, folder: Path, inputs, force: bool) -> list[str]:
    """--mprof of results read (``compare``), checked before anything is written: the files
    :func:`write_mprof` will write, none replacing anything but (with ``force``) a timeline
    ckptbench wrote (``store.check_output``); their paths. Exit 2 otherwise."""
    from ckptbench.render.mprof import MprofError, mprof_documents
    from ckptbench.results.kinds import MPROF
    from ckptbench.results.store import StoreError, check_output

    try:  # every timeline formatted first: one that cannot be is refused, nothing written
        paths = [path for path, _ in mprof_documents(results, folder, _mprof_command())]
    except MprofError as err:
        raise InputError(f"--mprof {folder}: {err}") from None
    try:
        for path in paths:
            check_output(path, "--mprof", inputs=inputs, replace=force, own=MPROF,
                         hint=_MPROF_HINT)  # fmt: skip
    except StoreError as err:
        raise InputError(str(err)) from None
    return paths


def _mprof_command() -> str:
    """The command line an mprof file records (its ``CMDLINE``), as text: an argument's bytes
    that are no UTF-8 (a file name) as ``\\xNN`` escapes; held as Python holds them, they
    could not be written, and the timelines were lost after the run had measured."""
    import shlex

    args = [os.fsencode(arg).decode("utf-8", "backslashreplace") for arg in sys.argv[1:]]
    return shlex.join(["ckptbench", *args])


def write_mprof(results, folder: Path, quiet: bool = False, replace: bool = False) -> None:
    """--mprof: the RSS timelines as mprof files (``replace``: over files checked first);
    one line and exit 2 if they cannot be."""
    from ckptbench.render.mprof import export_mprof

    try:
        make_folder(folder, "--mprof")
        say_made_folders()  # said before its files are
        for path in export_mprof(results, folder, _mprof_command(), replace=replace):
            if not quiet:
                click.echo(f"wrote {path}", err=True)
    except OSError as err:  # the file it was writing (export_mprof), or the folder
        where = err.filename or folder
        raise InputError(f"--mprof {where}: cannot write ({err.strerror or err})") from None
    except ValueError as err:
        raise InputError(f"--mprof {folder}: {err}") from None


def expect_verdicts(after, paths, manifests=None):
    """The gate's [expect] checks of the results, for the report (None without a manifest;
    ``manifests``: each read once, ``results.store.ManifestFiles``)."""
    from ckptbench.analysis.expectations import manifest_expectations
    from ckptbench.analysis.gate import check as gate_check

    expect = manifest_expectations(paths, manifests)
    return gate_check(after, expect=expect) if expect is not None else None


def refuse_duplicates(paths) -> None:
    """Writing one file twice in one command would lose the first: bad input, exit 2."""
    seen: dict = {}
    for p in paths:
        real = real_path(p)
        if real in seen:
            raise InputError(f"{p}: this command would write the file twice; nothing written")
        seen[real] = p


def refuse_folder_clashes(folders: dict[str, Path | None], files) -> None:
    """A folder option (``--plots``, ``--mprof``) that names one of the command's files, or
    an existing file, would write into what another output then cannot replace (or
    fail half-way): bad input, exit 2, before anything is written."""
    real = {real_path(f): f for f in files}
    for option, folder in folders.items():
        if folder is None:
            continue
        if real_path(folder) in real:
            raise InputError(
                f"{option} {folder}: is also a file this command writes; nothing written"
            )
        if os.path.exists(folder) and not os.path.isdir(folder):  # a name too long: later
            raise InputError(
                f"{option} {said_path(folder)}: exists and is not a folder; nothing written"
            )


def check_side_output(path: Path, what: str, inputs, force: bool, own=None) -> None:
    """The one rule for files ckptbench writes (``store.check_output``; ``own``: what
    ``--force`` may replace, ``kinds.Own``); exit 2 if broken."""
    from ckptbench.results.store import StoreError, check_output

    try:
        check_output(path, what, inputs=inputs, replace=force, own=own)
    except StoreError as err:
        raise InputError(str(err)) from None


def write_bytes(path: Path, data: bytes, option: str, force: bool) -> None:
    """Write ``data`` atomically (checked first with :func:`check_side_output`; ``force``:
    an existing file may be replaced); exit 2 with one line if it cannot be."""
    from ckptbench.results.schema import TargetError, write_atomic

    try:
        write_atomic(path, data, replace=force)
    except TargetError as err:  # it appeared, or became a link, since the check
        raise InputError(f"{option} {err}") from None
    except OSError as err:
        raise InputError(f"{option} {path}: cannot write ({err.strerror or err})") from None


class FormatChoice(click.ParamType):
    """``--format``: a name (or alias) from the formats registry (``render.formats``) that
    shows a report of ``sections`` (a callable giving the section kinds, read when the
    option is used, so a format registered later is a choice too)."""

    name = "format"

    def __init__(self, sections):
        self.sections = sections

    def choices(self, *, aliases: bool = True) -> list[str]:
        """The formats' names, and their older names (accepted, never offered: ``table``
        is text's)."""
        from ckptbench.render.formats import names_for

        return names_for(self.sections(), aliases=aliases)

    def get_metavar(self, param, ctx=None) -> str:
        return "[" + "|".join(self.choices(aliases=False)) + "]"

    def convert(self, value, param, ctx):
        if value in self.choices():
            return value
        self.fail(not_a_choice(value, self.choices(aliases=False)), param, ctx)


def json_and_format_options(sections, what: str, json_help: str, formats: str | None = None):
    """``--json`` and ``--format`` (default text) for a command that prints ``what`` ("the
    result is"); ``sections`` as :class:`FormatChoice` takes it, ``formats`` (if given) says
    what each is. The command resolves the pair with ``options.format_asked``."""
    formats = formats or "any format of the registry."

    def decorate(command):
        command = click.option(
            "--format",
            "fmt",
            type=FormatChoice(sections),
            default="text",
            show_default=True,
            help=f"How {what} printed (--json is --format json): {formats}",
        )(command)
        return click.option("--json", "as_json", is_flag=True, help=json_help)(command)

    return decorate


def note_writers(paths, command: str) -> None:
    """Say on stderr which of ``paths`` (result files, and sweep folders with the result
    files in them) another ckptbench is writing right now (``schema.being_written``): what
    they hold is the measurement so far, and a mode cut where it was saved reads as
    interrupted (a file read later, after its writer died, reads the same)."""
    from ckptbench.results.schema import being_written

    for raw in dict.fromkeys(map(str, paths)):
        p = Path(raw)  # a folder: itself, and each file a writer's lock in it names
        locks = sorted(p.glob(".*.lock")) if p.is_dir() else []
        for path in [p, *(f.with_name(f.name[1:-5]) for f in locks)]:
            who = being_written(path)
            if who is None:
                continue
            if path.is_dir():
                click.echo(f"{command}: {who} is writing {path} right now: cells it has not "
                           "measured yet read as missing, the cell it is measuring as "
                           "interrupted", err=True)  # fmt: skip
            else:
                click.echo(f"{command}: {who} is writing {path} right now: it holds the rounds "
                           "measured so far, the mode being measured read as interrupted",
                           err=True)  # fmt: skip
