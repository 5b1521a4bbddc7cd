"""The self-contained HTML report of a comparison: a summary first, then provenance, the
``[expect]`` verdicts, busy-machine warnings, the tables and the plots (embedded PNG)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

from ckptbench.analysis import Comparison
from ckptbench.analysis.gate import GateLine, GateReport
from ckptbench.render.caveats import grouped_warning_lines
from ckptbench.render.cells import (
    cells_table,
    delta_table,
    invocations_table,
    rule_text,
    unmatched_lines,
)
from ckptbench.render.format import cell_labels, fmt_ratio
from ckptbench.render.plots import (
    TRADEOFF_CAPTION,
    cell_family,
    family_titles,
    figure_png,
    plot_evaluations,
    plot_timeline,
    plot_tradeoff,
)
from ckptbench.render.table import to_html
from ckptbench.results.schema import RunResult

__all__ = ["render_html"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
table{border-collapse:collapse;font-size:12px;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}
th{background:#f2f2f2} td.r{text-align:right} td.l{text-align:left}
.changed{background:#fde0dc} .better{background:#e3f4e1} img{max-width:100%}
.note{color:#555;font-size:12px} .warn{color:#8a4b00} .fail{color:#b00020;font-weight:bold}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;font-size:13px}
dt{color:#555} dd{margin:0}
"""


def _esc(text: Any) -> str:
    return html.escape(str(text))


def _img(fig: Any, alt: str) -> str:
    data = base64.b64encode(figure_png(fig)).decode("ascii")
    return f'<p><img alt="{_esc(alt)}" src="data:image/png;base64,{data}"></p>'


def _summary(comparison: Comparison) -> list[str]:
    results = comparison.after
    failed = [r for r in results if not r.ok]
    items = [f"{len(results)} result file(s)", f"{len(failed)} with a failed mode"]
    best = None
    for r, label in zip(results, cell_labels([r.case for r in results]), strict=True):
        s = r.summary
        savings = s.memory_savings.value
        if savings is not None and (best is None or savings > best[0]):
            best = (savings, s.slowdown.value, label)
    if best is not None:
        items.append(
            f"best memory savings {fmt_ratio(best[0], 1)} at slowdown {fmt_ratio(best[1])} "
            f"({best[2]})"
        )
    if comparison.has_before:
        worse_mem = sum(
            1 for c in comparison.cells for m in c.modes if m.memory and m.memory.regressed
        )
        slower = sum(
            1 for c in comparison.cells for m in c.modes if m.time and m.time.verdict == "slower"
        )
        items.append(
            f"against the reference: {len(comparison.cells)} paired cell(s), {worse_mem} memory "
            f"regression(s), {slower} significantly slower mode(s)"
        )
    cls = ' class="fail"' if failed else ""
    return ["<h2>Summary</h2>", f"<ul{cls}>", *(f"<li>{_esc(i)}</li>" for i in items), "</ul>"]


def _blas(env: dict[str, Any]) -> str:
    blas = (env.get("numpy") or {}).get("blas") or {}
    if not isinstance(blas, dict):
        return "-"
    return " ".join(str(v) for v in (blas.get("name"), blas.get("version")) if v) or "-"


def _span(stamps: list[str]) -> str:
    if not stamps:
        return "-"
    return stamps[0] if stamps[0] == stamps[-1] else f"{stamps[0]} to {stamps[-1]}"


def _provenance(results: Sequence[RunResult]) -> list[str]:
    def values(get: Any) -> str:
        seen = sorted({str(v) for r in results if (v := get(r)) not in (None, "")})
        return ", ".join(seen) if seen else "-"

    def env(r: RunResult, *path: str) -> Any:
        d: Any = r.environment
        for p in path:
            d = d.get(p) if isinstance(d, dict) else None
        return d

    rows = [
        ("measured", _span(sorted(r.created for r in results if r.created))),
        ("hosts", values(lambda r: r.host)),
        ("CPU", values(lambda r: env(r, "cpu_model"))),
        ("Python", values(lambda r: env(r, "python_version"))),
        ("numpy", values(lambda r: env(r, "numpy", "numpy_version"))),
        ("BLAS", values(lambda r: _blas(r.environment))),
        ("autograd", values(lambda r: env(r, "numpy", "autograd_version"))),
        ("ckptbench", values(lambda r: r.tool_version)),
        ("commit", values(lambda r: env(r, "git_commit"))),
        ("repeats", values(lambda r: r.case.repeats)),
        ("warm-up", values(lambda r: r.case.warmup)),
        ("BLAS threads", values(lambda r: r.case.threads)),
        ("peak method", values(lambda r: env(r, "peak_method"))),
    ]
    body = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in rows)
    return ["<h2>Provenance</h2>", f"<dl>{body}</dl>"]


def _verdict_rows(lines: Sequence[GateLine]) -> list[str]:
    out = ["<table><tr><th>result</th><th>cell</th><th>check</th><th>numbers</th></tr>"]
    for line in lines:
        mark = "pass" if line.passed else "FAIL"
        cls = "" if line.passed else ' class="changed"'
        out.append(
            f"<tr{cls}><td class='l'>{mark}</td><td class='l'>{_esc(line.key)}</td>"
            f"<td class='l'>{_esc(line.check)}</td><td class='l'>{_esc(line.detail)}</td></tr>"
        )
    out.append("</table>")
    return out


def _verdicts(report: GateReport | None) -> list[str]:
    """Failed checks in full, passed ones folded (asv and CI pages lead with failures)."""
    if report is None:
        return []
    lines = [line for line in report.lines if line.check != "status"]
    out = ["<h2>[expect] verdicts</h2>"]
    if not lines:
        return [*out, "<p class='note'>no [expect] thresholds</p>"]
    failed = [line for line in lines if not line.passed]
    passed = [line for line in lines if line.passed]
    out.append(f"<p>{len(failed)} of {len(lines)} checks failed.</p>")
    if failed:
        out += _verdict_rows(failed)
    if passed:
        out += [f"<details><summary>{len(passed)} passed</summary>", *_verdict_rows(passed)]
        out.append("</details>")
    return out


def _warnings(results: Sequence[RunResult]) -> list[str]:
    """One item per kind of warning, naming the cells it applies to."""
    labels = cell_labels([r.case for r in results])
    out = [f"<li>{_esc(w)}</li>" for w in grouped_warning_lines(results, labels)]
    if not out:
        return []
    return ["<h2>Warnings</h2>", "<ul class='warn'>", *out, "</ul>"]


def _missing(missing: Sequence[tuple[str, str]]) -> list[str]:
    """Cells a sweep manifest lists whose result file is absent (``store.missing_cells``)."""
    if not missing:
        return []
    items = [f"<li>{_esc(key)}: {_esc(what)}</li>" for key, what in missing]
    return [
        f"<h2>Missing cells</h2><p class='warn'>{len(missing)} cell(s) listed in the sweep "
        "manifest have no result file; they are not in the tables below.</p>",
        "<ul class='warn'>",
        *items,
        "</ul>",
    ]


def render_html(
    comparison: Comparison,
    verdicts: GateReport | None = None,
    max_timelines: int = 24,
    missing: Sequence[tuple[str, str]] = (),
) -> str:
    """One self-contained page (no external files): summary, the ``missing`` cells (key,
    file and state) a sweep manifest lists without a file, provenance, ``verdicts`` (the
    gate's [expect] checks, when given), warnings, tables, then the plots."""
    results = list(comparison.after)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ckptbench report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>ckptbench report</h1>",
        *_summary(comparison),
        *_missing(missing),
        *_provenance(results),
        *_verdicts(verdicts),
        *_warnings(results),
        "<h2>Cells</h2>",
        "<p class='note'>Memory is RSS (touched pages), median exact per-iteration peak; "
        "overhead is over the forward-only baseline in an identical fresh process. Times are "
        "median seconds per iteration.</p>",
    ]
    cells = cells_table(results)
    parts.append(to_html(cells))
    parts += [f"<p class='note'>{_esc(n)}</p>" for n in cells.notes]
    pooled = invocations_table(results)
    if pooled is not None:
        parts += ["<h2>Invocations of one cell</h2>", to_html(pooled)]
        parts += [f"<p class='note'>{_esc(n)}</p>" for n in pooled.notes]
    if comparison.has_before:
        deltas = delta_table(comparison)
        classes = []
        for cell in comparison.cells:
            for mc in cell.modes:
                worse = (mc.memory and mc.memory.regressed) or (
                    mc.time and mc.time.verdict == "slower"
                )
                better = (mc.memory and mc.memory.changed) or (mc.time and mc.time.significant)
                classes.append("changed" if worse else "better" if better else "")
        parts += ["<h2>Before → after</h2>", to_html(deltas, classes)]
        parts.append(f"<p class='note'>{_esc(rule_text(comparison))}</p>")
        parts += [f"<p class='note'>{_esc(u)}</p>" for u in unmatched_lines(comparison)]
    groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in results:
        groups.setdefault(cell_family(r.case), []).append(r)
    before_groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in comparison.before:
        before_groups.setdefault(cell_family(r.case), []).append(r)
    titles = family_titles([g[0].case for g in groups.values()])
    parts.append("<h2>Memory-time trade-off</h2>")
    for (family, group), title in zip(groups.items(), titles, strict=True):
        fig = plot_tradeoff(group, before_groups.get(family, ()), title=title)
        parts.append(_img(fig, f"trade-off {title}"))
    parts.append(f"<p class='note'>{_esc(TRADEOFF_CAPTION)}</p>")
    parts.append("<h2>Step evaluations</h2>")
    parts.append(_img(plot_evaluations(results), "evaluations"))
    parts.append("<h2>RSS timelines</h2>")
    shown = [r for r in results if any(m.timeline for m in r.modes)][:max_timelines]
    labels = dict(zip(map(id, results), cell_labels([r.case for r in results]), strict=True))
    for r in shown:
        parts.append(_img(plot_timeline(r, labels[id(r)]), f"timeline {labels[id(r)]}"))
    if len(shown) < len(results):
        parts.append(f"<p class='note'>{len(results) - len(shown)} timeline(s) not shown.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
