"""A markdown record appended to a file others append to too (``check --summary``,
``$GITHUB_STEP_SUMMARY``): in place, in one write, and after a record an earlier append
left cut short (a ``kill -9`` mid-write), on a line of its own with the blocks that record
left open closed first, so GitHub does not fold every later record into its ``<details>``
or show it as code. Earlier bytes are never rewritten: the repair goes before the record,
in the same write."""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SCAN_BYTES", "Tear", "append_text", "open_blocks", "tear_text"]

#: The most of a file's end read to find its last record (a summary is a few KiB; GitHub
#: shows at most 1 MiB of one): a record that starts before it is not repaired.
SCAN_BYTES = 8 * 2**20
#: A UTF-8 byte-order mark, which a file may start with (PowerShell's ``Out-File``).
BOM = "\ufeff".encode()

#: A fenced code block's opening line (CommonMark: up to 3 spaces, 3 or more backticks or
#: tildes; a backtick fence's info string holds no backtick).
_FENCE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})")
_DETAILS = re.compile(r"<(/?)details(?=[\s/>])[^>]*>", re.IGNORECASE)
#: A tag the cut left open at the end of the record (``<summ``, ``</deta``): everything
#: after it, the closing tags too, would be read as its attributes.
_DANGLING_TAG = re.compile(r"<[A-Za-z/][^<>]*$")
_DETAILS_CUT = re.compile(r"<(/?)details(?:[\s/][^<>]*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class Tear:
    """What the file's last record was left without, found before an append: its last
    line's end (``line_end``), the end of a tag it was cut inside (``tag``), a code fence
    (``fence``: the closing fence), ``details``: how many ``<details>`` blocks it left
    open, and ``blank``: the blank line a whole record ends with (without it, a cut after a
    raw HTML line such as ``</details>`` would run the next record into that HTML block).
    False when nothing but the blank line was missing (added unsaid)."""

    line_end: bool = False
    tag: bool = False
    fence: str = ""
    details: int = 0
    blank: bool = False

    def __bool__(self) -> bool:
        return self.line_end or self.closes

    @property
    def closes(self) -> bool:
        """Whether blocks (a fence, ``<details>``) are closed, and a note says so."""
        return bool(self.fence or self.details)

    def blocks(self, markdown: bool = False) -> str:
        """The blocks left open, in words ('a <details> block', 'a code fence in 2 ...');
        with ``markdown``, the tag in a code span (raw, it would open one more)."""
        parts = ["a code fence"] if self.fence else []
        tag = "`<details>`" if markdown else "<details>"
        if self.details:
            parts.append(f"{self.details} {tag} blocks" if self.details > 1 else f"a {tag} block")
        return " in ".join(parts)

    def repair(self) -> bytes:
        """What goes before the next record: the line end, the tag's ``>``, the closing
        fence and ``</details>`` tags, then a visible note that the record was cut short."""
        out = "\n" if self.line_end else ""  # a character cut short stays before a line end
        out += ">\n" if self.tag else ""
        if self.closes:
            out += f"{self.fence}\n" if self.fence else ""
            out += "\n</details>\n" * self.details
            out += (
                f"\n> **Note:** the record above was cut short (an earlier append stopped "
                f"part-way); ckptbench closed {self.blocks(markdown=True)} it left open here.\n"
            )
        return (out + "\n" * (self.blank or self.closes)).encode()


def tear_text(tear: Tear) -> str:
    """The warning's words for ``tear`` (after 'warning: --summary FILE: ')."""
    if not tear.closes:
        return (
            "its last line had no line end (an earlier append cut short?); this summary "
            "starts on a new line"
        )
    return (
        f"its last record was cut short inside {tear.blocks()} (an earlier append stopped "
        "part-way?); this summary closes it first, with a note saying so, and starts on a "
        "new line"
    )


def open_blocks(record: str, ended: bool) -> Tear:
    """What the markdown ``record`` (a file's last record, from its heading) leaves open at
    its end: a fenced code block, ``<details>`` blocks outside one (opened minus closed, in
    order), and, where its last line has no line end (``ended`` False), a tag cut short;
    whether it ends without the blank line that ends a whole record.
    Fences inside list items or quotes are not followed."""
    fence = ""
    details = 0
    record = record.replace("\r\n", "\n").replace("\r", "\n")  # CRLF, CR: line ends too
    lines = record.split("\n")
    for line in lines:
        if fence:  # closed by a line of its character alone, at least as long
            tail = line.lstrip(" ").rstrip(" \t")
            if len(line) - len(line.lstrip(" ")) <= 3 and tail.startswith(fence):
                fence = "" if not tail.strip(fence[0]) else fence
            continue
        if match := _FENCE.match(line):
            fence = match.group(1)
            continue
        for tag in _DETAILS.finditer(line):
            details = max(0, details - 1) if tag.group(1) else details + 1
    last = lines[-1]
    tag = not ended and not fence and _DANGLING_TAG.search(last) is not None
    if tag and (cut := _DETAILS_CUT.search(last)):  # the '>' completes it
        details = max(0, details - 1) if cut.group(1) else details + 1
    blank = not record.endswith("\n\n")
    return Tear(line_end=not ended, tag=tag, fence=fence, details=details, blank=blank)


def append_text(path: Path, text: str, heading: str = "") -> Tear:
    """Append ``text`` to ``path`` (``check --summary``, ``$GITHUB_STEP_SUMMARY``) in place:
    the file keeps its identity (its inode: another hard link to it, a reader holding it
    open, its owner, mode and attributes all see the one file), and ``O_APPEND`` keeps
    another appender's text (a read and a rename would drop what was appended between).
    The record is written in one ``write`` (a summary's few KiB, which another appender's
    write to a regular file does not split), then fsynced; a write that fails or is stopped
    (a full disk, Ctrl-C) is cut back to the file's old length. A ``kill -9`` during the
    write can still leave a record cut short: the next append starts its record on a new
    line where the file does not end with one, and where the file's last record (from its
    last line starting with ``heading``) left a code fence or ``<details>`` open
    (:func:`open_blocks`), closes them first with a note, in the same write. What it found
    (:class:`Tear`, false when nothing), for the caller's one-line warning.
    A file not there yet is written whole, atomically (``write_atomic``); anything else it
    may be (checked first by ``store.check_output``, which refuses a FIFO or a device) is
    appended to as a stream. ``OSError`` when it cannot be written."""
    from ckptbench.results.schema import TargetError, write_atomic

    data = text.encode("utf-8", "backslashreplace")  # a non-UTF-8 path named: its escape
    for _ in range(2):  # a file made by another between the two tries is appended to
        try:
            fd = _open_append(path)
        except FileNotFoundError:
            try:
                write_atomic(path, data, replace=False)
                return Tear()
            except TargetError:  # it appeared meanwhile: append to it
                continue
        try:
            return _append(fd, data, heading.encode())
        finally:
            os.close(fd)
    raise FileExistsError(errno.EEXIST, "appeared and vanished while written", str(path))


def _open_append(path: Path) -> int:
    """``path`` opened for appending, and for reading its end where it may be read."""
    flags = os.O_APPEND | os.O_NOFOLLOW
    try:
        return os.open(path, flags | os.O_RDWR)
    except PermissionError:  # a file we may write but not read: appended to unchecked
        return os.open(path, flags | os.O_WRONLY)


def _last_record(fd: int, size: int, heading: bytes) -> tuple[bytes, bytes]:
    """(The last byte of the regular file ``fd`` of ``size`` bytes, its last record: from
    its last line starting with ``heading`` within its last :data:`SCAN_BYTES`, else
    empty); both empty where it is empty, holds a byte-order mark alone, or cannot be read
    (opened write-only). A leading byte-order mark is not part of its first record."""
    try:
        if not heading or not size:
            return os.pread(fd, 1, size - 1) if size else b"", b""
        start = max(0, size - SCAN_BYTES)
        tail = os.pread(fd, size - start, start)
    except OSError:
        return b"", b""
    if start == 0 and tail.startswith(BOM):  # a byte-order mark first (PowerShell's): nothing
        tail = tail[len(BOM) :]
        if not tail:
            return b"", b""
    at = tail.rfind(b"\n" + heading) + 1
    if not at and not (start == 0 and tail.startswith(heading)):
        return tail[-1:], b""
    return tail[-1:], tail[at:]


def _tear(fd: int, size: int, heading: bytes) -> Tear:
    """What the file's last record was left without (:func:`open_blocks`)."""
    last, record = _last_record(fd, size, heading)
    ended = last in (b"\n", b"")
    if not record:
        return Tear(line_end=not ended)
    return open_blocks(record.decode("utf-8", "replace"), ended)


def _append(fd: int, data: bytes, heading: bytes) -> Tear:
    """``data`` appended to the open ``fd`` in one write and fsynced, after the repair of
    a torn last record (:class:`Tear`); on any failure or stop, a regular file is cut back
    to its length before (where no other appender wrote since)."""
    import stat

    st = os.fstat(fd)
    regular = stat.S_ISREG(st.st_mode)
    tear = _tear(fd, st.st_size, heading) if regular else Tear()
    data = tear.repair() + data  # one record, one write: the repair goes with it
    done = 0
    try:
        while done < len(data):  # one write; more only after a short one (a signal, a full disk)
            done += os.write(fd, data[done:])
        if regular:
            os.fsync(fd)
    except BaseException:
        if regular and os.fstat(fd).st_size == st.st_size + done:
            os.ftruncate(fd, st.st_size)
        raise
    return tear
