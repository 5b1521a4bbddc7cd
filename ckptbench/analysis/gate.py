"""``ckptbench check``: the CI gate. Pass/fail per cell, a markdown summary, an exit code.

What is checked, per cell (``case.key`` on one host):

* **status** — every mode measured OK and the file holds all three modes in every planned
  round (a failed, crashed, timed-out or partial cell fails the gate); a cell the sweep
  manifest lists whose file is missing fails too (``present``), and so does a cell file of
  a folder that cannot be read (``readable``: cut short, another schema version), one
  holding another cell's result than its manifest lists it for (``filed``: misfiled, or
  copied from another sweep) and a measurement in more than one of a folder's files
  (``unique``: no copy is gated as the cell), while the folder's other cells are gated;
* **expectations** — the config's ``[expect]`` thresholds (``memory_savings_min``,
  ``slowdown_max``, ``grad_max_rel_err_max``, ``forward_steps_exact``: the counted advances
  and taped steps equal the planned schedule's, for revolve the binomial optimum);
* **memory vs a reference** (``reference=``) — gated by default: the baseline's peak and the
  normal/checkpointed overhead over baseline may not grow by more than
  ``max(memory_tolerance * reference, memory_floor_bytes)`` (5% and 256 KiB by default:
  peaks repeat to ~0.03 MiB); a reference cell without a result fails, a new one passes;
* **time vs a reference** — only with ``time_tolerance`` (e.g. 0.25): a mode fails when the
  interval of its time ratio new/old (:func:`ckptbench.analysis.time_change`: 95% over the
  processes' median iterations where either side has two processes or more; with one a
  side, the iteration pairs', 95% for the iterations' noise alone; the limits and the rule
  say which, ``analysis.limits.time_interval_words``) lies above ``1 + time_tolerance``, or a side
  shows no time for it (not ok in every round: its other rounds are not compared). Time is
  never gated by default (docs/architecture.md, "Noise and rounds").

Exit codes: 0 every check passed; 1 a regression, an unmet expectation or a failed cell.
Bad input (unreadable files, nothing to compare) raises ``ValueError`` (the CLI exits 2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ckptbench.analysis import MEMORY_FLOOR_BYTES, MEMORY_TOLERANCE, pair
from ckptbench.analysis.cellchecks import (
    GateLine,
    expect_lines,
    memory_lines,
    status_line,
    time_lines,
)
from ckptbench.analysis.expectations import ExpectSource, expect_for, manifest_expectations
from ckptbench.analysis.intervals import INVOCATION_SD_TIME
from ckptbench.analysis.limits import ConfigFiles, limit_sources, sweep_configs
from ckptbench.analysis.pairing import diluted_cell, same_measurements
from ckptbench.results.schema import RunResult
from ckptbench.results.store import load_readable, load_results, missing_cells
from ckptbench.results.units import count_text
from ckptbench.sweep.preflight import unlisted_other_json, unlisted_results

__all__ = [
    "GateReport",
    "check",
    "manifest_expectations",
    "run_check",
]


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
        counts = f"{count_text(n_checks, 'check')} on {count_text(n_cells, 'cell')}"
        if self.passed:  # status lines alone gate no figure: said in the verdict itself
            only = all(x.check in ("status", "present") for x in self.lines)
            return f"ckptbench check: PASSED ({counts}{'; status only, no limits' * only})"
        hosts = self._hosts()
        failed_cells = len({c for f in self.failures for c in _cells_of(f, hosts)})
        return (
            f"ckptbench check: FAILED ({len(self.failures)} of {count_text(n_checks, 'check')}, "
            f"{failed_cells} of {count_text(n_cells, 'cell')})"
        )


def _cells_of(line: GateLine, hosts: Mapping[str, list[str]]) -> tuple[tuple[str, str], ...]:
    """The cells ``line`` is about: its own, or without a host every host of its key."""
    if line.host or not hosts.get(line.key):
        return ((line.key, line.host),)
    return tuple((line.key, h) for h in hosts[line.key])


def check(
    results: Sequence[RunResult],
    reference: Sequence[RunResult] | None = None,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
    time_tolerance: float | None = None,
    expect: ExpectSource = None,
    *,
    match_host: bool = True,
    unreadable: Sequence[GateLine] = (),
) -> GateReport:
    """Gate ``results`` (see the module docstring); ``unreadable``: the failed lines of
    cells a folder holds that were set aside (unreadable, misfiled, copied), gated first.
    Raises ``ValueError`` on bad input: no results (nor cells set aside), negative
    tolerances, or a reference of which no cell matches."""
    if not results and not unreadable:
        raise ValueError("no results to check")
    if not 0 <= memory_tolerance < 10:
        raise ValueError(
            f"memory tolerance must be a fraction such as 0.05, got {memory_tolerance!r}"
        )
    if memory_floor_bytes < 0:
        raise ValueError(f"memory floor must be >= 0 bytes, got {memory_floor_bytes!r}")
    if time_tolerance is not None and not 0 < time_tolerance < 10:
        raise ValueError(f"time tolerance must be a fraction such as 0.25, got {time_tolerance!r}")
    lines: list[GateLine] = list(unreadable)
    notes: list[str] = []
    time_methods: frozenset[bool] = frozenset()  # TimeChange.by_process of each time line
    shared = Counter((r.case.key, r.host) for r in results)
    for r in results:
        own = [status_line(r)]
        exp = expect_for(expect, r.case)
        if exp is not None:
            own.extend(expect_lines(r, exp))
        if shared[r.case.key, r.host] > 1:  # several files of one cell: say whose line
            own = [replace(x, detail=f"{x.detail} [the run of {r.created}]") for x in own]
        lines.extend(own)
    if reference and results:  # none readable: the unreadable lines fail the gate
        pairing = pair(results, reference, match_host=match_host)
        single_process = blind = False
        for ref_cell, cur_cell in pairing.pairs():
            lines.extend(memory_lines(ref_cell, cur_cell, memory_tolerance, memory_floor_bytes))
            if time_tolerance is not None:
                timed, single, wide, how = time_lines(ref_cell, cur_cell, time_tolerance)
                lines.extend(timed)
                single_process, blind = single_process or single, blind or wide
                time_methods |= how
        if blind:
            notes.append("time: an interval reaching past the limit passes, but a slowdown that "
                         "large would have passed too; more --rounds a side narrow it")  # fmt: skip
        if single_process:
            notes.append(
                "time: a side had one worker process: with one a side the interval comes from "
                "iterations alone and a fixed allowance for the spread between invocations "
                f"({INVOCATION_SD_TIME:.1%} a side; a whole process running slow is not in "
                "it), with one on one "
                "side only it takes the spread between processes from the other side; measure "
                "with --rounds >= 3 for a time gate that sees the variation between processes"
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
        # how the time lines' intervals were taken: over the processes (True), from one
        # process a side's iterations (False); the limits and the rule say which
        "time_by_process": sorted(time_methods),
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
    configs: ConfigFiles | None = None,
) -> GateReport:
    """Load and gate: ``results`` and ``against`` are files, sweep folders or manifests; the
    expectations come from ``config`` (a sweep TOML) or else from the results' sweep
    manifest. Every input problem is a one-line ``ValueError``. ``configs``: the config
    files and sweep manifests already read (the CLI's, which found the sweeps' files
    first): each config parsed once, each manifest read once."""
    configs = configs or ConfigFiles()
    manifests = configs.manifests  # each sweep manifest read once, here and by the limits
    # a broken, misfiled or copied cell of a folder fails; the others are gated
    current, aside = load_readable(results, manifests)
    unreadable = [GateLine(u.key, "", u.check, False, u.problem) for u in aside]
    reference = load_results(against, manifests) if against else None
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
    expect: ExpectSource = (
        configs.load(config) if config else manifest_expectations(results, manifests)
    )
    report = check(
        current,
        reference,
        unreadable=unreadable,
        memory_tolerance=memory_tolerance,
        memory_floor_bytes=memory_floor_bytes,
        time_tolerance=time_tolerance,
        expect=expect,
        match_host=match_host,
    )
    lost = [
        GateLine(key, "", "present", False, f"listed in the sweep manifest; {what} is missing")
        for key, what in missing_cells(results, manifests)
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
    unlisted = unlisted_results([*results, *(against or ())], manifests)
    if unlisted:  # a cell of a larger config, or a copied file: read as nothing, said
        names = ", ".join(str(p) for p in unlisted)
        note = f"not cells of their folder's sweep manifest, so not gated: {names}"
        report = replace(report, notes=(*report.notes, note))
    # a costs file, a JSON report
    if others := unlisted_other_json([*results, *(against or ())], manifests):
        note = f"not ckptbench results (not read): {', '.join(map(str, others))}"
        report = replace(report, notes=(*report.notes, note))
    if lost:  # a deleted cell, or a sweep stopped between cells, fails the gate
        report = replace(report, lines=(*report.lines, *lost))
    if expect is None:
        why = (
            "its sweep config has none (add an [expect] table, or pass --config)"
            if sweep_configs(results, manifests)
            else "pass --config or check a sweep folder"
        )
        if not against:  # status alone is gated: every way to give limits, named
            why += (
                "; or pass --against reference results to gate memory (and time, with "
                "--time-tolerance)"
            )
        report = replace(report, notes=(*report.notes, f"no [expect] thresholds: {why}"))
    return replace(
        report,
        sources=limit_sources(results, config, expect is not None, report.settings, configs),
    )
