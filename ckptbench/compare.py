"""Compare result sets: one table of all cells, before/after deltas, and reports with plots.

Numbers are recomputed from the raw samples in the files (``analysis.summarize``), never
taken from stored ratios. Cells are paired by ``case.key`` *and* host (a laptop and a CI
runner are not the same machine); several files of one cell on one host are pooled, so
rerunning a sweep adds samples.

**Memory** of a mode is its median exact per-iteration peak; for normal and checkpointed the
compared figure is the overhead over baseline (what differentiation adds), for baseline the
peak itself. A memory change counts when ``|after - before| > max(tolerance * before,
floor)``: peaks are stable to ~0.03 MiB from process to process (DESIGN.md §4), so a 5%
tolerance with a 256 KiB floor (about 8 standard deviations) never fires on noise yet sees a
+20% regression of a 2 MiB overhead.

**Time** is compared per mode on the raw per-iteration wall times (warm-ups excluded) with a
two-sided Mann-Whitney U test *and* a minimum effect (default 10% change of the median). A
change is significant only when both hold:

* when the samples are large enough for the rank test to reach ``alpha`` (0.05), it must:
  ``p <= alpha`` and ``|median ratio - 1| >= min_effect``;
* with fewer samples (3 vs 3 repeats: the smallest two-sided p is 2/C(6,3) = 0.1, and 3 vs 4
  gives 0.057) the rank test alone can never be significant, so we require instead that the
  two samples be *separated by the minimum effect*: every sample of the slower side at least
  ``min_effect`` above every sample of the faster side. With iteration noise of 10% CV this
  flags an A/A pair ~1% of the time and a 1.5x slowdown ~90% of the time (25% CV: ~4% and
  ~35%; more repeats help, see the tests).

The rank test treats iterations as independent. A whole process running slow (frequency
scaling, a noisy neighbour) shifts all of its iterations together; the minimum effect is the
guard against that, and pooling reruns (several files per cell) puts such shifts into the
samples. This is why ``check`` never gates on time unless asked.

Renderers return strings (text, markdown, csv, a self-contained HTML page with embedded PNG
plots); nothing here prints.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ckptbench.analysis import summarize
from ckptbench.results import MODES, SETTINGS_FIELDS, Case, Mode, RunResult, load_result

__all__ = [
    "ALPHA",
    "FORMATS",
    "MEMORY_FLOOR_BYTES",
    "MEMORY_TOLERANCE",
    "MIN_EFFECT",
    "CellComparison",
    "Comparison",
    "MemoryDelta",
    "ModeComparison",
    "TimeTest",
    "compare",
    "load_results",
    "memory_delta",
    "render",
    "results_table",
    "time_test",
]

MIB = 2**20
ALPHA = 0.05
MIN_EFFECT = 0.10
MEMORY_TOLERANCE = 0.05
MEMORY_FLOOR_BYTES = 256 * 1024
FORMATS = ("table", "markdown", "csv", "html")
MANIFEST_KIND = "ckptbench-sweep"  # see ckptbench.sweep (not imported: keep this module light)


# --------------------------------------------------------------------------- loading


def _manifest_files(path: Path) -> list[Path] | None:
    """The result files a sweep manifest lists (those present), or None if not a manifest."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("kind") != MANIFEST_KIND:
        return None
    files = [path.parent / c["file"] for c in data.get("cells", []) if c.get("file")]
    return [f for f in files if f.exists()]


def load_results(paths: Iterable[str | Path]) -> list[RunResult]:
    """Load result files. A folder means its sweep manifest's cells (or every ``*.json`` in
    it); a manifest file means its cells. One-line ``ValueError`` on a bad or foreign file,
    a missing path, or when nothing is found."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            listed = _manifest_files(p / "sweep.json") if (p / "sweep.json").exists() else None
            found = listed if listed is not None else sorted(p.glob("*.json"))
            if not found:
                raise ValueError(f"{p}: no result files in this folder")
            files.extend(found)
        elif p.exists():
            listed = _manifest_files(p) if p.name == "sweep.json" else None
            files.extend(listed if listed is not None else [p])
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[Path] = set()
    results = []
    for f in files:
        real = f.resolve()
        if real in seen:
            continue
        seen.add(real)
        results.append(load_result(f))
    if not results:
        raise ValueError("no results to compare")
    return results


# --------------------------------------------------------------------------- statistics


def _p_floor(n1: int, n2: int) -> float:
    """Smallest two-sided p-value an exact Mann-Whitney test can give for n1 vs n2."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


@dataclass(frozen=True)
class TimeTest:
    """Before/after iteration times of one mode: effect, rank test and the verdict."""

    before_median_s: float
    after_median_s: float
    change: float  # after/before - 1 (medians)
    p_value: float
    p_floor: float  # the smallest p these sample sizes allow
    n_before: int
    n_after: int
    significant: bool
    rule: str  # which criterion decided (see the module docstring)
    processes_before: int = 1  # worker processes whose iterations were pooled
    processes_after: int = 1

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "no change"
        return "slower" if self.change > 0 else "faster"


def time_test(
    before: Sequence[float],
    after: Sequence[float],
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
) -> TimeTest | None:
    """Significance of a change in iteration times (None with fewer than 2 samples a side)."""
    from scipy.stats import mannwhitneyu

    a = [float(x) for x in before]
    b = [float(x) for x in after]
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.median(a), statistics.median(b)
    change = mb / ma - 1 if ma > 0 else math.inf
    p = float(mannwhitneyu(a, b, alternative="two-sided").pvalue)
    floor = _p_floor(len(a), len(b))
    big_enough = abs(change) >= min_effect
    if floor <= alpha:
        significant = p <= alpha and big_enough
        rule = f"rank test p<={alpha:g} and |change|>={min_effect:.0%}"
    else:
        low, high = (a, b) if change > 0 else (b, a)
        significant = big_enough and min(high) >= max(low) * (1 + min_effect)
        rule = f"n too small for p<={alpha:g} (min p {floor:.3g}): separated by >={min_effect:.0%}"
    return TimeTest(ma, mb, change, p, floor, len(a), len(b), significant, rule)


@dataclass(frozen=True)
class MemoryDelta:
    """Before/after memory of one mode (overhead over baseline, or the baseline's peak)."""

    before_bytes: int
    after_bytes: int
    tolerance: float
    floor_bytes: int

    @property
    def delta_bytes(self) -> int:
        return self.after_bytes - self.before_bytes

    @property
    def delta_rel(self) -> float | None:
        return self.delta_bytes / self.before_bytes if self.before_bytes > 0 else None

    @property
    def limit_bytes(self) -> float:
        """Largest change counted as noise: max(tolerance * before, floor)."""
        return max(self.tolerance * abs(self.before_bytes), self.floor_bytes)

    @property
    def changed(self) -> bool:
        return abs(self.delta_bytes) > self.limit_bytes

    @property
    def regressed(self) -> bool:
        return self.delta_bytes > self.limit_bytes


def memory_delta(
    before: int,
    after: int,
    *,
    tolerance: float = MEMORY_TOLERANCE,
    floor_bytes: int = MEMORY_FLOOR_BYTES,
) -> MemoryDelta:
    return MemoryDelta(int(before), int(after), tolerance, int(floor_bytes))


# --------------------------------------------------------------------------- pooling cells


@dataclass(frozen=True)
class PooledCell:
    """Every sample of one cell (key, host) over one or more result files."""

    case: Case
    host: str
    results: tuple[RunResult, ...]

    def iterations(self, mode: Mode) -> list[Any]:
        its: list[Any] = []
        for r in self.results:
            m = r.mode(mode)
            if m is not None and m.ok:
                its.extend(m.iterations)
        return its

    def times(self, mode: Mode) -> list[float]:
        return [it.wall_time_s for it in self.iterations(mode)]

    def peak(self, mode: Mode) -> int | None:
        its = self.iterations(mode)
        return int(statistics.median(it.peak_rss_bytes for it in its)) if its else None

    def memory(self, mode: Mode) -> int | None:
        """Overhead over baseline for normal/checkpointed; the peak for baseline."""
        peak = self.peak(mode)
        if mode is Mode.BASELINE or peak is None:
            return peak
        base = self.peak(Mode.BASELINE)
        return None if base is None else peak - base

    def processes(self, mode: Mode) -> int:
        return sum(1 for r in self.results if (m := r.mode(mode)) is not None and m.ok)

    def ok(self, mode: Mode) -> bool:
        return all((m := r.mode(mode)) is not None and m.ok for r in self.results)


def pool_results(
    results: Iterable[RunResult], match_host: bool
) -> dict[tuple[str, str], PooledCell]:
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.case.key, r.host if match_host else ""), []).append(r)
    return {k: PooledCell(v[0].case, k[1], tuple(v)) for k, v in groups.items()}


@dataclass(frozen=True)
class ModeComparison:
    mode: Mode
    memory: MemoryDelta | None
    time: TimeTest | None
    note: str = ""


@dataclass(frozen=True)
class CellComparison:
    key: str
    host: str
    case: Case
    modes: tuple[ModeComparison, ...]

    def mode(self, mode: Mode) -> ModeComparison:
        return next(m for m in self.modes if m.mode is mode)


def compare_cells(
    before: PooledCell,
    after: PooledCell,
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
) -> CellComparison:
    modes = []
    for mode in MODES:
        mb, ma = before.memory(mode), after.memory(mode)
        mem = None
        if mb is not None and ma is not None:
            mem = memory_delta(mb, ma, tolerance=memory_tolerance, floor_bytes=memory_floor_bytes)
        tt = time_test(before.times(mode), after.times(mode), min_effect=min_effect, alpha=alpha)
        if tt is not None:
            tt = replace(
                tt,
                processes_before=before.processes(mode),
                processes_after=after.processes(mode),
            )
        note = ""
        if not before.ok(mode) or not after.ok(mode):
            side = "before" if not before.ok(mode) else "after"
            note = f"{mode.value} did not measure OK {side}"
        modes.append(ModeComparison(mode, mem, tt, note))
    return CellComparison(after.case.key, after.host, after.case, tuple(modes))


# --------------------------------------------------------------------------- tables


def _summary(result: RunResult) -> dict[str, Any]:
    return summarize(result.case, result.modes)


def results_table(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per result file: the numbers people quote, recomputed from raw samples.

    Memory columns are bytes (RSS: touched pages), times seconds (median per iteration).
    """
    rows = []
    for r in results:
        s = _summary(r)
        c = r.case
        over = s["overhead_bytes"]
        times = s["time_s"]
        rows.append(
            {
                "key": c.key,
                "host": r.host,
                "model": c.model,
                "steps": c.steps,
                "snaps": c.snaps,
                "strategy": c.strategy,
                "hidden": c.hidden,
                "batch": c.batch,
                "baseline_peak_bytes": s["peak_rss_bytes"].get("baseline"),
                "normal_overhead_bytes": over.get("normal"),
                "checkpointed_overhead_bytes": over.get("checkpointed"),
                "normal_time_s": times.get("normal", {}).get("median"),
                "checkpointed_time_s": times.get("checkpointed", {}).get("median"),
                "slowdown": s["slowdown"],
                "memory_savings": s["memory_savings"],
                "forward_steps": s["forward_steps"],
                "forward_steps_optimal": s["forward_steps_optimal"],
                "evaluations": s["step_evaluations"],
                "evaluations_optimal": s["step_evaluations_optimal"],
                "grad_max_rel_err": s["grad_max_rel_err"],
                "status": "ok"
                if s["ok"]
                else ", ".join(f"{m}: {st}" for m, st in s["status"].items() if st != "ok"),
            }
        )
    return _with_int_columns(pd.DataFrame(rows))


def _with_int_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Byte and count columns as nullable integers (a missing value would make them floats)."""
    for col in df.columns:
        if col.endswith("_bytes") or col in {
            "forward_steps",
            "forward_steps_optimal",
            "evaluations",
            "evaluations_optimal",
            "n_before",
            "n_after",
        }:
            df[col] = df[col].astype("Int64")
    for col in ("memory_changed", "time_significant"):
        if col in df.columns:
            df[col] = df[col].astype("boolean")
    return df


@dataclass(frozen=True)
class Comparison:
    """All cells of ``after`` and, given ``before``, the matched before/after deltas."""

    after: tuple[RunResult, ...]
    before: tuple[RunResult, ...] = ()
    cells: tuple[CellComparison, ...] = ()
    only_before: tuple[tuple[str, str], ...] = ()  # (key, host) with no match in after
    only_after: tuple[tuple[str, str], ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # e.g. paired cells measured with other settings

    @property
    def has_before(self) -> bool:
        return bool(self.before)

    def table(self) -> pd.DataFrame:
        return results_table(self.after)

    def delta_table(self) -> pd.DataFrame:
        """One row per matched (cell, host, mode): memory delta and time test."""
        rows = []
        for cell in self.cells:
            for mc in cell.modes:
                mem, tt = mc.memory, mc.time
                rows.append(
                    {
                        "key": cell.key,
                        "host": cell.host,
                        "mode": mc.mode.value,
                        "memory_before_bytes": mem.before_bytes if mem else None,
                        "memory_after_bytes": mem.after_bytes if mem else None,
                        "memory_delta_bytes": mem.delta_bytes if mem else None,
                        "memory_delta_rel": mem.delta_rel if mem else None,
                        "memory_changed": mem.changed if mem else None,
                        "time_before_s": tt.before_median_s if tt else None,
                        "time_after_s": tt.after_median_s if tt else None,
                        "time_change": tt.change if tt else None,
                        "p_value": tt.p_value if tt else None,
                        "n_before": tt.n_before if tt else None,
                        "n_after": tt.n_after if tt else None,
                        "time_significant": tt.significant if tt else None,
                        "verdict": tt.verdict if tt else "n/a",
                        "note": mc.note,
                    }
                )
        return _with_int_columns(pd.DataFrame(rows))


def compare(
    after: Sequence[RunResult],
    before: Sequence[RunResult] | None = None,
    *,
    min_effect: float = MIN_EFFECT,
    alpha: float = ALPHA,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
    match_host: bool = True,
) -> Comparison:
    """Tabulate ``after``; with ``before``, pair cells by (key, host) and test every mode.

    Raises ``ValueError`` when ``before`` is given but no cell pairs (e.g. other hosts: pass
    ``match_host=False`` to pair across machines knowingly).
    """
    for name, value in (("min_effect", min_effect), ("memory_tolerance", memory_tolerance)):
        if not 0 <= value < 10:
            raise ValueError(f"{name} must be a fraction such as 0.05, got {value!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    settings = {
        "min_effect": min_effect,
        "alpha": alpha,
        "memory_tolerance": memory_tolerance,
        "memory_floor_bytes": memory_floor_bytes,
        "match_host": match_host,
    }
    if not before:
        return Comparison(after=tuple(after), settings=settings)
    a, b = pool_results(after, match_host), pool_results(before, match_host)
    common = [k for k in a if k in b]
    if not common:
        hosts_a = sorted({h for _, h in a}) if match_host else []
        hosts_b = sorted({h for _, h in b}) if match_host else []
        extra = f" (hosts: before {hosts_b}, after {hosts_a})" if hosts_a != hosts_b else ""
        raise ValueError(f"no cell of the two result sets matches by key and host{extra}")
    cells = tuple(
        compare_cells(
            b[k],
            a[k],
            min_effect=min_effect,
            alpha=alpha,
            memory_tolerance=memory_tolerance,
            memory_floor_bytes=memory_floor_bytes,
        )
        for k in common
    )
    return Comparison(
        after=tuple(after),
        before=tuple(before),
        cells=cells,
        only_before=tuple(k for k in b if k not in a),
        only_after=tuple(k for k in a if k not in b),
        settings=settings,
        notes=tuple(settings_notes(b, a, common)),
    )


#: Case fields outside case.key that still change what is measured.


def settings_notes(
    before: dict[tuple[str, str], PooledCell],
    after: dict[tuple[str, str], PooledCell],
    keys: Iterable[tuple[str, str]],
) -> list[str]:
    """Paired cells whose files disagree on settings the key leaves out (e.g. BLAS threads)."""
    notes = []
    for k in keys:
        cases = [r.case for r in (*before[k].results, *after[k].results)]
        differ = [f for f in SETTINGS_FIELDS if len({getattr(c, f) for c in cases}) > 1]
        if differ:
            values = "; ".join(f"{f} {sorted({getattr(c, f) for c in cases})}" for f in differ)
            notes.append(f"{k[0]}: paired files were measured with different {values}")
    return notes


# --------------------------------------------------------------------------- formatting


def _mib(n: Any, signed: bool = False) -> str:
    if _missing(n):
        return "-"
    return f"{n / MIB:+.2f}" if signed else f"{n / MIB:.2f}"


def _missing(v: Any) -> bool:
    return v is None or bool(pd.isna(v))


def _num(v: Any, fmt: str, suffix: str = "") -> str:
    """Format a number; "-" for None/NaN (pandas turns a missing int into a float NaN)."""
    if _missing(v):
        return "-"
    if fmt == "d":
        v = int(v)
    return format(v, fmt) + suffix


def _cell_rows(df: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    headers = [
        "cell",
        "host",
        "base MiB",
        "normal +MiB",
        "ckpt +MiB",
        "normal s",
        "ckpt s",
        "slowdown",
        "savings",
        "evals (opt)",
        "grad err",
        "status",
    ]
    rows = []
    for r in df.to_dict("records"):
        evals = _num(r["evaluations"], "d")
        rows.append(
            [
                f"{r['model']} l={r['steps']} s={r['snaps']} {r['strategy']}",
                r["host"] or "-",
                _mib(r["baseline_peak_bytes"]),
                _mib(r["normal_overhead_bytes"]),
                _mib(r["checkpointed_overhead_bytes"]),
                _num(r["normal_time_s"], ".3f"),
                _num(r["checkpointed_time_s"], ".3f"),
                _num(r["slowdown"], ".2f", "x"),
                _num(r["memory_savings"], ".1f", "x"),
                f"{evals} ({_num(r['evaluations_optimal'], 'd')})",
                _num(r["grad_max_rel_err"], ".1e"),
                r["status"],
            ]
        )
    return headers, rows


def _delta_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    headers = [
        "cell",
        "host",
        "mode",
        "memory before MiB",
        "after MiB",
        "delta",
        "time before s",
        "after s",
        "change",
        "p",
        "n",
        "time verdict",
    ]
    rows = []
    for cell in comparison.cells:
        c = cell.case
        for mc in cell.modes:
            mem, tt = mc.memory, mc.time
            delta = "-"
            if mem is not None:
                rel = f" ({mem.delta_rel:+.1%})" if mem.delta_rel is not None else ""
                flag = " CHANGED" if mem.changed else ""
                delta = f"{_mib(mem.delta_bytes, signed=True)}{rel}{flag}"
            rows.append(
                [
                    f"{c.model} l={c.steps} s={c.snaps} {c.strategy}",
                    cell.host or "-",
                    mc.mode.value,
                    _mib(mem.before_bytes) if mem else "-",
                    _mib(mem.after_bytes) if mem else "-",
                    delta,
                    _num(tt.before_median_s, ".4f") if tt else "-",
                    _num(tt.after_median_s, ".4f") if tt else "-",
                    f"{tt.change:+.1%}" if tt else "-",
                    f"{tt.p_value:.3f}" if tt else "-",
                    f"{tt.n_before}v{tt.n_after}" if tt else "-",
                    (tt.verdict if tt else "n/a") + (f" [{mc.note}]" if mc.note else ""),
                ]
            )
    return headers, rows


def _text_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 or (not c[:1].isdigit() and c[:1] not in "+-") else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    def esc(text: str) -> str:
        return text.replace("|", "\\|")

    out = ["| " + " | ".join(esc(h) for h in headers) + " |"]
    out.append("|" + "|".join("---" for _ in headers) + "|")
    out.extend("| " + " | ".join(esc(c) for c in r) + " |" for r in rows)
    return "\n".join(out)


def _rule_text(comparison: Comparison) -> str:
    s = comparison.settings
    return (
        f"Memory: changed when |delta| > max({s['memory_tolerance']:.0%} of before, "
        f"{s['memory_floor_bytes'] / MIB:.2f} MiB); normal/checkpointed compare overhead over "
        f"baseline. Time: two-sided Mann-Whitney U on per-iteration times, significant when "
        f"p <= {s['alpha']:g} and the median moved >= {s['min_effect']:.0%}; when the sample "
        f"sizes cannot reach p <= {s['alpha']:g}, the samples must be separated by "
        f">= {s['min_effect']:.0%}."
    )


def _single_process_note(comparison: Comparison) -> list[str]:
    single = any(
        mc.time is not None and min(mc.time.processes_before, mc.time.processes_after) < 2
        for cell in comparison.cells
        for mc in cell.modes
    )
    if not single:
        return []
    return [
        "Times come from one worker process per side: a whole process running slow (other "
        "load on the machine) shifts all its iterations and is not in the samples. Rerun the "
        "sweep into a second folder and pass both (files of one cell on one host pool) "
        "before trusting a time verdict."
    ]


def _unmatched(comparison: Comparison) -> list[str]:
    out = [*comparison.notes, *_single_process_note(comparison)]
    for label, keys in (
        ("only before", comparison.only_before),
        ("only after", comparison.only_after),
    ):
        if keys:
            out.append(f"{label}: " + ", ".join(f"{k}@{h}" if h else k for k, h in keys))
    return out


def render(comparison: Comparison, fmt: str = "table") -> str:
    """The comparison as ``table`` (plain text), ``markdown``, ``csv`` or ``html``."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    if fmt == "csv":
        if comparison.has_before:
            return comparison.delta_table().to_csv(index=False)
        return comparison.table().to_csv(index=False)
    if fmt == "html":
        from ckptbench.plots import render_html  # matplotlib only when asked for

        return render_html(comparison)
    table_fn = _text_table if fmt == "table" else _md_table
    parts = []
    head, rows = _cell_rows(comparison.table())
    title = "Cells" if fmt == "table" else "## Cells"
    parts += [title, table_fn(head, rows)]
    if comparison.has_before:
        head, rows = _delta_rows(comparison)
        parts += ["", "Before -> after" if fmt == "table" else "## Before → after"]
        parts += [table_fn(head, rows), "", _rule_text(comparison)]
        parts += _unmatched(comparison)
    return "\n".join(parts) + "\n"
