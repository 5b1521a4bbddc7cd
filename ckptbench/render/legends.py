"""What the columns of ``compare``'s and ``run``'s tables mean, one entry per column
(``Table.legend``): every format says the entries of the columns it shows, and only those
(a column left out at a terminal's width is named as left out, not explained)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["CELLS_LEGEND", "DELTA_LEGEND", "RUN_LEGEND", "cells_legend"]

#: The cells table's columns (their raw keys) and what each is.
CELLS_LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("normal_overhead_bytes", "checkpointed_overhead_bytes"),
        "+MiB: a mode's exact peak over the forward-only baseline's",
    ),
    (
        ("slowdown",),
        "slowdown: ckpt time / normal time (per round, then the rounds' geometric mean: not "
        "the shown columns divided)",
    ),
    (
        ("memory_savings",),
        "savings: normal +MiB / ckpt +MiB (per round, then the rounds' median: not the shown "
        "columns divided)",
    ),
    (
        ("slowdown", "vs_floor", "memory_savings"),
        "[95%]: 95% intervals {over} (<x, >y: an end more than 100x off the estimate)",
    ),
    (("evaluations",), "evals (opt): step evaluations (the schedule's optimum)"),
    (
        ("vs_floor",),
        "vs floor: ckpt time / (normal time + the extra evaluations at the forward-only time "
        "of their layers, by the plan's per-layer costs where it has them, else of the mean "
        "step); - for a peer whose recomputation is not counted in whole evaluations",
    ),
)

#: Where the cells' intervals come from: every cell several rounds, every cell one, or both
#: (as ``run`` says it for one round; the cells are those the one-round warning names).
_OVER = {
    (False,): "over the rounds",
    (True,): "from one round's iterations",
    (False, True): "over the rounds; from one round's iterations where a cell ran one round "
    "(the cells the warning 'intervals from one round' names)",
}


def cells_legend(one_round: Sequence[bool]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """:data:`CELLS_LEGEND` for cells of which ``one_round`` ran one round: its '[95%]' entry
    says where the intervals shown come from."""
    over = _OVER[tuple(sorted(set(one_round))) or (False,)]
    return tuple((keys, text.replace("{over}", over)) for keys, text in CELLS_LEGEND)


#: The before -> after table's columns and what each is: what the memory figures of a row
#: are (a baseline's peak, another mode's overhead) is its ``memory`` column.
DELTA_LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("memory_measure",),
        "memory: what the row's MiB are, the baseline's exact peak (peak) or a mode's peak "
        "over the baseline's (overhead)",
    ),
    (("n_before",), "n: measured iterations, before v after"),
    (("processes_before",), "processes: worker processes, before v after"),
)

#: ``run``'s table: the columns its notes (brackets, slowdown, savings) do not explain.
RUN_LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (("spread",), "peak spread: the exact peak's range over every measured iteration"),
    (
        ("sampled",),
        "sampled max: the highest RSS the parent's sampler saw (--sample-interval); the exact "
        "peak is read inside the worker",
    ),
    (("range",), "[min, max] s: the fastest and the slowest iteration"),
    (("evals",), "evals (opt): step evaluations (the schedule's optimum or the plan's)"),
    (
        ("err",),
        "grad err: the checkpointed gradient's largest relative difference from the plain one",
    ),
)
