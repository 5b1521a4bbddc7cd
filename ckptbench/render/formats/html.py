"""HTML: one self-contained page (no external files; plots embedded as PNG): a heading
per section, tables with their notes, lists, definitions, the gate's verdicts (failures in
full, passes folded) and the plots. The full page of a command (``page``): compare's
report with summary, provenance and plots."""

from __future__ import annotations

import base64
import html
from typing import Any

from ckptbench.render.formats import Format
from ckptbench.render.formats.model import Figure, Prose, Report, TableSection, Verdicts
from ckptbench.render.table import shown_notes, to_html
from ckptbench.render.verdicts import gate_rule

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}
th{background:#f2f2f2} td.r{text-align:right} td.l{text-align:left}
.changed{background:#fde0dc} .better{background:#e3f4e1} img{max-width:100%}
.note{color:#555;font-size:12px} .warn{color:#8a4b00} .fail{color:#b00020;font-weight:bold}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}
dt{color:#555} dd{margin:0}
"""


def esc(text: Any) -> str:
    return html.escape(str(text))


def _prose(p: Prose) -> list[str]:
    out = [f"<h2>{esc(p.heading)}</h2>"] if p.heading else []
    cls = f' class="{p.css}"' if p.css else ""
    if p.style == "definitions":
        body = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in p.pairs)
        return [*out, f"<dl>{body}</dl>"]
    if p.style == "list":
        return [*out, f"<ul{cls}>", *(f"<li>{esc(line)}</li>" for line in p.lines), "</ul>"]
    css = p.css or ("note" if p.style == "note" else "")
    tag = f"<p class='{css}'>" if css else "<p>"
    return [*out, *(f"{tag}{esc(line)}</p>" for line in p.lines)]


def _table(s: TableSection) -> list[str]:
    out = [f"<h2>{esc(s.heading)}</h2>"] if s.heading else []
    if s.intro:
        out.append(f"<p class='note'>{esc(s.intro)}</p>")
    out.append(to_html(s.table, list(s.row_classes) or None))
    return out + [f"<p class='note'>{esc(n)}</p>" for n in shown_notes(s.table) if s.notes]


def _rows(lines: list[Any]) -> list[str]:
    out = ["<table><tr><th>result</th><th>cell</th><th>check</th><th>numbers</th></tr>"]
    for line in lines:
        mark = "pass" if line.passed else "FAIL"
        cls = "" if line.passed else ' class="changed"'
        out.append(
            f"<tr{cls}><td class='l'>{mark}</td><td class='l'>{esc(line.key)}</td>"
            f"<td class='l'>{esc(line.check)}</td><td class='l'>{esc(line.detail)}</td></tr>"
        )
    return [*out, "</table>"]


def _verdicts(v: Verdicts) -> list[str]:
    """Failed checks in full, passed ones folded (asv and CI pages lead with failures)."""
    lines = [x for x in v.report.lines if not v.expect_only or x.check != "status"]
    out = ["<h2>[expect] verdicts</h2>" if v.expect_only else f"<h2>{esc(v.report.headline)}</h2>"]
    if not lines:
        return [*out, "<p class='note'>no [expect] thresholds</p>"]
    failed = [x for x in lines if not x.passed]
    passed = [x for x in lines if x.passed]
    out += [f"<p class='note'>{esc(s)}</p>" for s in v.report.sources]  # where limits come from
    out.append(f"<p>{len(failed)} of {len(lines)} checks failed.</p>")
    if failed:
        out += _rows(failed)
    if passed:
        out += [f"<details><summary>{len(passed)} passed</summary>", *_rows(passed)]
        out.append("</details>")
    # the tolerances (a gate against a reference only), then the notes, as text says them
    rule = gate_rule(v.report) if v.report.settings.get("reference") else ""
    return out + [f"<p class='note'>{esc(n)}</p>" for n in (rule, *v.report.notes) if n]


def _figure(f: Figure) -> list[str]:
    from ckptbench.render.plots import figure_png

    out = [f"<h2>{esc(f.heading)}</h2>"]
    for make, alt in f.images:
        data = base64.b64encode(figure_png(make())).decode("ascii")
        out.append(f'<p><img alt="{esc(alt)}" src="data:image/png;base64,{data}"></p>')
    return out + ([f"<p class='note'>{esc(f.note)}</p>"] if f.note else [])


def render_html(report: Report, width: int | None = None) -> str:
    """The page: the report's title as heading, then each section."""
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{esc(report.title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>",
    ]
    for s in report.of(FORMAT.sections):
        if isinstance(s, TableSection):
            parts += _table(s)
        elif isinstance(s, Prose):
            parts += _prose(s)
        elif isinstance(s, Verdicts):
            parts += _verdicts(s)
        elif isinstance(s, Figure):
            parts += _figure(s)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


FORMAT = Format(
    "html",
    ".html",
    render_html,
    (TableSection, Prose, Verdicts, Figure),
    page=True,
    help="one self-contained HTML page with the plots",
)
