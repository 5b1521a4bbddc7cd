"""What the columns of ``compare``'s and ``run``'s tables mean, one entry per column
(``Table.legend``): every format says the entries of the columns it shows, and only those
(a column left out at a terminal's width is named as left out, not explained)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "CELLS_LEGEND",
    "DELTA_LEGEND",
    "RUN_LEGEND",
    "TIME_METHODS",
    "cells_legend",
    "run_ratios",
    "shown_legend",
    "time_method",
]

#: The cells table's columns (their raw keys) and what each is.
CELLS_LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("normal_overhead_bytes", "checkpointed_overhead_bytes"),
        "+MiB: a mode's exact peak over the forward-only baseline's",
    ),
    (
        ("slowdown",),
        "slowdown: ckpt time / normal time ({slowdown})",
    ),
    (
        ("memory_savings",),
        "savings: normal +MiB / ckpt +MiB ({savings})",
    ),
    (
        ("slowdown", "vs_floor", "memory_savings"),
        "[95%]: {over} (<x, >y: an end more than 100x off the estimate)",
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
#: (as ``run`` says it for one round; the cells are those the one-round warning names). One
#: round's slowdown and vs-floor intervals are 95% for its iterations' noise alone (Bauer's
#: rank interval, or Student's t), blind to the spread between fresh processes; its savings
#: interval is the range its iterations allow, a worst case (``analysis.intervals``).
_ONE_ROUND = (
    "the slowdown's and vs floor's are 95% for the iterations' noise alone, not the spread "
    "between fresh processes; the savings' is the range the iterations allow, a worst case, "
    "not a 95% interval"
)
_OVER = {
    (False,): "95% intervals over the rounds",
    (True,): f"intervals from one round's iterations: {_ONE_ROUND}",
    (False, True): "95% intervals over the rounds; where a cell ran one round (the cells the "
    f"warning 'intervals from one round' names), from its iterations: {_ONE_ROUND}",
}

#: How the slowdown is taken (``analysis.intervals.ratio_estimate``): each round's median
#: ratio over its iteration pairs, then the rounds' geometric mean; with one round, that
#: round's median ratio alone, which is the median times divided only where each mode
#: measured one iteration (``run``'s default) or all agree.
_SLOWDOWN = {
    (False,): "per round, then the rounds' geometric mean: not the ckpt s / normal s "
    "columns divided",
    (True,): "from one round: the median of every ckpt/normal iteration pair's ratio, which "
    "can differ from the ckpt s / normal s columns divided",
    (False, True): "per round, then the rounds' geometric mean: not the ckpt s / normal s "
    "columns divided; where a cell ran one round, the median of every ckpt/normal iteration "
    "pair's ratio, which can differ from them",
}

#: How the savings are taken (``analysis.intervals.savings_estimate``): per round from its
#: median peaks, then the rounds' median; with one round, its overheads, which are the
#: shown ones (the shown overheads pool the rounds' iterations).
_SAVINGS = {
    (False,): "per round, then the rounds' median: not the shown columns divided",
    (True,): "from one round: the shown columns divided, before rounding",
    (False, True): "per round, then the rounds' median: not the shown columns divided; where "
    "a cell ran one round, the shown columns divided, before rounding",
}


def _which(one_round: Sequence[bool]) -> tuple[bool, ...]:
    """(False,) every cell several rounds, (True,) every cell one, (False, True) both."""
    return tuple(sorted(set(one_round))) or (False,)


def cells_legend(
    intervals: Sequence[bool],
    slowdown: Sequence[bool] = (),
    savings: Sequence[bool] = (),
) -> tuple[tuple[tuple[str, ...], str], ...]:
    """:data:`CELLS_LEGEND` for the cells shown: ``intervals``, ``slowdown`` and ``savings``
    say, for each cell that shows one, whether it comes from one round (several where none
    is given). The '[95%]' entry says where the intervals come from, the slowdown's and
    the savings' how each is taken, so every entry is true of the cells shown."""
    said = {
        "{over}": _OVER[_which(intervals)],
        "{slowdown}": _SLOWDOWN[_which(slowdown)],
        "{savings}": _SAVINGS[_which(savings)],
    }
    out = []
    for keys, text in CELLS_LEGEND:
        for mark, words in said.items():
            text = text.replace(mark, words)
        out.append((keys, text))
    return tuple(out)


def shown_legend(results: Sequence[Any]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """:func:`cells_legend` for the cells of ``results`` (``RunResult``, read by its
    ``summary``): their intervals from the rounds or one round's iterations as the
    one-round warning judges each cell (``render.caveats.caveats``), the slowdown and the
    savings from the rounds or from one round, each judged by the cells that show that
    figure (where none does, every cell by its own rounds)."""

    def one_round(ratios: Callable[[Any], tuple[Any, ...]], shown: Callable[[Any], bool]):
        said = [[r for r in ratios(s) if shown(r)] for s in summaries]
        judged = [any(r.rounds == 1 for r in rs) for rs in said if rs]
        return judged or [s.rounds == 1 for s in summaries]

    summaries = [r.summary for r in results]
    return cells_legend(
        one_round(lambda s: (s.slowdown, s.memory_savings), lambda r: r.interval is not None),
        one_round(lambda s: (s.slowdown,), lambda r: r.value is not None),
        one_round(lambda s: (s.memory_savings,), lambda r: r.value is not None),
    )


#: The before -> after table's columns and what each is: what the memory figures of a row
#: are (a baseline's peak, another mode's overhead) is its ``memory`` column.
DELTA_LEGEND: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("memory_measure",),
        "memory: what the row's MiB are, the baseline's exact peak (peak) or a mode's peak "
        "over the baseline's (overhead)",
    ),
    (
        ("time_before_s", "time_after_s"),
        "time before s, after s: where either side has two worker processes or more, each "
        "side's geometric mean of its processes' median iterations (new/old is the two "
        "divided); with one process a side, each side's median iteration (new/old is the "
        "median of the iteration pairs' ratios)",
    ),
    (("n_before",), "n: measured iterations, before v after"),
    (("processes_before",), "processes: worker processes, before v after"),
)

#: How ``analysis.stats.time_change`` takes new/old and what the times shown are, by whether
#: the processes were the replicates (two or more on either side) or the iterations (one
#: process a side).
TIME_METHODS = {
    True: "with two worker processes or more on either side, the times shown are each side's "
    "geometric mean of its processes' median iterations (outlier processes set aside from "
    "four a side) and new/old is those two divided, with Welch's t interval over the "
    "processes, or Student's pooled-variance t where one side has a single process",
    False: "with one worker process a side, the times shown are each side's median iteration "
    "and new/old is the median of every new/old iteration pair's ratio, which can differ "
    "from those two divided, with run's one-round interval from the iterations (Bauer's rank "
    "interval, or Student's t on the log times where they are too few)",
}


def time_method(by_process: bool) -> str:
    """A row's ``time_method``: what its new/old divides ('process medians' or 'iteration
    pairs', as :data:`TIME_METHODS` says)."""
    return "process medians" if by_process else "iteration pairs"


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


def run_ratios(*, one_round: bool) -> str:
    """``run``'s note on its two quoted ratios, for a cell of one round or of several: how
    each is taken, as :data:`CELLS_LEGEND`'s slowdown and savings entries say it."""
    what = (
        "slowdown: checkpointed time / normal time; savings: normal's overhead / "
        "checkpointed's overhead (each over the baseline); "
    )
    if one_round:
        return what + (
            "from one round, the slowdown is the median of every checkpointed/normal "
            "iteration pair's ratio, which can differ from the table's times divided, and the "
            "savings are the table's overheads divided, before rounding"
        )
    return what + (
        "each ratio is taken within a round and pooled (slowdown: geometric mean, savings: "
        "median), so it is not the table's columns divided"
    )
