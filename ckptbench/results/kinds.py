"""What an existing file is to the rule for writing (``store.check_output``): a ckptbench
result, a sweep manifest, a side output ckptbench wrote (an mprof timeline, a plot, a
report, JUnit XML, a costs file: :class:`Own`, one per option), or something else.

A result or manifest is known by its content, whatever the order of its keys: the head
ckptbench writes (``{"schema_version": 3`` or ``{"kind": "ckptbench-sweep"``) is read
without parsing; any other file that opens with ``{`` is parsed (bounded, as results are
read: :func:`ckptbench.results.files.read_json_limited`) and its top-level keys looked at,
so a result re-sorted by ``jq -S`` or ``json.dumps(sort_keys=True)`` is still one (and one
that is also cut short is known by its sorted head: ``{"case": {`` or ``{"cells": [``).
Nothing here prints.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ckptbench.results.files import InputFileError, read_json_limited
from ckptbench.results.inputs import without_bom

__all__ = [
    "COSTS",
    "JUNIT",
    "MANIFEST",
    "MANIFEST_KIND",
    "MPROF",
    "PLOTS",
    "PLOT_SOFTWARE",
    "REPORTS",
    "RESULT",
    "Own",
    "document_kind",
    "kind_of",
    "not_text",
    "wrote_junit",
    "wrote_mprof",
    "wrote_plot",
    "wrote_report",
]

#: The ``kind`` of a sweep manifest document.
MANIFEST_KIND = "ckptbench-sweep"
#: What :func:`document_kind` names a file: a result, a sweep manifest.
RESULT, MANIFEST = "result", "manifest"

_RESULT_HEAD = re.compile(rb'^\s*\{\s*"schema_version"\s*:\s*\d')
_MANIFEST_HEAD = re.compile(rb'^\s*\{\s*"kind"\s*:\s*"ckptbench-sweep"')
_OBJECT = re.compile(rb"^\s*\{")
#: The heads of a result and a manifest re-sorted by key (``jq -S``): a result opens with
#: its ``case``, a manifest with its ``cells``; read when such a file is also cut short
_SORTED_RESULT_HEAD = re.compile(rb'^\s*\{\s*"case"\s*:\s*\{')
_SORTED_MANIFEST_HEAD = re.compile(rb'^\s*\{\s*"cells"\s*:\s*\[')
#: What ``render.mprof`` writes: its command line, then a sample or more
_MPROF_HEAD = re.compile(rb"^CMDLINE ckptbench(?: [^\n]*)?\nMEM \d")
_HEAD_BYTES = 4096


def _head(path: str | os.PathLike[str], size: int = _HEAD_BYTES) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(size)
    except OSError:
        return b""


def kind_of(data: Any) -> str | None:
    """:data:`MANIFEST` for a parsed manifest document, :data:`RESULT` for an object with a
    ``schema_version``, or with both ``case`` and ``modes`` (a result, valid or not), else
    None."""
    if not isinstance(data, dict):
        return None
    if data.get("kind") == MANIFEST_KIND:
        return MANIFEST
    if "schema_version" in data or {"case", "modes"} <= data.keys():
        return RESULT
    return None


def document_kind(path: str | os.PathLike[str], limit_bytes: int) -> str | None:
    """:data:`RESULT` or :data:`MANIFEST` when the file ``path`` is a ckptbench result or
    sweep manifest (its head as written, else its top-level keys, read from at most
    ``limit_bytes``, else its head as sorted by key), None otherwise (also when it cannot
    be read, or is no JSON object). A leading byte-order mark is read as nothing, as the
    readers read it (``inputs.without_bom``)."""
    head = without_bom(_head(path))
    if _MANIFEST_HEAD.match(head):
        return MANIFEST
    if _RESULT_HEAD.match(head):  # also a result cut short: never replaced by a side output
        return RESULT
    if not _OBJECT.match(head):
        return None
    try:
        return kind_of(read_json_limited(path, limit_bytes, "result"))
    except (InputFileError, OSError):  # unparsed (cut short, too large): its head decides
        if _SORTED_MANIFEST_HEAD.match(head):
            return MANIFEST
        return RESULT if _SORTED_RESULT_HEAD.match(head) else None


def wrote_mprof(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an mprof timeline ckptbench wrote (``render.mprof``): named
    ``mprofile_*.dat``, opening with a ckptbench command line and a sample."""
    p = Path(path)
    named = p.name.startswith("mprofile_") and p.suffix == ".dat"
    return named and _MPROF_HEAD.match(_head(p)) is not None


_MARKUP_HEAD = re.compile(rb"^\s*<(?:\?xml|!doctype html|html)\b", re.IGNORECASE)
#: The most of a file :func:`not_text` parses to see whether it is one JSON document
_JSON_BYTES = 64 * 2**20


def _utf8(head: bytes) -> bool:
    """Whether ``head`` is UTF-8 but for characters cut short at its end (the head's end,
    or the file's: an append killed mid-write, ``cli.appending.append_text``) or just before
    a line end (such a torn record, the next append's line end after it)."""
    at = 0
    while True:
        try:
            head[at:].decode("utf-8")
            return True
        except UnicodeDecodeError as err:
            cut = err.reason in ("unexpected end of data", "invalid continuation byte")
            end = at + err.end
            if not cut or err.end - err.start > 3 or head[end : end + 1] not in (b"", b"\n"):
                return False
            at = end


def not_text(path: str | os.PathLike[str]) -> str | None:
    """What ``path`` is when it is no text that markdown may be appended to (``check
    --summary``): "a binary file" (a NUL byte or no UTF-8 in its head: a plot), "an mprof
    timeline ckptbench wrote", "an XML or HTML document" (JUnit, compare's page) or "a JSON
    document" (the whole file parses: a costs file, a JSON report); None for any other
    file, an empty one too, and one with a character cut short by a torn append."""
    head = _head(path)
    if b"\0" in head or not _utf8(head):
        return "a binary file"
    if wrote_mprof(path):
        return "an mprof timeline ckptbench wrote"
    if _MARKUP_HEAD.match(head):
        return "an XML or HTML document"
    if without_bom(head).lstrip()[:1] in (b"{", b"["):
        try:
            read_json_limited(path, _JSON_BYTES, "file")
        except (InputFileError, OSError):
            return None
        return "a JSON document"
    return None


#: The ``Software`` text every plot ckptbench writes carries (``render.plots.figure_png``)
PLOT_SOFTWARE = "ckptbench"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The most of a PNG :func:`wrote_plot` reads: its text chunks come before the image data
_PNG_HEAD_BYTES = 64 * 1024


def wrote_plot(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a plot ckptbench wrote (``compare --plots``): a PNG whose
    ``Software`` text chunk, before its image data, names :data:`PLOT_SOFTWARE`."""
    head = _head(path, _PNG_HEAD_BYTES)
    if not head.startswith(_PNG_SIGNATURE):
        return False
    at = len(_PNG_SIGNATURE)
    while at + 8 <= len(head):
        size, kind = struct.unpack(">I4s", head[at : at + 8])
        if kind in (b"IDAT", b"IEND"):
            return False
        if kind == b"tEXt":
            key, _, text = head[at + 8 : at + 8 + size].partition(b"\0")
            if key == b"Software" and text.split(b" ", 1)[0] == PLOT_SOFTWARE.encode():
                return True
        at += 12 + size  # length, type, data, CRC
    return False


#: The heads of ``compare -o``'s report in each built-in format (``render.formats``): its
#: first section is always the cells table; the page (HTML) opens with its title
_REPORT_HEADS = re.compile(
    rb"^(?:Cells\ncell\s"  # text
    rb"|## Cells\n\| cell \|"  # markdown
    rb"|key,host,"  # csv
    rb'|\[\n \{\n  "key": "'  # json: the cells' records
    rb"|<!DOCTYPE html><html><head><meta charset='utf-8'><title>ckptbench )"  # html
)
#: The head of ``check --junit``'s file (``render.verdicts.check_junit``)
_JUNIT_HEAD = re.compile(rb'^<\?xml [^>]*\?>\n<testsuites name="ckptbench check"')
#: The fields of a costs file (``schedules.optimal.costs.Costs``), all but the last needed
_COST_FIELDS = ("forward_time_s", "taped_time_s", "state_bytes", "tape_bytes", "fixed_time_s")


def wrote_report(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a report ``compare -o`` wrote, in any of the built-in formats."""
    return _REPORT_HEADS.match(_head(path)) is not None


def wrote_junit(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is JUnit XML ``check --junit`` wrote."""
    return _JUNIT_HEAD.match(_head(path)) is not None


def _costs_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a costs file (``plan --save-costs``, ``--costs``): a JSON object
    of the cost fields and no other key."""
    try:
        doc = read_json_limited(path, _JSON_BYTES, "file")
    except (InputFileError, OSError):
        return False
    return isinstance(doc, dict) and set(_COST_FIELDS[:4]) <= doc.keys() <= set(_COST_FIELDS)


@dataclass(frozen=True)
class Own:
    """What an option writes, for ``store.check_output``: an existing file ``test`` says
    ckptbench wrote there (an empty one too) is replaced with ``--force``; any other is
    refused, ``--force`` or not, in one line saying what it is not (``kind``) and what to
    do instead (remove it, or ``instead``)."""

    kind: str
    test: Callable[[Path], bool]
    instead: str = "use another file name"

    @property
    def refusal(self) -> str:
        """Why a file that is not such a file is refused, and what to do instead."""
        return (
            f"exists and is not {self.kind}; ckptbench replaces only those, not even with "
            f"--force: remove it or {self.instead}"
        )

    def wrote(self, path: Path) -> bool:
        """Whether ``path`` is such a file (an empty one loses nothing: ``mktemp``'s)."""
        try:
            if os.path.getsize(path) == 0:
                return True
        except OSError:
            return False
        return self.test(path)


MPROF = Own("an mprof timeline ckptbench wrote", wrote_mprof, "use another folder")
PLOTS = Own("a plot ckptbench wrote", wrote_plot, "use another folder")
REPORTS = Own("a report ckptbench wrote", wrote_report)
JUNIT = Own("JUnit XML ckptbench wrote", wrote_junit)
COSTS = Own("a costs file", _costs_file)
