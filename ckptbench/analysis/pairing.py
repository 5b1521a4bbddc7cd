"""Pairing current cells with reference cells, and the before/after comparison of each pair.

A *cell* is one case measured on one host. Cells pair on their **full case** (every
:class:`~ckptbench.results.schema.Case` field, present and future, except the run settings in
:data:`RUN_SETTINGS`, which change how long or how often a case is measured, not what) and
on the host (a laptop and a CI runner are not the same machine). ``case.key`` names a cell
for people; it is never what decides a pair, so two cases whose keys collide are still two
cells. Several files of one cell on one host are pooled, so rerunning a sweep adds samples.

:func:`pair` is the one pairing used by ``compare`` and ``check``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ckptbench.analysis.stats import (
    MEMORY_FLOOR_BYTES,
    MEMORY_TOLERANCE,
    MIN_EFFECT,
    MemoryDelta,
    TimeChange,
    memory_delta,
    time_change,
)
from ckptbench.results.schema import MODES, SETTINGS_FIELDS, Case, Iteration, Mode, RunResult
from ckptbench.results.setaside import measurement_id

__all__ = [
    "RUN_SETTINGS",
    "CellComparison",
    "CellId",
    "Comparison",
    "ModeComparison",
    "Pairing",
    "PooledCell",
    "case_identity",
    "codes_differ",
    "compare",
    "compare_cells",
    "differing_fields",
    "diluted_cell",
    "field_value",
    "pair",
    "plan_shape",
    "plans_differ",
    "plugin_code",
    "pool_results",
    "same_measurements",
    "settings_notes",
]

#: Case fields that change how a cell is run but not what is measured: cells that differ
#: only in these pair (with a note when the pooled files disagree on SETTINGS_FIELDS).
RUN_SETTINGS: tuple[str, ...] = (*SETTINGS_FIELDS, "timeout_s", "memory_limit_bytes")

CellId = tuple[tuple[tuple[str, Any], ...], str]  # (case identity, host)


def case_identity(case: Case) -> tuple[tuple[str, Any], ...]:
    """Every field of the case that changes what is measured, as (name, value) pairs."""
    return tuple(case.identity().items())


def field_value(case: Case, name: str) -> Any:
    """A case field's value as measured: for ``executor`` the executor the case runs (its
    backend's default on its device where none was asked for), else the field."""
    return case.executor_used if name == "executor" else getattr(case, name)


def differing_fields(cases: Iterable[Case]) -> list[str]:
    """Names of the identity fields whose values differ between ``cases`` (field order).

    A field at its default (dtype float64, the default executor) is not in a case's
    identity; it counts wherever another case has it, by :func:`field_value` (so a case on
    the default executor differs from one asking for another, in either order)."""
    cases = list(cases)
    if len(cases) < 2:
        return []
    present = set().union(*(c.identity() for c in cases))
    return [
        name
        for name in cases[0].to_dict()
        if name in present and len({repr(field_value(c, name)) for c in cases}) > 1
    ]


@dataclass(frozen=True)
class PooledCell:
    """Every sample of one cell (full case, host) over one or more result files."""

    case: Case
    host: str
    results: tuple[RunResult, ...]

    @property
    def key(self) -> str:
        return self.case.key

    def iterations(self, mode: Mode) -> list[Iteration]:
        its: list[Iteration] = []
        for r in self.results:
            m = r.mode(mode)
            if m is not None and m.ok:
                its.extend(m.iterations)
        return its

    def times(self, mode: Mode) -> list[float]:
        return [it.wall_time_s for it in self.iterations(mode)]

    def process_times(self, mode: Mode) -> list[list[float]]:
        """Iteration times per worker process: every round of every file that measured
        ``mode`` ok in every round (as :meth:`iterations`: a file whose table shows no time
        for it gives none, not its other rounds)."""
        return [
            [it.wall_time_s for it in m.iterations]
            for r in self.results
            if (pooled := r.mode(mode)) is not None and pooled.ok
            for m in r.mode_rounds(mode)
            if m.ok and m.iterations
        ]

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


def pool_results(results: Iterable[RunResult], match_host: bool) -> dict[CellId, PooledCell]:
    """Group result files into cells by full case (and host when ``match_host``)."""
    groups: dict[CellId, list[RunResult]] = {}
    for r in results:
        groups.setdefault((case_identity(r.case), r.host if match_host else ""), []).append(r)
    return {k: PooledCell(v[0].case, k[1], tuple(v)) for k, v in groups.items()}


@dataclass(frozen=True)
class Pairing:
    """Current and reference cells, and which of them pair."""

    current: dict[CellId, PooledCell]
    reference: dict[CellId, PooledCell]
    common: tuple[CellId, ...]

    @property
    def only_current(self) -> tuple[PooledCell, ...]:
        return tuple(c for k, c in self.current.items() if k not in self.reference)

    @property
    def only_reference(self) -> tuple[PooledCell, ...]:
        return tuple(c for k, c in self.reference.items() if k not in self.current)

    def pairs(self) -> list[tuple[PooledCell, PooledCell]]:
        """(reference, current) of every paired cell, in the current results' order."""
        return [(self.reference[k], self.current[k]) for k in self.common]

    def notes(self) -> list[str]:
        return settings_notes(self.pairs())


def _mismatch(current: dict[CellId, PooledCell], reference: dict[CellId, PooledCell]) -> str:
    """What keeps every current cell from pairing: the hosts, or the nearest cases' fields."""
    hosts_c = sorted({h for _, h in current})
    hosts_r = sorted({h for _, h in reference})
    idents_c = {i for i, _ in current}
    if hosts_c != hosts_r and any(i in idents_c for i, _ in reference):
        return f"hosts differ: before {hosts_r}, after {hosts_c} (--any-host pairs across hosts)"
    best: tuple[int, str] | None = None
    for cur in current.values():
        for ref in reference.values():
            diff = differing_fields([ref.case, cur.case])
            text = ", ".join(
                f"{n} {field_value(ref.case, n)!r} vs {field_value(cur.case, n)!r}"
                for n in diff[:3]
            )
            if cur.host != ref.host:
                text = ", ".join(filter(None, [text, f"host {ref.host!r} vs {cur.host!r}"]))
            same_key = " (same key)" if ref.key == cur.key else ""
            cand = (len(diff) + (cur.host != ref.host), f"{text}{same_key}")
            if best is None or cand[0] < best[0]:
                best = cand
    if best is None:
        return "nothing to pair"
    ref_keys = sorted({c.key for c in reference.values()})
    more = f" and {len(ref_keys) - 3} more" if len(ref_keys) > 3 else ""
    keys = f"keys before: {', '.join(ref_keys[:3])}{more}"
    return f"cases differ (nearest: {best[1]}); {keys}"


def pair(
    current: Iterable[RunResult],
    reference: Iterable[RunResult],
    *,
    match_host: bool = True,
    what: str = "no cell of the results matches the reference",
) -> Pairing:
    """Pair current with reference cells by full case and host. Raises ``ValueError``
    starting with ``what`` and naming what differs (hosts, or the nearest cases' fields)
    when no cell pairs."""
    cur, ref = pool_results(current, match_host), pool_results(reference, match_host)
    common = tuple(k for k in cur if k in ref)
    if not common:
        raise ValueError(f"{what}: {_mismatch(cur, ref)}")
    return Pairing(cur, ref, common)


#: The figures of a planned schedule (``Plan.summary``) that tell two schedules apart.
_PLAN_SHAPE = ("steps", "advances", "tapes_kept", "peak_tapes", "snapshots", "peak_snapshots",
               "slots", "peak_bytes")  # fmt: skip


def plan_shape(result: RunResult) -> tuple[Any, ...] | None:
    """The schedule a planned cell's checkpointed mode ran (its counts and peak), None where
    it ran no plan. Two invocations of one ``optimal`` cell can run different plans: the step
    costs are measured per invocation, or read from different ``--costs`` files, and neither
    is part of the cell's key."""
    for m in result.modes:
        if m.mode is Mode.CHECKPOINTED and m.plan:
            return tuple(m.plan.get(k) for k in _PLAN_SHAPE)
    return None


def plans_differ(results: Iterable[RunResult]) -> int:
    """How many different plans ``results`` ran (0 or 1: nothing to say)."""
    return len({shape for r in results if (shape := plan_shape(r)) is not None})


def plugin_code(result: RunResult) -> str | None:
    """The SHA-256 of the plug-in's source a result ran (``environment.plugin``), None for a
    built-in or where it could not be read. Not part of the cell's key: editing a plug-in
    keeps its cells' names."""
    plugin = (result.environment or {}).get("plugin")
    return plugin.get("sha256") if isinstance(plugin, dict) else None


def codes_differ(results: Iterable[RunResult]) -> int:
    """How many different plug-in sources ``results`` ran (0 or 1: nothing to say)."""
    return len({code for r in results if (code := plugin_code(r)) is not None})


def settings_notes(pairs: Iterable[tuple[PooledCell, PooledCell]]) -> list[str]:
    """Paired cells whose files disagree on settings outside the identity (e.g. repeats),
    and a side that pools runs of different ckptbench versions."""
    notes = []
    for before, after in pairs:
        cases = [r.case for r in (*before.results, *after.results)]
        differ = [f for f in SETTINGS_FIELDS if len({getattr(c, f) for c in cases}) > 1]
        if differ:
            values = "; ".join(f"{f} {sorted({getattr(c, f) for c in cases})}" for f in differ)
            notes.append(f"{after.key}: paired files were measured with different {values}")
        if (codes := codes_differ((*before.results, *after.results))) > 1:
            notes.append(
                f"{after.key}: its files ran {codes} different versions of the plug-in's "
                "source (its SHA-256 differs): the model changed, not only the measurement"
            )
        if (plans := plans_differ((*before.results, *after.results))) > 1:
            notes.append(
                f"{after.key}: its files ran {plans} different plans (step costs measured "
                "per invocation or read from different --costs files)"
            )
        for side, cell in (("before", before), ("after", after)):
            versions = sorted({r.tool_version or "unknown" for r in cell.results})
            if len(versions) > 1:  # one side pools invocations of several versions
                notes.append(
                    f"{cell.key} ({side}): pooled runs of different ckptbench versions "
                    f"({', '.join(versions)})"
                )
    return notes


@dataclass(frozen=True)
class ModeComparison:
    mode: Mode
    memory: MemoryDelta | None
    time: TimeChange | None
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
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
) -> CellComparison:
    """Memory delta and time change (``stats.time_change`` at ``min_effect``) of every mode
    of one paired cell."""
    modes = []
    for mode in MODES:
        mb, ma = before.memory(mode), after.memory(mode)
        mem = None
        if mb is not None and ma is not None:
            mem = memory_delta(mb, ma, tolerance=memory_tolerance, floor_bytes=memory_floor_bytes)
        tt = time_change(
            before.process_times(mode), after.process_times(mode), tolerance=min_effect
        )
        note = ""
        sides = (("before", before), ("after", after))
        failed = [side for side, cell in sides if not cell.ok(mode)]
        if failed:
            note = f"{mode.value} did not measure OK {' and '.join(failed)}"
        modes.append(ModeComparison(mode, mem, tt, note))
    return CellComparison(after.key, after.host, after.case, tuple(modes))


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


def compare(
    after: Sequence[RunResult],
    before: Sequence[RunResult] | None = None,
    *,
    min_effect: float = MIN_EFFECT,
    memory_tolerance: float = MEMORY_TOLERANCE,
    memory_floor_bytes: int = MEMORY_FLOOR_BYTES,
    match_host: bool = True,
) -> Comparison:
    """Tabulate ``after``; with ``before``, pair cells (:func:`pair`) and test every mode.

    Raises ``ValueError`` when ``before`` is given but no cell pairs (e.g. other hosts: pass
    ``match_host=False`` to pair across machines knowingly).
    """
    for name, value in (("min_effect", min_effect), ("memory_tolerance", memory_tolerance)):
        if not 0 <= value < 10:
            raise ValueError(f"{name} must be a fraction such as 0.05, got {value!r}")
    settings = {
        "min_effect": min_effect,
        "memory_tolerance": memory_tolerance,
        "memory_floor_bytes": memory_floor_bytes,
        "match_host": match_host,
    }
    if not before:
        return Comparison(after=tuple(after), settings=settings)
    if len(same_measurements(after, before)) == len(after):  # a folder against its copy
        raise ValueError(
            "--against holds the very measurements being compared (the same folder, or a "
            "copy): every row would read 'no change'; give results measured before"
        )
    pairing = pair(
        after,
        before,
        match_host=match_host,
        what="no cell of the two result sets matches by key and host",
    )
    cells = tuple(
        compare_cells(
            b,
            a,
            min_effect=min_effect,
            memory_tolerance=memory_tolerance,
            memory_floor_bytes=memory_floor_bytes,
        )
        for b, a in pairing.pairs()
    )
    return Comparison(
        after=tuple(after),
        before=tuple(before),
        cells=cells,
        only_before=tuple((c.key, c.host) for c in pairing.only_reference),
        only_after=tuple((c.key, c.host) for c in pairing.only_current),
        settings=settings,
        notes=tuple(pairing.notes()),
    )


def same_measurements(current: Sequence[RunResult], reference: Sequence[RunResult]) -> list[str]:
    """The keys of the cells of ``current`` whose measurement is also in ``reference``."""
    ids = {measurement_id(r) for r in reference}
    return [r.case.key for r in current if measurement_id(r) in ids]


def diluted_cell(current: Sequence[RunResult], reference: Sequence[RunResult]) -> str | None:
    """A cell (its key) that ``current`` holds both as a copy of the reference's
    measurement and as another measurement, on one host: pooling them pulls the change
    towards zero, so that gate could pass a regression. None when there is none."""
    ids = {measurement_id(r) for r in reference}
    copies = {(r.case.key, r.host) for r in current if measurement_id(r) in ids}
    fresh = {(r.case.key, r.host) for r in current if measurement_id(r) not in ids}
    both = sorted(copies & fresh)
    return both[0][0] if both else None
