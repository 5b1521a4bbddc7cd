"""``ckptbench check``: the CI gate. Pass/fail per cell, a markdown summary, an exit code.

What is checked, per cell (``case.key`` on one host):

* **status** — every mode measured OK and the file holds all three modes (a failed, crashed,
  timed-out or partial cell fails the gate); a cell the sweep manifest lists whose file is
  missing fails too (``present``);
* **expectations** — the config's ``[expect]`` thresholds (``memory_savings_min``,
  ``slowdown_max``, ``grad_max_rel_err_max``, ``forward_steps_exact``: the counted advances
  and taped steps equal the planned schedule's, for revolve the binomial optimum);
* **memory vs a reference** (``reference=``) — gated by default: the baseline's peak and the
  normal/checkpointed overhead over baseline may not grow by more than
  ``max(memory_tolerance * reference, memory_floor_bytes)`` (5% and 256 KiB by default:
  peaks repeat to ~0.03 MiB); a reference cell without a result fails, a new one passes;
* **time vs a reference** — only with ``time_tolerance`` (e.g. 0.25): a mode fails when the
  95% interval of its time ratio new/old (:func:`ckptbench.analysis.time_change`, the
  estimator ``run`` reports for the slowdown) lies above ``1 + time_tolerance``, or a side
  shows no time for it (not ok in every round: its other rounds are not compared). Time is
  never gated by default (docs/architecture.md, "Noise and rounds").

Exit codes: 0 every check passed; 1 a regression, an unmet expectation or a failed cell.
Bad input (unreadable files, nothing to compare) raises ``ValueError`` (the CLI exits 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from ckptbench.analysis import (
    MEMORY_FLOOR_BYTES,
    MEMORY_TOLERANCE,
    PooledCell,
    memory_delta,
    pair,
    time_change,
)
from ckptbench.analysis.expectations import ExpectSource, expect_for, manifest_expectations
from ckptbench.analysis.limits import limit_sources, sweep_configs
from ckptbench.analysis.pairing import diluted_cell, same_measurements
from ckptbench.analysis.stats import figure_apart
from ckptbench.results.schema import MODES, Mode, RunResult, Status
from ckptbench.results.store import load_results, missing_cells
from ckptbench.results.units import interval_text, size_text
from ckptbench.schedules import get_strategy
from ckptbench.sweep.config import Expect, load_config
from ckptbench.sweep.preflight import unlisted_results

MIB = 2**20

__all__ = [
    "GateLine",
    "GateReport",
    "check",
    "manifest_expectations",
    "run_check",
]


@dataclass(frozen=True)
class GateLine:
    """One check of one cell."""

    key: str
    host: str
    check: str  # "status", "memory_savings_min", "memory:normal", "time:checkpointed", ...
    passed: bool
    detail: str


@dataclass(frozen=True)
class GateReport:
    lines: tuple[GateLine, ...]
    notes: tuple[str, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    #: where the limits come from ('limits: ...') and warnings about them ('warning: ...'),
    #: said right after the headline
    sources: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[GateLine, ...]:
        return tuple(line for line in self.lines if not line.passed)

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def cells(self) -> tuple[tuple[str, str], ...]:
        """The (key, host) cells the lines are about. A line without a host (cells paired
        across hosts, a cell missing from its sweep) is about its key's cells, not another."""
        hosts = self._hosts()
        return tuple(dict.fromkeys(c for x in self.lines for c in _cells_of(x, hosts)))

    def _hosts(self) -> dict[str, list[str]]:
        """Each key's hosts, in the order the lines name them (lines without one left out)."""
        out: dict[str, list[str]] = {}
        for key, host in dict.fromkeys((x.key, x.host) for x in self.lines if x.host):
            out.setdefault(key, []).append(host)
        return out

    @property
    def headline(self) -> str:
        """'ckptbench check: PASSED (12 checks on 2 cells)' or FAILED with the counts."""
        n_cells, n_checks = len(self.cells), len(self.lines)
        counts = f"{n_checks} check{'s' * (n_checks != 1)} on {n_cells} cell{'s' * (n_cells != 1)}"
        if self.passed:  # status lines alone gate no figure: said in the verdict itself
            only = all(x.check in ("status", "present") for x in self.lines)
            return f"ckptbench check: PASSED ({counts}{'; status only, no limits' * only})"
        hosts = self._hosts()
        failed_cells = len({c for f in self.failures for c in _cells_of(f, hosts)})
        return (
            f"ckptbench check: FAILED ({len(self.failures)} of {n_checks} checks, "
            f"{failed_cells} of {n_cells} cells)"
        )


def _cells_of(line: GateLine, hosts: Mapping[str, list[str]]) -> tuple[tuple[str, str], ...]:
    """The cells ``line`` is about: its own, or without a host every host of its key."""
    if line.host or not hosts.get(line.key):
        return ((line.key, line.host),)
    return tuple((line.key, h) for h in hosts[line.key])


# --------------------------------------------------------------------------- expectations


@lru_cache(maxsize=256)
def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "n/a" if v is None else format(v, spec)


def _typical(tc: Any) -> str:
    """What a time line's two times are (``stats.TimeChange``)."""
    several = min(tc.processes_before, tc.processes_after) >= 2
    return "process medians (geometric mean)" if several else "median"


def _need(value: str, condition: str, passed: bool) -> str:
    """Both sides of a threshold: '23.10x, need >= 25x' (failed) or '30.20x (need >= 25x)'."""
    return f"{value} (need {condition})" if passed else f"{value}, need {condition}"


def _expect_lines(result: RunResult, expect: Expect) -> list[GateLine]:
    c = result.case
    s = result.summary
    out = []

    def add(name: str, passed: bool, detail: str) -> None:
        out.append(GateLine(c.key, result.host, name, passed, detail))

    if (least := expect.memory_savings_min) is not None:
        v, got = s.memory_savings.value, None
        if v is None and s.memory_savings_bound is not None:
            # checkpointed's overhead is within its noise: the lower bound its interval allows
            v = s.memory_savings_bound
            got = f">= {v:.2f}x (checkpointed overhead within its noise)"
        elif v is None:
            got = "no figure (an overhead not measured ok, or at or below the baseline)"
        ok = v is not None and v >= least
        add(
            "memory_savings_min",
            ok,
            _need(got or f"{figure_apart(v, least)}x", f">= {least:g}x", ok),
        )
    if (most := expect.slowdown_max) is not None:  # on the estimate, its interval shown
        v, ci = s.slowdown.value, s.slowdown.interval
        ok = v is not None and v <= most
        got = f"{figure_apart(v, most)}x" if v is not None else "no figure (a time not measured ok)"
        if v is not None and ci:
            wide = " (the interval reaches past the limit)" if ok and ci[1] > most else ""
            got += f" [{', '.join(interval_text(ci[0], ci[1], 2))}]{wide}"
        add("slowdown_max", ok, _need(got, f"<= {most:g}x", ok))
    if expect.grad_max_rel_err_max is not None:
        v = s.grad_max_rel_err
        ok = v is not None and v <= expect.grad_max_rel_err_max
        limit = f"<= {expect.grad_max_rel_err_max:.1e}"
        add("grad_max_rel_err_max", ok, _need(_fmt(v, ".2e"), limit, ok))
    if expect.forward_steps_exact:
        ckpt = result.mode(Mode.CHECKPOINTED)
        counts = s.mode(Mode.CHECKPOINTED).counters
        adv, taped = counts.steps_advanced, counts.steps_taped
        spec = get_strategy(c.strategy)
        planned = spec.step_counts(c.steps, c.snaps, ckpt.plan if ckpt is not None else None)
        if planned is None and spec.ours:
            add("forward_steps_exact", False, f"{c.strategy}: no plan recorded to count against")
        elif planned is None:
            add("forward_steps_exact", True, f"not applicable to {c.strategy} (not our schedule)")
        else:
            ok = adv == planned[0] and taped == planned[1]
            add(
                "forward_steps_exact",
                ok,
                f"advanced {_fmt(adv, 'd')} taped {_fmt(taped, 'd')}; "
                f"schedule plans {planned[0]} and {planned[1]}",
            )
    return out


def _status_line(result: RunResult) -> GateLine:
    missing = [m.value for m in MODES if result.mode(m) is None]
    rounds: dict[tuple[str, str], list[int]] = {}  # (mode, status) -> its 1-based rounds
    expected = set((result.environment or {}).get("expect_oom") or ())  # run --expect-oom
    wrong = [
        m
        for m in result.modes
        if not m.ok and not (m.status is Status.OUT_OF_MEMORY and m.mode.value in expected)
    ]
    for m in wrong:
        rounds.setdefault((m.mode.value, m.status.value), []).append(m.round + 1)
    several = len({m.round for m in result.modes}) > 1
    bad = [
        f"{mode}: {status}" + (f" (round{'s' * (len(ks) > 1)} {_spans(ks)})" if several else "")
        for (mode, status), ks in rounds.items()
    ]
    cut = result.interrupted_round
    if missing:
        detail, ok = f"incomplete: {result.absent_modes}", False
    elif cut is not None and not [m for m in wrong if m.status is not Status.INTERRUPTED]:
        detail, ok = result.stop_text or "", False
    elif bad:
        first = wrong[0]
        reason = f" ({first.error.splitlines()[0]})" if first.error else ""
        detail, ok = "; ".join(bad) + reason, False
    elif expected:
        detail = f"all modes measured; {', '.join(sorted(expected))} out of memory as expected"
        ok = all(
            any(m.mode.value == name and m.status is Status.OUT_OF_MEMORY for m in result.modes)
            for name in expected
        )
        if not ok:
            detail = f"--expect-oom {', '.join(sorted(expected))}: not every one ran out of memory"
    else:
        detail, ok = "all modes measured", True
    return GateLine(result.case.key, result.host, "status", ok, detail)


def _spans(rounds: list[int]) -> str:
    """'1-3, 5': sorted round numbers as runs."""
    out: list[str] = []
    for k in sorted(set(rounds)):
        if out and out[-1].split("-")[-1] == str(k - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{k}"
        else:
            out.append(str(k))
    return ", ".join(out)


# --------------------------------------------------------------------------- reference


def _unmeasured(cur: PooledCell, mode: Mode, check: str, has: tuple[bool, bool]) -> GateLine:
    """A figure a side does not show (``has``: the reference's, this result's) and why;
    passed only where --expect-oom said so, never for what was not gated."""
    timed, side = check.startswith("time:"), "this result" if has[0] else "the reference"
    what = "time" if timed else "peak" if mode is Mode.BASELINE else "overhead"
    detail = f"{side} has no {mode.value} {what} (not measured ok{' in every round' * timed})"
    oom = [(r.environment or {}).get("expect_oom") or () for r in cur.results]
    if meant := not has[1] and all(mode.value in x for x in oom):
        detail = f"{mode.value} out of memory as expected (--expect-oom): nothing to compare"
    elif has[1]:
        gated = "time" if timed else "memory"
        detail += f": this {gated} is not gated; measure the reference again"
    return GateLine(cur.case.key, cur.host, check, meant, detail)


def _memory_lines(ref: PooledCell, cur: PooledCell, tolerance: float, floor: int) -> list[GateLine]:
    out = []
    for mode in MODES:
        what = "peak" if mode is Mode.BASELINE else "overhead"
        before, after = ref.memory(mode), cur.memory(mode)
        name = f"memory:{mode.value}"
        if before is None or after is None:
            out.append(_unmeasured(cur, mode, name, (before is not None, after is not None)))
            continue
        d = memory_delta(before, after, tolerance=tolerance, floor_bytes=floor)
        rel = f" ({d.delta_rel:+.1%})" if d.delta_rel is not None else ""
        delta, limit = size_text(d.delta_bytes, signed=True), size_text(d.limit_bytes, signed=True)
        if delta == limit and d.delta_bytes != d.limit_bytes:  # '+256 KiB; limit +256 KiB'
            delta = f"{delta} ({d.delta_bytes:+,} B)"
            limit = f"{limit} ({d.limit_bytes:+,.0f} B)"
        detail = f"{what} {before / MIB:.2f} -> {after / MIB:.2f} MiB, {delta}{rel}; limit {limit}"
        if d.changed and not d.regressed:
            detail += " (improved: consider updating the reference)"
        out.append(GateLine(cur.case.key, cur.host, name, not d.regressed, detail))
    return out


def _time_lines(ref: PooledCell, cur: PooledCell, tol: float) -> tuple[list, bool, bool]:
    """The time checks of one cell, whether a side had one worker process, and whether a
    check passed with an interval reaching past the limit (too wide to tell)."""
    out, single, blind = [], False, False
    for mode in (Mode.NORMAL, Mode.CHECKPOINTED):
        before, after = ref.process_times(mode), cur.process_times(mode)
        tc = time_change(before, after, tolerance=tol)
        name = f"time:{mode.value}"
        if tc is None:  # a side shows no time for the mode: said, as a memory line says it
            out.append(_unmeasured(cur, mode, name, (bool(before), bool(after))))
            continue
        single = single or min(tc.processes_before, tc.processes_after) < 2
        verdict = tc.verdict
        if verdict in ("no change", "cannot tell") and tc.high > 1 + tol:
            verdict, blind = "no change shown, but the interval reaches past the limit", True
        detail = (
            f"{_typical(tc)} {tc.before_median_s:.4f} -> {tc.after_median_s:.4f} s, new/old "
            f"{tc.ratio:.3f} [{', '.join(interval_text(tc.low, tc.high, 3))}] "
            f"vs limit {1 + tol:.4g} "
            f"({tc.processes_before}v{tc.processes_after} processes, "
            f"{tc.n_before}v{tc.n_after} iterations): {verdict}"
        )
        out.append(GateLine(cur.case.key, cur.host, name, tc.verdict != "slower", detail))
    return out, single, blind


def check(
    results: Sequence[RunResult],
    reference: Sequence[RunResult] | None = None,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
    time_tolerance: float | None = None,
    expect: ExpectSource = None,
    *,
    match_host: bool = True,
) -> GateReport:
    """Gate ``results`` (see the module docstring). Raises ``ValueError`` on bad input:
    no results, negative tolerances, or a reference of which no cell matches."""
    if not results:
        raise ValueError("no results to check")
    if not 0 <= memory_tolerance < 10:
        raise ValueError(
            f"memory tolerance must be a fraction such as 0.05, got {memory_tolerance!r}"
        )
    if memory_floor_bytes < 0:
        raise ValueError(f"memory floor must be >= 0 bytes, got {memory_floor_bytes!r}")
    if time_tolerance is not None and not 0 < time_tolerance < 10:
        raise ValueError(f"time tolerance must be a fraction such as 0.25, got {time_tolerance!r}")
    lines: list[GateLine] = []
    notes: list[str] = []
    shared = Counter((r.case.key, r.host) for r in results)
    for r in results:
        own = [_status_line(r)]
        exp = expect_for(expect, r.case)
        if exp is not None:
            own.extend(_expect_lines(r, exp))
        if shared[r.case.key, r.host] > 1:  # several files of one cell: say whose line
            own = [replace(x, detail=f"{x.detail} [the run of {r.created}]") for x in own]
        lines.extend(own)
    if reference:
        pairing = pair(results, reference, match_host=match_host)
        single_process = blind = False
        for ref_cell, cur_cell in pairing.pairs():
            lines.extend(_memory_lines(ref_cell, cur_cell, memory_tolerance, memory_floor_bytes))
            if time_tolerance is not None:
                time_lines, single, wide = _time_lines(ref_cell, cur_cell, time_tolerance)
                lines.extend(time_lines)
                single_process, blind = single_process or single, blind or wide
        if blind:
            notes.append("time: an interval reaching past the limit passes, but a slowdown that "
                         "large would have passed too; more --rounds a side narrow it")  # fmt: skip
        if single_process:
            notes.append(
                "time: a side had one worker process, so its interval comes from iterations "
                "alone (a whole process running slow is not in it); measure with --rounds "
                ">= 3 for a time gate that sees the variation between processes"
            )
        for lost in pairing.only_reference:
            lines.append(
                GateLine(lost.key, lost.host, "present", False, "in the reference but not measured")
            )
        notes.extend(pairing.notes())
        new = [f"{c.key}@{c.host}" if c.host else c.key for c in pairing.only_current]
        if new:
            notes.append(f"{len(new)} cell(s) without reference: {', '.join(new)}")
    settings = {
        "memory_tolerance": memory_tolerance,
        "memory_floor_bytes": memory_floor_bytes,
        "time_tolerance": time_tolerance,
        "match_host": match_host,
        "reference": bool(reference),
    }
    return GateReport(tuple(lines), tuple(notes), settings)


# --------------------------------------------------------------------------- CLI entry


def run_check(
    results: Sequence[str | Path],
    *,
    against: Sequence[str | Path] | None = None,
    config: str | Path | None = None,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
    time_tolerance: float | None = None,
    match_host: bool = True,
) -> GateReport:
    """Load and gate: ``results`` and ``against`` are files, sweep folders or manifests; the
    expectations come from ``config`` (a sweep TOML) or else from the results' sweep
    manifest. Every input problem is a one-line ``ValueError``."""
    current = load_results(results)
    reference = load_results(against) if against else None
    same = same_measurements(current, reference or [])
    if same and len(same) == len(current):
        raise ValueError(
            f"--against {', '.join(map(str, against or ()))}: holds the very measurements "
            "being checked; a gate against itself always passes (give the reference results)"
        )
    if mixed := diluted_cell(current, reference or []):
        raise ValueError(
            f"the results hold the reference's own measurement of {mixed} beside a new one: "
            "pooled, the copy would dilute any change (check without the reference's copy)"
        )
    expect: ExpectSource = load_config(config) if config else manifest_expectations(results)
    report = check(
        current,
        reference,
        memory_tolerance=memory_tolerance,
        memory_floor_bytes=memory_floor_bytes,
        time_tolerance=time_tolerance,
        expect=expect,
        match_host=match_host,
    )
    lost = [
        GateLine(key, "", "present", False, f"listed in the sweep manifest; {what} is missing")
        for key, what in missing_cells(results)
    ]
    if same:  # e.g. cells a --resume kept from a copy of the reference
        report = replace(
            report,
            notes=(
                *report.notes,
                f"{len(same)} cell(s) are the very measurement of their reference, so their "
                f"changes are zero by construction: {', '.join(same)}",
            ),
        )
    unlisted = unlisted_results([*results, *(against or ())])
    if unlisted:  # a cell of a larger config, or a copied file: read as nothing, said
        names = ", ".join(str(p) for p in unlisted)
        note = f"not cells of their folder's sweep manifest, so not gated: {names}"
        report = replace(report, notes=(*report.notes, note))
    if lost:  # a deleted cell, or a sweep stopped between cells, fails the gate
        report = replace(report, lines=(*report.lines, *lost))
    if expect is None:
        why = (
            "its sweep config has none (add an [expect] table, or pass --config)"
            if sweep_configs(results)
            else "pass --config or check a sweep folder"
        )
        report = replace(report, notes=(*report.notes, f"no [expect] thresholds: {why}"))
    return replace(
        report, sources=limit_sources(results, config, expect is not None, report.settings)
    )
