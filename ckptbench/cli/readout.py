"""``--output``, the readout size per step, and the file name people type in its place.

``compare -o/--output FILE`` writes a report, so ``run --output r.json`` is what a newcomer
types for the result file; it was refused as "'r.json' is not a valid integer range", and
``plan --out p.json`` was answered "Did you mean '--output'?", which leads to the same
refusal. Both now say what ``--output`` is and where the command's output goes.
"""

from __future__ import annotations

import re

import click

from ckptbench.cli.values import WholeRange, shown_value

__all__ = ["READOUT", "file_option_hint", "misread_output_option"]


def file_option_hint(command: click.Command | None) -> str:
    """Where ``command``'s output goes, for a user who reached for a file option it lacks."""
    names = {p.name for p in (command.params if command is not None else ())}
    if "out" in names:
        return "the result file is --out FILE"
    if "save_file" in names:
        return "the table goes to stdout (> FILE); --save-costs FILE writes the step costs"
    return "the report goes to stdout (> FILE)"


class _Readout(WholeRange):
    """A positive integer; a value that is no number (a file name) is answered with what
    ``--output`` means and where the command's output goes."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
            try:
                int(value.strip())
            except ValueError:
                where = file_option_hint(ctx.command if ctx is not None else None)
                self.fail(
                    f"{shown_value(value)} is not a whole number: --output is the readout size "
                    "per step "
                    f"(values per step); {where}",
                    param,
                    ctx,
                )
        return super().convert(value, param, ctx)


READOUT = _Readout(min=1)


def misread_output_option(err: click.NoSuchOption) -> str | None:
    """The message for ``-o`` or ``--out`` given to a command that has neither but has the
    readout ``--output`` (run's ``-o``, plan's and profile's ``--out``); None otherwise."""
    command = err.ctx.command if err.ctx is not None else None
    params = command.params if command is not None else ()
    readout = any(p.name == "output" and isinstance(p.type, _Readout) for p in params)
    if err.option_name not in ("-o", "--out") or not readout:
        return None
    return (
        f"no such option {err.option_name!r}: {file_option_hint(command)}; --output is the "
        "readout size per step, not a file"
    )
