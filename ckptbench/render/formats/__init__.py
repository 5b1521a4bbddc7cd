"""One registry of output formats (asv's ``OutputPublisher``, hyperfine's exporters): each
format is one module here declaring ``FORMAT``, a :class:`Format` that renders any
:class:`~ckptbench.render.formats.model.Report` made of the section kinds it shows.

``run``, ``compare``, ``check`` and ``plan`` take ``--format`` from this registry
(:func:`names_for`), so a new format is one module in this folder, or one
:func:`register` call from outside (a plug-in, a test)::

    register(Format("toy", ".txt", render=lambda report, width: "...", sections=(Prose,)))
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ckptbench.render.formats.model import (
    Data,
    Figure,
    Prose,
    Report,
    Section,
    TableSection,
    Verdicts,
)

__all__ = [
    "Data",
    "Figure",
    "Format",
    "Prose",
    "Report",
    "TableSection",
    "Verdicts",
    "get_format",
    "names_for",
    "register",
    "registry",
    "render",
    "shown",
]


@dataclass(frozen=True)
class Format:
    """``render(report, width)`` returns the text (``width``: the terminal's, or None);
    ``sections`` are the section kinds it shows (others are left out); ``aliases`` are
    older names (``compare --format table``); ``page`` asks the report builder for the full
    page (summary, provenance, plots: the HTML report) instead of the terminal's view."""

    name: str
    suffix: str
    render: Callable[[Report, int | None], str]
    sections: tuple[type, ...]
    aliases: tuple[str, ...] = ()
    page: bool = False
    help: str = ""
    show: Callable[[Report, Any], None] | None = None  # print on a rich console (a terminal)

    def shows(self, kinds: Iterable[type]) -> bool:
        """Whether this format shows any of the section kinds a report is made of."""
        return any(issubclass(k, self.sections) for k in kinds)


_FORMATS: dict[str, Format] = {}
_found = [False]


def register(fmt: Format) -> Format:
    """Add ``fmt`` to the registry (replacing a format of the same name)."""
    _FORMATS[fmt.name] = fmt
    return fmt


def registry() -> dict[str, Format]:
    """Every format, by name: this folder's modules (found once) and the registered ones."""
    if not _found[0]:
        _found[0] = True
        for info in pkgutil.iter_modules(__path__, __name__ + "."):
            if info.name.rsplit(".", 1)[-1] == "model":
                continue
            fmt = getattr(importlib.import_module(info.name), "FORMAT", None)
            if isinstance(fmt, Format) and fmt.name not in _FORMATS:
                _FORMATS[fmt.name] = fmt
    return _FORMATS


def _aliases() -> dict[str, str]:
    return {a: f.name for f in registry().values() for a in f.aliases}


def get_format(name: str) -> Format:
    """The format called ``name`` (or an alias of it); ValueError naming the choices."""
    formats = registry()
    fmt = formats.get(_aliases().get(name, name))
    if fmt is None:
        choices = ", ".join(sorted([*formats, *_aliases()]))
        raise ValueError(f"unknown format {name!r} (choose from {choices})")
    return fmt


def names_for(kinds: Iterable[type], *, aliases: bool = True) -> list[str]:
    """The names (and aliases) of the formats that show a report of these section kinds."""
    kinds = list(kinds)
    out = []
    for f in sorted(registry().values(), key=lambda f: f.name):
        if f.shows(kinds):
            out += [f.name, *(f.aliases if aliases else ())]
    return out


def render(report: Report, name: str, width: int | None = None) -> str:
    """``report`` in the format called ``name``."""
    return get_format(name).render(report, width)


def shown(report: Report, fmt: Format) -> list[Section]:
    """The sections of ``report`` that ``fmt`` shows."""
    return report.of(fmt.sections)
