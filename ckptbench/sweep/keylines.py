"""Where a key of a sweep config is (best-effort line numbers: tomllib reports none for
values), and a case's error worded with the config's keys, not ``run``'s options."""

from __future__ import annotations

import re

__all__ = ["KeyLines", "config_words", "where_in_config"]

#: ``run``'s options whose config key is not the option's name (dashes as underscores).
_KEY_OF_OPTION = {
    "budget": "budget_bytes",
    "memory-limit": "memory_limit_bytes",
    "timeout": "timeout_s",
    "sample-interval": "sample_interval_s",
}
_OPTION = re.compile(r"--([a-z][a-z-]*[a-z])\b")

#: One part of a TOML key at the start of the text: a bare key, a basic string (escapes
#: decoded by :func:`_basic`) or a literal string.
_KEY_PART = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_ESCAPED = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


def _basic(text: str) -> str:
    """A basic string's characters, its escapes decoded as TOML decodes them."""

    def one(m: re.Match[str]) -> str:
        code = m.group(1) or m.group(2)
        if code is not None:
            return chr(int(code, 16)) if int(code, 16) <= 0x10FFFF else m.group(0)
        return _ESCAPED.get(m.group(3), m.group(0))

    return _ESCAPE.sub(one, text)


def _key(text: str, end: str) -> tuple[tuple[str, ...], int] | None:
    """The key at the start of ``text`` (its dotted parts, quoted ones decoded) and where
    the ``end`` after it ('=', or ']' of a header) is; None where no key ends so."""
    parts, at = [], 0
    while (m := _KEY_PART.match(text, at)) is not None:
        bare, basic, literal = m.groups()
        parts.append(bare if bare is not None else _basic(basic) if basic is not None else literal)
        at = m.end()
        if text.startswith(".", at):
            at += 1
            continue
        return (tuple(parts), at) if text.startswith(end, at) else None
    return None


def _header(line: str) -> str | None:
    """The table a ``[table]`` or ``[[table]]`` header line opens, its parts joined by dots
    (quoted ones decoded); None for any other line."""
    m = re.match(r"\s*\[\[?", line)
    if m is None:
        return None
    rest = line[m.end() :]
    found = _key(rest, "]")
    if found is None or not re.fullmatch(r"\]\]?\s*(#.*)?", rest[found[1] :]):
        return None  # '[3],' in an array of arrays: no header
    return ".".join(found[0])


class KeyLines:
    """Best-effort line numbers of keys in a TOML text (tomllib reports none for values):
    a key is read as TOML writes it, bare, dotted or quoted (a basic string's escapes
    decoded, ``"st\\u0065ps"`` is ``steps``), so a key with escapes is found where it is."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _keys(self):
        """(line number, table, key parts) of each ``key = value`` line, in order."""
        current = ""
        for number, line in enumerate(self.lines, start=1):
            table = _header(line)
            if table is not None:
                current = table
                yield number, table, None
                continue
            found = _key(line, "=")
            if found is not None:
                yield number, current, found[0]

    def find(self, table: str, key: str | None = None, index: int = 0) -> int | None:
        """Line (1-based) of ``key`` in the ``index``-th ``[table]``/``[[table]]``, or of the
        header itself when ``key`` is None. Dotted/inline forms are found at the top level."""
        seen = 0 if table == "" else -1  # the top level is "table 0" before any header
        for number, current, parts in self._keys():
            if parts is None:
                if table and current == table:
                    seen += 1
                    if key is None and seen == index:
                        return number
                continue
            if key is None:
                continue
            if current == table and seen == index and parts == (key,):
                return number
            if current == "" and table and parts == (*table.split("."), key):
                return number
        return None

    def first(self, key: str) -> int | None:
        """Line (1-based) of the first ``key = ...`` in any table (the config's [case] or a
        grid table), else None."""
        return next((n for n, _, parts in self._keys() if parts == (key,)), None)


def config_words(message: str) -> str:
    """``message`` (a case's error, worded for ``run``'s command line) with each option
    named by its config key: '(--budget)' reads '(budget_bytes)', '--model x' 'model x'."""
    from dataclasses import fields

    from ckptbench.results.schema import Case

    known = {f.name for f in fields(Case)}

    def key(match: re.Match[str]) -> str:
        name = match.group(1)
        field = _KEY_OF_OPTION.get(name, name.replace("-", "_"))
        return field if field in known else match.group(0)

    return _OPTION.sub(key, message)


def where_in_config(source: str, text: str, message: str, key: str | None = None) -> str:
    """``message`` about ``key`` (default: the first option it names, '--steps 9 x ...') as
    the config's other errors read, 'FILE:LINE: message' (the line of the key's first value
    in ``text``; the file alone where none is found), worded with the config's keys
    (:func:`config_words`)."""
    named = _OPTION.search(message)
    if key is None and named is not None:
        key = config_words(named.group(0))
    line = KeyLines(text).first(key) if key else None
    return f"{source}{f':{line}' if line else ''}: {config_words(message)}"
