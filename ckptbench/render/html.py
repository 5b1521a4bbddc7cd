"""The full report of a comparison (the HTML page): a summary first, then provenance, the
``[expect]`` verdicts, busy-machine warnings, the tables and the plots, as sections of a
:class:`~ckptbench.render.formats.model.Report` that the ``html`` format renders."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ckptbench.analysis import Comparison
from ckptbench.analysis.gate import GateReport
from ckptbench.render.caveats import grouped_warning_lines
from ckptbench.render.cells import (
    cells_table,
    delta_table,
    invocations_table,
    rule_text,
    unmatched_lines,
)
from ckptbench.render.format import cell_labels, fmt_ratio, told_apart
from ckptbench.render.formats.model import (
    Figure,
    Prose,
    Report,
    Section,
    TableSection,
    Verdicts,
)
from ckptbench.render.plots import (
    TRADEOFF_CAPTION,
    cell_family,
    family_titles,
    plot_evaluations,
    plot_timeline,
    plot_tradeoff,
)
from ckptbench.render.trace import trace_page
from ckptbench.results.schema import RunResult

__all__ = ["page_sections", "render_html"]


def _summary(comparison: Comparison) -> Prose:
    results = comparison.after
    failed = [r for r in results if not r.ok]
    items = [f"{len(results)} result file(s)", f"{len(failed)} with a failed mode"]
    best = None
    for r, label in zip(results, _labels(results), strict=True):
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
    return Prose(tuple(items), "Summary", "list", css="fail" if failed else "")


def _labels(results: Sequence[RunResult]) -> list[str]:
    """Each result's cell label; where several share one, with the file it was read from."""
    return told_apart(cell_labels([r.case for r in results]), results)


def _blas(env: dict[str, Any]) -> str:
    blas = (env.get("numpy") or {}).get("blas") or {}
    if not isinstance(blas, dict):
        return "-"
    return " ".join(str(v) for v in (blas.get("name"), blas.get("version")) if v) or "-"


def _span(stamps: list[str]) -> str:
    if not stamps:
        return "-"
    return stamps[0] if stamps[0] == stamps[-1] else f"{stamps[0]} to {stamps[-1]}"


def _provenance(results: Sequence[RunResult]) -> Prose:
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
        ("CPUs allowed", values(lambda r: env(r, "cpu_affinity"))),
        ("workers' CPUs", _worker_cpus(results)),
        ("Python", values(lambda r: env(r, "python_version"))),
        ("numpy", values(lambda r: env(r, "numpy", "numpy_version"))),
        ("BLAS", values(lambda r: _blas(r.environment))),
        ("autograd", values(lambda r: env(r, "numpy", "autograd_version"))),
        *(
            (name, values(lambda r, name=name: env(r, "numpy", f"{name}_version")))
            for name in ("torch", "jax", "jaxlib", "equinox")
            if any(env(r, "numpy", f"{name}_version") for r in results)
        ),
        ("ckptbench", values(lambda r: r.tool_version)),
        ("commit", values(lambda r: env(r, "git_commit"))),
        ("repeats", values(lambda r: r.case.repeats)),
        ("warm-up", values(lambda r: r.case.warmup)),
        ("BLAS threads", values(lambda r: r.case.threads)),
        ("peak method", values(lambda r: env(r, "peak_method"))),
    ]
    return Prose(heading="Provenance", style="definitions", pairs=tuple(rows))


def _worker_cpus(results: Sequence[RunResult]) -> str:
    """The CPUs the measured workers could run on, where that is not the run's own set
    (a JAX worker with one thread pins itself to one CPU); "as allowed" where every worker
    that said had the run's; "-" where none said (results from before they did)."""
    said = [(m.cpu_affinity, r.environment.get("cpu_affinity")) for r in results for m in r.modes]
    said = [(cpus, allowed) for cpus, allowed in said if cpus]
    other = sorted({cpus for cpus, allowed in said if cpus != allowed})
    return ", ".join(other) if other else ("as allowed" if said else "-")


def _warnings(results: Sequence[RunResult]) -> list[Prose]:
    """One item per kind of warning, naming the cells it applies to."""
    lines = grouped_warning_lines(results, _labels(results))
    return [Prose(tuple(lines), "Warnings", "list", css="warn")] if lines else []


def _missing(missing: Sequence[tuple[str, str]]) -> list[Prose]:
    """Cells a sweep manifest lists whose result file is absent (``store.missing_cells``)."""
    if not missing:
        return []
    intro = (
        f"{len(missing)} cell(s) listed in the sweep manifest have no result file; they are "
        "not in the tables below."
    )
    items = tuple(f"{key}: {what}" for key, what in missing)
    return [
        Prose((intro,), "Missing cells", css="warn"),
        Prose(items, style="list", css="warn"),
    ]


def _row_classes(comparison: Comparison) -> tuple[str, ...]:
    classes = []
    for cell in comparison.cells:
        for mc in cell.modes:
            worse = (mc.memory and mc.memory.regressed) or (mc.time and mc.time.verdict == "slower")
            better = (mc.memory and mc.memory.changed) or (mc.time and mc.time.significant)
            classes.append("changed" if worse else "better" if better else "")
    return tuple(classes)


def _figures(comparison: Comparison, max_timelines: int) -> list[Figure]:
    results = list(comparison.after)
    groups: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in results:
        groups.setdefault(cell_family(r.case), []).append(r)
    before: dict[tuple[Any, ...], list[RunResult]] = {}
    for r in comparison.before:
        before.setdefault(cell_family(r.case), []).append(r)
    titles = family_titles([g[0].case for g in groups.values()])
    tradeoff = tuple(
        (partial(plot_tradeoff, group, before.get(family, ()), title=title), f"trade-off {title}")
        for (family, group), title in zip(groups.items(), titles, strict=True)
    )
    shown = [r for r in results if any(m.timeline for m in r.modes)][:max_timelines]
    labels = dict(zip(map(id, results), _labels(results), strict=True))
    lines = tuple(
        (partial(plot_timeline, r, labels[id(r)]), f"timeline {labels[id(r)]}") for r in shown
    )
    left = len(results) - len(shown)
    return [
        Figure("Memory-time trade-off", tradeoff, TRADEOFF_CAPTION),
        Figure("Step evaluations", ((partial(plot_evaluations, results), "evaluations"),)),
        Figure("RSS timelines", lines, f"{left} timeline(s) not shown." if left else ""),
    ]


_CELLS_NOTE = (
    "Memory is RSS (touched pages), median exact per-iteration peak; overhead is over the "
    "forward-only baseline in an identical fresh process. Times are median seconds per "
    "iteration."
)


def page_sections(
    comparison: Comparison,
    verdicts: GateReport | None = None,
    max_timelines: int = 24,
    missing: Sequence[tuple[str, str]] = (),
) -> list[Section]:
    """The full page of a comparison: summary, the ``missing`` cells (key, file and state) a
    sweep manifest lists without a file, provenance, ``verdicts`` (the gate's [expect]
    checks, when given), warnings, tables, then the plots."""
    results = list(comparison.after)
    sections: list[Section] = [_summary(comparison), *_missing(missing), _provenance(results)]
    if verdicts is not None:
        sections.append(Verdicts(verdicts, expect_only=True))
    sections += _warnings(results)
    sections.append(TableSection(cells_table(results), "Cells", _CELLS_NOTE))
    pooled = invocations_table(results)
    if pooled is not None:
        sections.append(TableSection(pooled, "Invocations of one cell"))
    if comparison.has_before:
        deltas = delta_table(comparison)
        sections.append(
            TableSection(deltas, "Before → after", row_classes=_row_classes(comparison))
        )
        notes = (rule_text(comparison), *unmatched_lines(comparison))
        sections.append(Prose(notes, style="note"))
    return sections + _figures(comparison, max_timelines) + trace_page(results)


def render_html(
    comparison: Comparison,
    verdicts: GateReport | None = None,
    max_timelines: int = 24,
    missing: Sequence[tuple[str, str]] = (),
) -> str:
    """One self-contained page (no external files): :func:`page_sections` in the ``html``
    format of the registry (``render.formats``)."""
    from ckptbench.render.formats import get_format

    report = Report(
        "ckptbench report", tuple(page_sections(comparison, verdicts, max_timelines, missing))
    )
    return get_format("html").render(report, None)
