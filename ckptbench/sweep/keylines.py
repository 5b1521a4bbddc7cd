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

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


class KeyLines:
    """Best-effort line numbers of keys in a TOML text (tomllib reports none for values)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def find(self, table: str, key: str | None = None, index: int = 0) -> int | None:
        """Line (1-based) of ``key`` in the ``index``-th ``[table]``/``[[table]]``, or of the
        header itself when ``key`` is None. Dotted/inline forms are found at the top level."""
        current = ""
        seen = 0 if table == "" else -1  # the top level is "table 0" before any header
        key_re = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=") if key else None
        dotted = (
            re.compile(rf"^\s*{re.escape(table)}\s*\.\s*[\"']?{re.escape(key)}[\"']?\s*=")
            if key and table
            else None
        )
        for number, line in enumerate(self.lines, start=1):
            header = _HEADER.match(line)
            if header:
                current = re.sub(r"\s*\.\s*", ".", header.group(2)).replace('"', "")
                if table and current == table:
                    seen += 1
                    if key is None and seen == index:
                        return number
                continue
            if key_re is None:
                continue
            if current == table and seen == index and key_re.match(line):
                return number
            if current == "" and dotted is not None and dotted.match(line):
                return number
        return None

    def first(self, key: str) -> int | None:
        """Line (1-based) of the first ``key = ...`` in any table (the config's [case] or a
        grid table), else None."""
        key_re = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        return next((n for n, line in enumerate(self.lines, 1) if key_re.match(line)), None)


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
