"""The results folder: where cells are written, the sweep manifest, and reading result files.

This module is the one owner of what a results folder is (docs/architecture.md, "store"):

* ``OUT/<case.key>.json`` — one result per cell (:func:`cell_path`);
* ``OUT/sweep.json`` — the manifest of a sweep (:func:`write_manifest`,
  :func:`read_manifest`): the config, every cell's state and file, the ``[expect]`` tables;
* writing: :func:`check_output`, the one rule for every file ckptbench writes (one sweep
  at a time per folder is :mod:`ckptbench.results.folderlocks`);
* loading: :func:`load_result` validates a result document once
  (:mod:`ckptbench.results.resultcheck`), against the dataclasses of
  :mod:`ckptbench.results.schema` (every field, by its annotation, so fields added there are
  checked too), before constructing it. A null where a number belongs, a string for a
  number, binary content, ``"modes": []`` or a mode marked ``ok`` without iterations is a
  one-line :class:`StoreError` naming the file and the field. Nothing here prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ckptbench.results.files import InputFileError, read_json_limited, writable_text
from ckptbench.results.inputs import leads_nowhere, real_path, said_path, unreadable_text
from ckptbench.results.kinds import (
    MANIFEST,
    MANIFEST_KIND,
    RESULT,
    Own,
    document_kind,
    not_text,
)
from ckptbench.results.manifestcheck import MANIFEST_VERSION, manifest_problem
from ckptbench.results.readonce import ReadOnce
from ckptbench.results.resultcheck import result_problem
from ckptbench.results.schema import Case, CaseError, RunResult, result_from_dict, write_atomic
from ckptbench.results.setaside import (
    FILED,
    READABLE,
    CellProblem,
    copies,
    measurement_id,
    misfiled,
    same_measurement,
)
from ckptbench.results.units import count_text

__all__ = [
    "MANIFEST_KIND",
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "CellProblem",
    "ManifestFiles",
    "StoreError",
    "cell_path",
    "check_output",
    "load_readable",
    "load_result",
    "load_results",
    "manifest_cells",
    "measurement_id",
    "missing_cells",
    "open_folder",
    "read_json_document",
    "read_manifest",
    "validate_result_document",
    "write_manifest",
]

MANIFEST_NAME = "sweep.json"


class StoreError(ValueError):
    """A results folder or result file cannot be used; the message is one line."""


# --------------------------------------------------------------------------- folders


def cell_path(out_dir: str | os.PathLike[str], case: Case) -> Path:
    """The result file of one cell: ``OUT/<case.key>.json``."""
    return Path(out_dir) / f"{case.key}.json"


def open_folder(path: str | os.PathLike[str]) -> Path:
    """Create the results folder ``path`` (parents too) and check it is writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise StoreError(f"{p}: exists and is not a folder (results go into a folder)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a link on the way that leads nowhere: said as of every path
        why = leads_nowhere(p) or f"cannot create the results folder ({err.strerror or err})"
        raise StoreError(f"{p}: {why}") from None
    if not os.access(p, os.W_OK | os.X_OK):
        raise StoreError(f"{p}: the results folder is not writable")
    return p


def _kind(path: Path) -> str | None:
    """What ``path`` is (``kinds.document_kind``): a result, a manifest, whatever the order
    of its keys, or None."""
    return document_kind(path, MAX_RESULT_BYTES)


def _same_file(st: os.stat_result | None, other: Path) -> bool:
    """Whether the existing file of ``st`` is ``other`` under another name (a hard link)."""
    try:
        o = os.stat(other)
    except OSError:
        return False
    return st is not None and (st.st_dev, st.st_ino) == (o.st_dev, o.st_ino)


def check_output(
    path: str | os.PathLike[str],
    what: str,
    *,
    inputs: Iterable[str | os.PathLike[str]] = (),
    replace: bool = False,
    append: bool = False,
    result: bool = False,
    own: Own | None = None,
    hint: str = "pass --force to replace it",
) -> None:
    """The rule for every file ckptbench writes (``what`` names the option): never through a
    link or over a non-regular file, never an input of the command (by any of its names: a
    hard link too; nor a ``*.json`` in an input folder), never a cell's path a sweep
    manifest beside it lists (saved or not), never a result or manifest (known by content:
    ``kinds.document_kind``) unless it writes a ``result`` itself, never an existing file
    without ``replace`` unless it ``append``s, and that only to text (``kinds.not_text``:
    never to a JSON or XML document, a plot, a timeline); a ``result`` replaces only a
    result, a side output only what ckptbench wrote (``own``, ``kinds.Own``), never another
    file, ``--force`` or not. One-line StoreError."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except OSError as err:  # a loop on the way (ELOOP): said as of every other path
        why = leads_nowhere(p) or f"cannot be checked ({err.strerror or err})"
        raise StoreError(f"{what} {p}: {why}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise StoreError(f"{what} {p}: is a symbolic link; ckptbench never writes through one")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise StoreError(f"{what} {p}: exists and is not a regular file")
    real = real_path(p)
    for raw in inputs:
        q = real_path(raw)
        if (
            real == q
            or _same_file(st, q)
            or (q.is_dir() and q in real.parents and real.suffix == ".json")
        ):
            raise StoreError(f"{what} {p}: is an input of this command; nothing written")
    if (key := _sweep_cell(p)) is not None:  # saved or not: `sweep --resume` measures those
        raise StoreError(f"{what} {p}: is cell {key} of the sweep in {p.parent} (not even "
                         "with --force); use another file name")  # fmt: skip
    if st is None:
        return
    kind = _kind(p)
    if not result and kind is not None:
        raise StoreError(
            f"{what} {p}: is a ckptbench result or sweep manifest; a side output never "
            "replaces or appends to one"
        )
    if result and kind == MANIFEST:
        raise StoreError(
            f"{what} {p}: is a sweep manifest; a result never replaces one (not even with "
            "--force): use another file name"
        )
    if append and (other := not_text(p)) is not None:  # --force or not: it replaces nothing
        raise StoreError(f"{what} {p}: is {other}; {what} appends markdown to a text file "
                         "only: use another file name")  # fmt: skip
    if own is not None and not append and not own.wrote(p):  # --force or not: said first
        raise StoreError(f"{what} {p}: {own.refusal}")
    if result and st.st_size and kind != RESULT:  # empty: mktemp's, say
        raise StoreError(
            f"{what} {p}: exists and is not a ckptbench result; --force replaces only a "
            "result: remove it or use another file name"
        )
    if not replace and not append:
        raise StoreError(f"{what} {p}: exists; {hint}")


def write_manifest(out_dir: Path, body: dict[str, Any]) -> Path:
    """Write ``OUT/sweep.json`` atomically: ``body`` under the manifest's kind and version;
    a file there that is not a manifest is never replaced (StoreError)."""
    path = out_dir / MANIFEST_NAME
    # never replace what another wrote there
    if path.exists() and _kind(path) != MANIFEST:
        raise StoreError(f"{path}: is no longer this sweep's manifest; nothing replaced")
    doc = writable_text({"kind": MANIFEST_KIND, "manifest_version": MANIFEST_VERSION, **body})
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The manifest document at ``path`` (a folder means its ``sweep.json``); None when there
    is none or the file is not a manifest; :class:`StoreError` when it cannot be read."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST_NAME
    if not p.exists():
        return None
    try:
        data = read_json_document(p, "sweep manifest")
    except StoreError as err:
        raise StoreError(f"unreadable sweep manifest: {err}") from None
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND:
        return None
    if (problem := manifest_problem(data)) is not None:
        raise StoreError(f"unreadable sweep manifest: {p}: {problem}")
    return data


class ManifestFiles:
    """The sweep manifests one command reads (``check``: its inputs, results, ``[expect]``,
    missing cells, unlisted files and limits), each read once, by its path as given (a
    folder meaning its ``sweep.json``): the same document, or the same :class:`StoreError`,
    each time it is asked for. The functions here that read manifests take one
    (``manifests=``); without it each reads the file itself."""

    def __init__(self) -> None:
        self._once: ReadOnce[dict[str, Any] | None] = ReadOnce(read_manifest, StoreError)

    def read(self, path: str | os.PathLike[str]) -> dict[str, Any] | None:
        """:func:`read_manifest`, read once."""
        key = Path(path)
        return self._once.get(key / MANIFEST_NAME if key.is_dir() else key)


def _reader(manifests: ManifestFiles | None):
    """How a manifest is read: through ``manifests`` where given."""
    return read_manifest if manifests is None else manifests.read


def missing_cells(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None = None
) -> list[tuple[str, str]]:
    """(key, files and state) of every cell a sweep manifest among ``paths`` lists without its
    result file: deleted, or never measured (a sweep stopped between cells, an error). A cell
    several manifests list in one state is one entry naming each file ('a/k.json, b/k.json')."""
    found: dict[tuple[str, str], dict[Path, str]] = {}  # (key, state) -> file shown, by path
    read = _reader(manifests)
    for raw in paths:
        manifest = Path(raw) / MANIFEST_NAME if Path(raw).is_dir() else Path(raw)
        try:
            data = read(manifest) if manifest.name == MANIFEST_NAME else None
        except StoreError:
            continue
        cells = [c for c in (data or {}).get("cells", []) if isinstance(c, dict) and c.get("file")]
        for c in cells:
            if not (f := manifest.parent / c["file"]).exists():
                why = f"{c.get('state', '?')}{_cell_said(c)}"
                found.setdefault((str(c.get("key", c["file"])), why), {})[real_path(f)] = str(f)
    return [(key, f"{', '.join(fs.values())} (state {why})") for (key, why), fs in found.items()]


def _cell_said(cell: dict[str, Any]) -> str:
    """': ' and a manifest cell's error, or why it waits to be measured again (its
    ``remeasure_reason``; an older manifest's ``error`` said so), on one line; or ''."""
    if isinstance(error := cell.get("error"), str) and error.split():
        return ": " + " ".join(error.split())
    if isinstance(why := cell.get("remeasure_reason"), str) and why.split():
        return ": measured again: " + " ".join(why.split())
    return ""


def _sweep_cell(p: Path) -> str | None:
    """The key of the cell the sweep manifest beside ``p`` lists as ``p`` (saved or not)."""
    with contextlib.suppress(StoreError, OSError):
        listed = manifest_cells(p.parent / MANIFEST_NAME, saved=False) or ()
        return next((k for f, k in listed if f == p), None)
    return None


def manifest_cells(
    path: Path, *, saved: bool = True, manifests: ManifestFiles | None = None
) -> list[tuple[Path, str]] | None:
    """(file, key) of every cell a manifest lists whose file is present (every cell it lists
    unless ``saved``), or None if ``path`` is no manifest; :class:`StoreError` when it is a
    damaged one (its folder is then never read as loose files)."""
    data = _reader(manifests)(path)
    if data is None:
        return None
    cells = [c for c in data.get("cells", []) if isinstance(c, dict) and c.get("file")]
    listed = [(path.parent / str(c["file"]), str(c.get("key", ""))) for c in cells]
    return [(f, key) for f, key in listed if not saved or f.exists()]


# --------------------------------------------------------------------------- reading


def validate_result_document(data: Any, source: str) -> None:
    """Raise :class:`StoreError` (one line, naming ``source`` and the field) unless ``data``
    is a result document this ckptbench can read
    (:func:`ckptbench.results.resultcheck.result_problem`)."""
    if (problem := result_problem(data, source)) is not None:
        raise StoreError(problem)


#: The largest result file or manifest ckptbench reads (a long run's timelines are a few
#: MiB; beyond this it is not a result: ``/dev/zero``, a log).
MAX_RESULT_BYTES = 256 * 2**20


def read_json_document(path: str | os.PathLike[str], what: str = "result") -> Any:
    """The JSON document of the result file or manifest ``path``, read by the one rule for
    result inputs (:func:`ckptbench.results.files.read_json_limited`): a regular file (a FIFO,
    device or folder is refused without blocking), at most :data:`MAX_RESULT_BYTES`, UTF-8
    JSON nested a bounded depth with no over-long integer. Anything else is a one-line
    :class:`StoreError` naming the file (and the field)."""
    if os.fspath(path) == "":
        raise StoreError(f"an empty path is not a {what} file or folder")
    try:
        return read_json_limited(path, MAX_RESULT_BYTES, what)
    except (InputFileError, OSError) as err:  # said as every input file's is
        why = unreadable_text(err, path) if isinstance(err, OSError) else err
        raise StoreError(f"{said_path(path)}: {why}") from None


def load_result(path: str | os.PathLike[str]) -> RunResult:
    """Read (:func:`read_json_document`) and validate one result file; one-line
    :class:`StoreError` on anything else."""
    p = Path(path)
    data = read_json_document(path)
    validate_result_document(data, str(p))
    try:
        return replace(result_from_dict(data, str(p)), source=str(p))
    except CaseError as err:
        raise StoreError(f"{p}: malformed result: case: {err}") from None
    except ValueError as err:
        raise StoreError(str(err)) from None


def load_results(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None = None
) -> list[RunResult]:
    """Load result files. A folder means its sweep manifest's cells (or every ``*.json`` in
    it); a manifest file means its cells. One-line :class:`StoreError` on a bad or foreign
    file, a missing path, or when nothing is found; on a file a manifest lists for one cell
    that holds another cell's result (copied or misfiled); and on two files holding the same
    measurement (:func:`measurement_id`: a copy would pool as another invocation). A file
    named twice is read once; a manifest read through ``manifests`` where given."""
    results, _ = _load(paths, lenient=False, manifests=manifests)
    if not results:
        raise StoreError("no results to compare")
    return results


def load_readable(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None = None
) -> tuple[list[RunResult], list[CellProblem]]:
    """As :func:`load_results`, but a cell that a folder or manifest yields is set aside as a
    :class:`CellProblem` instead of stopping the whole read (``compare`` shows the others and
    names it, ``check`` fails it) when its file cannot be read, holds another cell's result
    than the manifest lists it for, or holds the same measurement as another such file (then
    no copy is read: none is picked over the others). A file given by name that cannot be
    read, or with a copy among the others, is still a :class:`StoreError`. No result at all
    is not an error here when some cell was set aside (the caller says so)."""
    results, problems = _load(paths, lenient=True, manifests=manifests)
    if not results and not problems:
        raise StoreError("no results to compare")
    return results, problems


def _cell_files(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None
) -> tuple[list[tuple[Path, str | None, Path | None]], set[Path]]:
    """(file, the key its manifest lists it for, that manifest) of every file ``paths``
    yields, and the files among them given by name (not found in a folder or manifest)."""
    files: list[tuple[Path, str | None, Path | None]] = []
    named: set[Path] = set()
    for raw in paths:
        if os.fspath(raw) == "":  # Path("") is the current folder: never meant
            raise StoreError("an empty path is not a result file or folder")
        p = Path(raw)
        if os.path.isdir(p):  # a name too long is none (pathlib's raised OSError)
            listed = manifest_cells(p / MANIFEST_NAME, manifests=manifests)
            if listed is not None:
                files.extend((f, key, p / MANIFEST_NAME) for f, key in listed)
            else:
                files.extend((f, None, None) for f in sorted(p.glob("*.json")))
            if listed == [] or (listed is None and not any(p.glob("*.json"))):
                raise StoreError(f"{said_path(raw)}: {_no_cells(p, manifests)}")
        elif p.exists():
            listed = manifest_cells(p, manifests=manifests) if p.name == MANIFEST_NAME else None
            if listed == []:  # as its folder says it: no cells, or none saved
                raise StoreError(f"{said_path(raw)}: {_no_cells(p.parent, manifests)}")
            if listed is not None:
                files.extend((f, key, p) for f, key in listed)
            else:
                files.append((p, None, None))
                named.add(real_path(p))
        else:
            raise StoreError(f"{said_path(raw)}: {unreadable_text(FileNotFoundError(), p)}")
    return files, named


def _no_cells(folder: Path, manifests: ManifestFiles | None) -> str:
    """Why ``folder`` yields no result file: no ``*.json`` at all, or a sweep manifest that
    lists no cells, or none saved, with the result files there it does not list."""
    listed = manifest_cells(folder / MANIFEST_NAME, saved=False, manifests=manifests)
    if listed is None:
        return "no result files in this folder"
    why = f"lists {count_text(len(listed), 'cell')}, none saved" if listed else "lists no cells"
    others = sum(_kind(f) == RESULT for f in folder.glob("*.json"))
    unlisted = f"; {count_text(others, 'result file')} here it does not list (pass one by name)"
    return f"its sweep manifest {why}" + (unlisted if others else "")


def _load(
    paths: Iterable[str | os.PathLike[str]],
    *,
    lenient: bool,
    manifests: ManifestFiles | None = None,
) -> tuple[list[RunResult], list[CellProblem]]:
    """The results of ``paths`` and, when ``lenient``, the cells a folder or manifest yields
    that are set aside (:mod:`ckptbench.results.setaside`); a file given by name is never set
    aside, nor its copy: a StoreError, as every problem is when not ``lenient``."""
    files, named = _cell_files(paths, manifests)
    seen: dict[Path, str | None] = {}  # each file read, and the cell a manifest read it for
    measured: dict[tuple[Any, ...], tuple[Path, RunResult]] = {}
    copied: dict[tuple[Any, ...], list[Path]] = {}  # one measurement in several files
    problems: list[CellProblem] = []
    for f, key, manifest in files:
        real = real_path(f)
        if real in seen and (seen[real] == key or None in (seen[real], key)):
            continue  # one file named twice: read once; listed for two cells, it is misfiled
        seen.setdefault(real, key)
        try:
            result = load_result(f)
        except StoreError as err:  # one broken cell of a folder: the others are still read
            if not lenient or real in named:
                raise
            problems.append(CellProblem((f,), key or f.stem, READABLE, str(err)))
            continue
        if key and result.case.key != key:  # only a manifest's files have a key
            if not lenient:
                raise StoreError(misfiled(f, key, manifest, result))
            problems.append(CellProblem((f,), key, FILED, misfiled(f, key, manifest, result)))
            continue
        ident = measurement_id(result)
        if ident in measured:
            first = measured[ident][0]
            if not lenient or real in named or real_path(first) in named:
                raise StoreError(same_measurement(f, first, result))
            copied.setdefault(ident, [first]).append(f)
            continue
        measured[ident] = (f, result)
    results = [r for ident, (_, r) in measured.items() if ident not in copied]  # no copy picked
    problems += [copies(fs, measured[ident][1]) for ident, fs in copied.items()]
    return results, problems
