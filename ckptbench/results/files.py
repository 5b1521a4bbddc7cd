"""Reading the files a user hands ckptbench (configs, costs files, results) in a bounded way.

A path can name ``/dev/zero``, a FIFO or a multi-gigabyte log: :func:`read_text_limited`
reads at most a fixed number of bytes and refuses the rest in one line, so no input can make
ckptbench read until the kernel stops it. :func:`read_regular_file` is the stricter rule for
result files and manifests: a regular file only (a FIFO, a device or a folder is refused
without opening it for a blocking read), at most a fixed number of bytes. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import stat
import types
import typing
from enum import Enum
from typing import Any

from ckptbench.results.inputs import without_bom
from ckptbench.results.units import MAX_BYTES

__all__ = [
    "MAX_INT_DIGITS",
    "MAX_JSON_DEPTH",
    "MAX_MEASURED",
    "SIGNED_QUANTITIES",
    "InputFileError",
    "fields_problem",
    "read_json_limited",
    "read_regular_file",
    "read_text_limited",
    "short_json",
    "shown_value",
    "writable_text",
]


class InputFileError(ValueError):
    """A file cannot be read as asked; the message is one line without the path."""


def read_text_limited(path: str | os.PathLike[str], limit_bytes: int) -> str:
    """The UTF-8 text of ``path``, read in a bounded way: ``ValueError`` (one line) when it
    holds more than ``limit_bytes`` (``/dev/zero``, a log) or is not UTF-8 text; ``OSError``
    when it cannot be read. A pipe (``<(...)``) is read like a file; a named pipe nobody
    writes to reads as empty instead of blocking the open forever."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if hasattr(os, "set_blocking"):  # opened without waiting for a writer; now read
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        data = fh.read(limit_bytes + 1)
    if len(data) > limit_bytes:
        raise ValueError(f"more than {limit_bytes / 2**20:g} MiB; not a file ckptbench reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_regular_file(path: str | os.PathLike[str], limit_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes`` of them.

    The file is opened non-blocking (a FIFO with no writer would otherwise block the open
    forever) and checked with ``fstat`` before a byte is read: a folder, FIFO, device or
    socket is :class:`InputFileError`, and so is a file larger than ``limit_bytes`` (also
    when it grows while being read). ``OSError`` when it cannot be opened or read."""
    if os.fspath(path) == "":
        raise InputFileError("an empty path names no file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputFileError(f"is {_kind(st.st_mode)}, not a file ckptbench reads")
        if st.st_size > limit_bytes:
            raise InputFileError(
                f"is {st.st_size / 2**20:,.1f} MiB, more than the {limit_bytes / 2**20:g} MiB "
                "ckptbench reads"
            )
        chunks, left = [], limit_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit_bytes:
        raise InputFileError(f"holds more than the {limit_bytes / 2**20:g} MiB ckptbench reads")
    return data


# --------------------------------------------------------------------------- bounded JSON


#: Deepest nesting of arrays and objects read (a result nests 5 levels; JSON's parser
#: would recurse until Python stops it).
MAX_JSON_DEPTH = 64
#: Longest integer read, in digits (ckptbench writes none beyond 2**63, 19 digits); longer
#: ones are refused before anything converts them (to a float, or through Python's
#: 4300-digit limit).
MAX_INT_DIGITS = 20

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``raw`` (strings skipped)."""
    import numpy as np

    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    arr = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((arr == ord("[")) | (arr == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


class _HugeInt:
    """An integer literal too long to read (see :data:`MAX_INT_DIGITS`), kept as its size."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _first_field(value: Any, hit: typing.Callable[[Any], bool]) -> tuple[str, Any] | None:
    """(field, node) of the first node of a parsed document, or key of one of its objects,
    for which ``hit`` is true, in document order; None when there is none."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        v, w = stack.pop()
        if hit(v):
            return w, v
        if isinstance(v, dict):
            for k, x in reversed(v.items()):
                path = f"{w}.{k}" if w else str(k)
                stack += [(x, path), (k, path)]  # the key is looked at before its value
        elif isinstance(v, list):
            stack.extend((x, f"{w}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def _find_huge(value: Any) -> tuple[str, _HugeInt] | None:
    found = _first_field(value, lambda v: isinstance(v, _HugeInt))
    return None if found is None else (found[0] or "result", found[1])


#: A lone UTF-16 surrogate: JSON's ``\\ud800`` parses, and the string then fails wherever
#: it is written or printed.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _find_surrogate(value: Any) -> str | None:
    """The field of the first string (or key) holding a lone surrogate, else None; a key's
    own surrogate written as its escape (the field name must print)."""
    found = _first_field(value, lambda v: isinstance(v, str) and bool(_SURROGATE.search(v)))
    return None if found is None else found[0].encode("utf-8", "backslashreplace").decode()


def writable_text(value: Any) -> Any:
    """``value`` (a JSON document) with a lone surrogate in any string or key written as its
    escape (``'bad \\udcff'``), which :func:`read_json_limited` refuses: a plug-in's error or
    a non-UTF-8 environment variable carried one, and the result or manifest was unreadable."""
    if isinstance(value, str):
        return (
            value.encode("utf-8", "backslashreplace").decode()
            if _SURROGATE.search(value)
            else value
        )
    if isinstance(value, dict):
        return {writable_text(k): writable_text(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [writable_text(v) for v in value]
    return value


def read_json_limited(path: str | os.PathLike[str], limit_bytes: int, what: str) -> Any:
    """The JSON document of the regular file ``path`` (:func:`read_regular_file`): UTF-8 without
    NUL bytes (a leading byte-order mark read as nothing), nested at most :data:`MAX_JSON_DEPTH`
    deep (checked first), no integer over :data:`MAX_INT_DIGITS` digits (refused unconverted,
    naming its field); else :class:`InputFileError`, one line without the path naming ``what``."""
    raw = read_regular_file(path, limit_bytes)
    try:
        if b"\x00" in raw:
            raise UnicodeDecodeError("utf-8", raw, raw.index(b"\x00"), raw.index(b"\x00") + 1, "")
        text = without_bom(raw.decode("utf-8"))  # Notepad's mark: JSON refuses it
    except UnicodeDecodeError as err:
        raise InputFileError(
            f"binary content at byte {err.start}, not a ckptbench {what}"
        ) from None
    if (depth := _json_depth(raw)) > MAX_JSON_DEPTH:
        raise InputFileError(
            f"JSON nested {depth} levels deep (a ckptbench {what} nests a few; at most "
            f"{MAX_JSON_DEPTH} are read)"
        )
    huge: list[_HugeInt] = []

    def parse_int(s: str) -> int | _HugeInt:
        digits = len(s) - s.startswith("-")
        # pandas, numpy and every counter read an int64: 2**63 and beyond would overflow
        # them far from here (compare raised OverflowError where check passed)
        if digits > MAX_INT_DIGITS or not -(2**63) <= (value := int(s)) < 2**63:
            huge.append(_HugeInt(digits))
            return huge[-1]
        return value

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        doc = dict(pairs)
        if len(doc) < len(pairs):  # a repeated key: JSON would keep the last silently
            keys = [k for k, _ in pairs]
            twice = sorted({k for k in keys if keys.count(k) > 1})
            raise InputFileError(f"a JSON object names {', '.join(map(repr, twice))} twice")
        return doc

    try:
        data = json.loads(text, parse_int=parse_int, object_pairs_hook=unique)
    except InputFileError:
        raise
    except json.JSONDecodeError as err:
        if _is_toml(text):  # a sweep config given where its results were meant
            hint = (": a sweep config? pass the folder its sweep wrote (`ckptbench sweep "
                    "CONFIG --out FOLDER`, then FOLDER)") if what == "result" else ""  # fmt: skip
            raise InputFileError(f"a TOML file, not a {what}{hint}") from None
        raise InputFileError(f"not JSON ({err.msg} at line {err.lineno})") from None
    except (RecursionError, ValueError) as err:  # the depth check makes these unreachable
        raise InputFileError(f"not JSON ckptbench can read ({type(err).__name__})") from None
    escaped = re.search(rb"\\u[dD][89a-fA-F]", raw)  # a surrogate only comes escaped
    if escaped and (where := _find_surrogate(data)) is not None:
        raise InputFileError(
            f"{where or 'the document'} holds a lone UTF-16 surrogate (a \\ud800-\\udfff "
            "escape without its pair), which is no text"
        )
    if huge:
        where, big = _find_huge(data) or ("the document", huge[0])
        raise InputFileError(
            f"{where} is an integer of {big.digits} digits, beyond 2**63 (ckptbench writes "
            "none and reads none)"
        )
    return data


# --------------------------------------------------------------------------- validation


def _describe(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "one of " + "/".join(str(e.value) for e in tp)
    if dataclasses.is_dataclass(tp):
        return "an object"
    origin = typing.get_origin(tp)
    if origin is tuple or origin is list:
        return "a list"
    if origin is dict:
        return "an object"
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


#: The most of a value typed that an error echoes (a pasted file's worth is cut).
SHOWN_CHARS = 60
#: The same for a path or a plug-in spec ('/home/me/project/models/net.py:make').
SHOWN_PATH_CHARS = 200


def shown_value(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value typed as an error quotes it: its repr, cut after ``limit`` characters
    ("'torchxtorchx...torchx'... (5400 characters)"; a path or plug-in spec is cut later,
    :data:`SHOWN_PATH_CHARS`, for its file's name to show)."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def short_json(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _problem(value: Any, tp: Any, where: str) -> str | None:
    """Why ``value`` (parsed JSON) does not fit the annotation ``tp``; None when it does."""
    if tp is Any:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        problems = [_problem(value, a, where) for a in options]
        if any(p is None for p in problems):
            return None
        if len(options) == 1:
            return problems[0]
        return f"{where} must be {_describe(tp)}, got {short_json(value)}"
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            return f"{where} must be an object, got {short_json(value)}"
        return fields_problem(value, tp, where)
    if isinstance(tp, type) and issubclass(tp, Enum):
        if value not in [e.value for e in tp]:  # a list: [] or {} is unhashable
            return f"{where} must be {_describe(tp)}, got {short_json(value)}"
        return None
    if origin in (tuple, list):
        if not isinstance(value, list):
            return f"{where} must be a list, got {short_json(value)}"
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                return f"{where} must hold {len(args)} values, got {len(value)}"
            items = list(zip(value, args, strict=True))
        else:
            items = [(v, args[0] if args else Any) for v in value]
        for i, (v, a) in enumerate(items):
            if (p := _problem(v, a, f"{where}[{i}]")) is not None:
                return p
        return None
    if origin is dict:
        if not isinstance(value, dict):
            return f"{where} must be an object, got {short_json(value)}"
        vt = args[1] if args else Any
        for k, v in value.items():
            if (p := _problem(v, vt, f"{where}.{k}")) is not None:
                return p
        return None
    ok = {
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        str: lambda v: isinstance(v, str),
    }.get(tp)
    if ok is not None and not ok(value):
        return f"{where} must be {_describe(tp)}, got {short_json(value)}"
    return _unit_problem(value, where)


#: Quantities that are differences of two readings, so may be negative: the RSS a JAX
#: compile left (RSS after it minus before; its heap trim can return more than the program
#: holds: -10.4 MiB measured on an H200).
SIGNED_QUANTITIES = frozenset({"program_rss_bytes"})


#: No measured time reaches this (about 31 700 years): an iteration of 1e308 s raised an
#: OverflowError in the statistics, 1e300 printed hundreds of digits. The case's limits
#: (``timeout_s``) are the case's to check.
MAX_SECONDS = 1e12

#: Counts and errors that are never negative, though not named in bytes or seconds.
COUNTS = frozenset({"round", "grad_max_rel_err"})
#: A process measured holds memory: its exact peak is never zero.
POSITIVE_QUANTITIES = frozenset({"peak_rss_bytes"})


def _unit_problem(value: Any, where: str) -> str | None:
    """Quantities named in bytes or seconds are finite and, but for differences, not negative;
    so are counters, rounds and gradient errors (an infinite error is a failed check), a
    measured peak is above zero, and bytes and counters are bounded (:func:`_count_problem`)."""
    name = where.rsplit(".", 1)[-1].split("[", 1)[0]
    counted = name in COUNTS or ".counters." in where
    quantity = name.endswith("_bytes") or name.endswith("_s") or counted
    if not quantity or not isinstance(value, (int, float)):
        return None
    if name == "grad_max_rel_err" and value == math.inf:
        return None
    if name in POSITIVE_QUANTITIES and value == 0:
        return f"{where} must be above 0 (a process holds memory), got 0"
    if name in SIGNED_QUANTITIES:
        if not math.isfinite(value):
            return f"{where} must be finite, got {short_json(value)}"
        return _count_problem(value, where, name)
    if not (math.isfinite(value) and value >= 0):
        return f"{where} must be a finite number >= 0, got {short_json(value)}"
    if name.endswith("_s") and value >= MAX_SECONDS and where.startswith("modes"):
        return f"{where} must be below {MAX_SECONDS:.0e} s, got {short_json(value)}"
    return _count_problem(value, where, name)


#: The largest byte count or counter a measurement holds (64 PiB: no machine has that much
#: memory, no run counts that far). Compare's 95% intervals around such figures stay inside
#: the 64-bit integers its tables hold; 2**60 already overflowed them, and 2**63 - 1 raised
#: OverflowError in compare where check passed.
MAX_MEASURED = 2**56


def _count_problem(value: float, where: str, name: str) -> str | None:
    """Byte counts and counters a mode measured are below :data:`MAX_MEASURED`; the case's
    sizes and a plan's predicted peak below :data:`~ckptbench.results.units.MAX_BYTES`
    (2**62, what a size option takes)."""
    counter = ".counters." in where
    if not (name.endswith("_bytes") or counter):
        return None
    measured = where.startswith("modes") and ".plan." not in where
    if abs(value) < (MAX_MEASURED if measured else MAX_BYTES):
        return None
    got = short_json(value)
    if not measured:
        return f"{where} must be below 2**62 bytes (4 EiB, the largest size), got {got}"
    if counter and not name.endswith("_bytes"):
        return f"{where} must be below 2**56 (more than any run counts), got {got}"
    return f"{where} must be below 2**56 bytes (64 PiB, more than any machine holds), got {got}"


def fields_problem(data: dict[str, Any], cls: Any, where: str) -> str | None:
    hints = typing.get_type_hints(cls)
    names = set()
    for f in dataclasses.fields(cls):
        if not f.metadata.get("stored", True):  # a field no document holds (where it was read)
            continue
        names.add(f.name)
        path = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            no_default = f.default is dataclasses.MISSING
            if no_default and f.default_factory is dataclasses.MISSING:
                return f"{path} is missing"
            continue
        if (p := _problem(data[f.name], hints[f.name], path)) is not None:
            return p
    unknown = sorted(set(data) - names)
    if unknown:
        return f"{where or 'result'} has unknown field(s) {', '.join(unknown)}"
    return None


def _is_toml(text: str) -> bool:
    """Whether ``text`` reads as a TOML document of tables (what a sweep config is)."""
    import tomllib

    try:
        return any(isinstance(v, dict) for v in tomllib.loads(text).values())
    except (tomllib.TOMLDecodeError, ValueError):
        return False
