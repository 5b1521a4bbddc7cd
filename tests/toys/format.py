"""A toy output format declared outside ckptbench: one line per table row, the headings
as ``== heading ==`` and prose as ``> line``. It proves that a format is one entry of the
registry: ``compare --format toy`` renders with it without editing any ckptbench module."""

from __future__ import annotations

from ckptbench.render.formats import Format, Prose, Report, TableSection


def render_toy(report: Report, width: int | None = None) -> str:
    out = [f"# {report.title}"]
    for s in report.of(TOY.sections):
        if isinstance(s, TableSection):
            out.append(f"== {s.heading or s.table.title} ==")
            out += [" ; ".join(c.text(r) for c in s.table.shown) for r in s.table.records]
        elif isinstance(s, Prose):
            out += [f"> {line}" for line in s.lines]
    return "\n".join(out) + "\n"


TOY = Format("toy", ".toy", render_toy, (TableSection, Prose), help="a toy")
