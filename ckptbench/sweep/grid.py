"""A sweep config's grid expanded into its cells: each canonical, each once, with notes.

A grid's cells are the Cartesian product of each sub-grid's axes over the ``[case]`` table,
in file order. A cell is recorded as ``run`` records it (``Case.effective``): store-all and
optimal ignore snaps and get ``snaps = steps``, more snaps than steps are clamped, a peer
gets no executor; cells that became one another are measured once. Two cells with one
``case.key`` that differ otherwise are an error, because result files are named by the key.
Kept apart from the parsing (:mod:`ckptbench.sweep.config`) because the sweep calls
:func:`unique_cells` again once the plug-in check has decided a field.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ckptbench.results.chains import chain_executor
from ckptbench.results.resultsize import check_result_size
from ckptbench.results.schema import Case, CaseError
from ckptbench.schedules import get_strategy
from ckptbench.sweep.keylines import config_words

__all__ = ["MAX_CELLS", "ErrorAt", "expand_grid", "unique_cells"]

#: The most cells a config's grid may name, duplicates counted: a product of axes nobody
#: measures (100 000 cells of a second each take 28 hours). Eight axes of ten values (10**8
#: cells) were expanded for hours by ``sweep``, ``sweep --dry-run`` and ``check --config``
#: before anything was said.
MAX_CELLS = 100_000

#: How the grid's problems are raised: ``error(message, table, key, index)`` returns the
#: exception naming the config's line (``sweep.config``'s ConfigError).
ErrorAt = Callable[[str, str, str | None, int], Exception]

_CASE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Case))


def _canonical(case: Case) -> Case:
    """The case as ``run`` records it (``Case.effective``): store-all and optimal ignore snaps
    and get ``snaps = steps``; more snaps than steps are clamped; a peer runs no executor of
    ours and gets none. One case, one key."""
    canon, notes = case.effective()
    return canon if notes else case


def expand_grid(
    error: ErrorAt, base: Mapping[str, Any], subgrids: list[dict[str, list[Any]]]
) -> tuple[tuple[Case, ...], tuple[str, ...], tuple[str, ...]]:
    """The cells of ``subgrids`` over the ``base`` case, in order (every sub-grid's
    Cartesian product, first axis outermost), each canonical and once; the notes on what
    that did to them (:func:`_grid_notes`) and the axes in first-seen order. A cell that is
    no valid case, or two with one key that differ otherwise, raise ``error(message,
    "grid", None, index)`` of the sub-grid."""
    named = sum(math.prod(len(values) for values in sub.values()) for sub in subgrids)
    if named > MAX_CELLS:  # said before a cell is made
        sizes = " + ".join(" x ".join(str(len(v)) for v in sub.values()) or "1" for sub in subgrids)
        raise error(f"{named:,} cells ({sizes} values), over the {MAX_CELLS:,} a config may "
                    "name: split it into smaller configs", "grid", None, 0)  # fmt: skip
    cases: list[Case] = []
    by_key: dict[str, Case] = {}
    axes: list[str] = []
    unused: dict[str, int] = {}  # strategy -> its grid cells whose snaps it does not use
    clamped = dropped = unexecuted = 0
    for index, sub in enumerate(subgrids):
        names = list(sub)
        axes.extend(n for n in names if n not in axes)
        for combo in itertools.product(*(sub[n] for n in names)):
            values = {**base, **dict(zip(names, combo, strict=True))}
            try:
                case = chain_executor(Case(**values))
                check_result_size(case)
            except CaseError as err:
                cell = ", ".join(f"{n}={v!r}" for n, v in zip(names, combo, strict=True))
                why = config_words(str(err))
                if not names:  # no grid: the [case] table's one cell
                    raise error(why, "case", None, index) from None
                raise error(f"cell ({cell}): {why}", "grid", None, index) from None
            canon = _canonical(case)
            if canon.snaps != case.snaps and not get_strategy(case.strategy).uses_snaps:
                unused[case.strategy] = unused.get(case.strategy, 0) + 1
            else:
                clamped += canon.snaps != case.snaps
            unexecuted += canon.executor != case.executor
            seen = by_key.get(canon.key)
            if seen is None:
                by_key[canon.key] = canon
                cases.append(canon)
            elif seen == canon:
                dropped += 1
            else:
                raise error(
                    f"two cells share the result name {canon.key!r} but differ "
                    f"({_difference(seen, canon)}); "
                    "vary only fields that are part of the cell key",
                    "grid",
                    None,
                    index,
                )
    if not cases:  # pragma: no cover - every axis has >= 1 value
        raise error("empty grid: no cells", "", "grid", 0)
    return tuple(cases), _grid_notes(unused, clamped, unexecuted, dropped), tuple(axes)


def unique_cells(cases: Sequence[Case]) -> tuple[tuple[Case, ...], int]:
    """``cases`` with each cell once, in order, and how many repeats were dropped: cells that
    became one another once something outside the grid decided a field (the plug-in check
    records an autograd plug-in's own dtype, so a ``dtype`` axis over it names one cell
    twice). Two cells with one key that differ otherwise are a ValueError (one result file
    cannot hold both)."""
    kept: dict[str, Case] = {}
    for case in cases:
        seen = kept.setdefault(case.key, case)
        if seen != case:
            raise ValueError(f"two cells share the result name {case.key!r} but differ "
                             f"({_difference(seen, case)})")  # fmt: skip
    return tuple(kept.values()), len(cases) - len(kept)


def _difference(a: Case, b: Case) -> str:
    """The fields in which two cases differ, each with both values."""
    return ", ".join(f"{f} {getattr(a, f)!r} vs {getattr(b, f)!r}"
                     for f in _CASE_FIELDS if getattr(a, f) != getattr(b, f))  # fmt: skip


def _grid_notes(
    unused: Mapping[str, int], clamped: int, unexecuted: int, dropped: int
) -> tuple[str, ...]:
    """What the grid's expansion did to its cells: ``unused``, per strategy that does not
    use snaps (its spec's ``uses_snaps``), the cells recorded with snaps = steps; the cells
    whose snaps were ``clamped`` to the steps, that run no executor, or were duplicates."""
    notes = []
    if unused:
        notes.append(
            f"snaps not used by {', '.join(unused)}: {sum(unused.values())} grid cell(s) "
            "recorded with snaps = steps"
        )
    if clamped:
        notes.append(
            f"snaps above the steps clamped: {clamped} grid cell(s) recorded with snaps = steps"
        )
    if unexecuted:
        notes.append(
            f"executor not used by a framework's own checkpointing: {unexecuted} grid cell(s) "
            "recorded without it"
        )
    if dropped:
        notes.append(f"{dropped} duplicate grid cell(s) measured once")
    return tuple(notes)
