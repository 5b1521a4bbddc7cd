"""Measurement caveats, grouped by what they say: one line per kind of warning, naming the
cells and modes it applies to (the terminal, markdown and HTML show the same lines).

A run's caveats come from its summary (``RunResult.summary``) and environment: the noise verdicts
(``ckptbench.analysis.stability``), a busy machine (workers got less than a core), rounds
set aside from the slowdown, a mode skipped after it ran out of memory, ``--precision`` not
reached. Each is a :class:`Caveat` with a text that does not depend on the cell, so equal
texts group, and the value that differs (the worst one is quoted). Returns strings; never
prints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ckptbench.analysis import BUSY_CPU_SHARE
from ckptbench.analysis.stability import VerdictKind
from ckptbench.analysis.stats import percent_text
from ckptbench.analysis.trace import OVER_SLACK, trace_warnings
from ckptbench.render.format import fmt_percent
from ckptbench.results.schema import (
    SAVED_MID_RUN,
    Mode,
    RunResult,
    Status,
    complete_rounds_text,
)
from ckptbench.results.units import half_width_text, relative_text

__all__ = [
    "MISSING_ROUNDS",
    "NOT_MEASURED",
    "NO_SAVINGS",
    "ONE_ROUND",
    "Caveat",
    "caveats",
    "grouped_warning_lines",
    "warning_lines",
]

_UNSTABLE = "* time figures marked * are unstable (see the lines above)"
#: Savings whose whole interval lies below 1x: the checkpointed gradient needed more memory
#: than the plain one (small states beside large snapshots, a framework keeping more than it
#: frees).
NO_SAVINGS = (
    "checkpointing saved no memory here: the checkpointed gradient needed more over the "
    "baseline than the plain one (savings below 1x)"
)
#: A mode that failed, crashed, timed out or ran out of memory in some round: its time and
#: memory are not shown, nor a ratio over them (slowdown, savings: its other rounds would
#: leave out the one it failed in); the table's status column, which a narrow terminal may
#: leave out, says which.
NOT_MEASURED = (
    "modes that did not measure ok in every round: their times, memory and the ratios over "
    "them are not shown (see their status)"
)
#: A mode the file lacks in rounds the case plans, and no stop, ``--precision`` or memory
#: limit recorded to say why (a record deleted, files merged by hand): its figures, and the
#: ratios over them, come from the rounds present (``CellSummary.rounds_missing``).
MISSING_ROUNDS = (
    "rounds the case plans are missing from the file, and it records no stop: the figures "
    "come from the rounds present (`ckptbench check` fails the cell)"
)
#: One round's intervals (``ckptbench.analysis.intervals``) come from its iterations alone:
#: they cannot see how much a mode's time moves between fresh processes (several percent,
#: the larger error), and one round's savings interval is a worst case, not a 95% interval.
ONE_ROUND = (
    "intervals from one round see its iterations, not the spread between fresh processes "
    "(its savings interval is the range they allow, a worst case); --rounds 3 or more gives "
    "95% intervals over the rounds, which see that spread"
)


@dataclass(frozen=True)
class Caveat:
    """One caveat of one result: ``text`` is the same for every cell it can apply to;
    ``mode`` and ``detail`` (e.g. 'round 5 1.552x') say where; ``value`` is quoted as the
    worst over the group (the largest, or the smallest when ``worst_is_low``)."""

    text: str
    mode: str | None = None
    detail: str | None = None
    value: float | None = None
    value_fmt: str = ".2f"
    worst_is_low: bool = False
    note: str = ""  # said after where it applies


#: What each noise verdict says (the same text for every cell), and its value's format.
_NOISE_TEXTS = {
    VerdictKind.HIGH_CV: ("iteration times vary by more than {t} (CV)", ".1%"),
    VerdictKind.WIDE_INTERVAL: ("slowdown interval wider than +/-{t} of the estimate", ".1%"),
    VerdictKind.OTHER_PROCESSES: (
        "other processes used more than {t:.2f} cores while it ran",
        ".2f",
    ),
    VerdictKind.PEAK_SPREAD: (
        "exact peaks differ across rounds by more than max(1 MiB, 0.5%)",
        "",
    ),
    VerdictKind.ZERO_TIME: (
        "iterations timed at 0 s: the clock did not move, so their times cannot be trusted",
        "",
    ),
    VerdictKind.CLOCK_SLOW: (
        "the measuring thread used more CPU time than the wall time that passed (over "
        "{t:.2f}x, impossible for one thread): the clock ran slow, so the times cannot be "
        "trusted",
        ".2f",
    ),
}


def _noise(result: RunResult) -> list[Caveat]:
    out = []
    for v in result.summary.noise:
        if v.kind is VerdictKind.LOW_CPU_SHARE:  # said once, by the busy-machine caveat
            continue
        if v.kind not in _NOISE_TEXTS:
            out.append(Caveat(str(v.message), v.mode))
            continue
        text, fmt = _NOISE_TEXTS[v.kind]
        if v.kind is VerdictKind.PEAK_SPREAD:
            detail = None if v.value is None else f"{v.value / 2**20:.2f} MiB"
            out.append(Caveat(text, v.mode, detail))
        elif v.kind is VerdictKind.ZERO_TIME:
            out.append(Caveat(text, v.mode))
        else:
            t = v.threshold or 0  # '{t}': a fraction, shown as the percentage it was given
            shown = text.format(t=percent_text(t)) if "{t}" in text else text.format(t=t)
            out.append(Caveat(shown, v.mode, None, v.value, fmt))
    return out


def _stopped(result: RunResult, cut: str) -> Caveat:
    """Where a run was stopped and by what ('interrupted in round 3 by SIGTERM, 2 complete
    rounds'), or for a file saved mid-run its complete rounds alone ('1 complete round', as
    compare's status column says it: nothing stopped it that the file records), and what
    its figures come from: its complete rounds, or with none, what it measured before."""
    complete = result.rounds_complete
    what = (
        "the figures come from the complete rounds"
        if complete
        else "no round completed: the figures come from the part of a round the file holds"
    )
    rounds = complete_rounds_text(complete)
    if result.saved_mid_run:
        return Caveat(f"{SAVED_MID_RUN}: {what}", None, rounds)
    by = f" by {result.stopped_by}" if result.stopped_by else ""
    return Caveat(f"ckptbench was stopped: {what}", None, f"{cut}{by}, {rounds}")


def caveats(result: RunResult) -> list[Caveat]:
    """Every caveat of one result, in the order the lines are shown."""
    s, env = result.summary, result.environment
    out = _noise(result)
    if any(r.interval is not None and r.rounds == 1 for r in (s.slowdown, s.memory_savings)):
        out.append(Caveat(ONE_ROUND))
    savings = s.memory_savings
    if (
        savings.value is not None
        and (savings.high if savings.high is not None else savings.value) < 1
    ):
        out.append(Caveat(NO_SAVINGS, None, None, savings.value, ".2f", worst_is_low=True))
    failed: dict[str, set[str]] = {}
    for m in result.modes:  # a cut mode is said by the interruption's caveat
        if m.status not in (Status.OK, Status.INTERRUPTED):
            failed.setdefault(m.mode.value, set()).add(m.status.value)
    for mode, statuses in failed.items():
        out.append(Caveat(NOT_MEASURED, None, f"{mode} {', '.join(sorted(statuses))}"))
    out += [Caveat(MISSING_ROUNDS, None, lost.text) for lost in s.rounds_missing]
    per_round = s.slowdown.per_round or ()
    for k in s.slowdown.set_aside:
        ratio = f" {per_round[k - 1]:.3f}x" if k <= len(per_round) else ""
        out.append(
            Caveat("rounds set aside from the slowdown as outliers", None, f"round {k}{ratio}")
        )
    if (cut := result.interruption) is not None:
        out.append(_stopped(result, cut))
    prec = env.get("precision") or {}
    why = {"max-rounds": "--max-rounds", "max-time": "--max-time", "no-slowdown": "no slowdown",
           "out-of-memory": "every mode exceeding --memory-limit"}  # fmt: skip
    if prec.get("stopped") in why:
        half = prec.get("half_width_rel")
        got = "no interval" if half is None else half_width_text(half)
        within = half is not None and half <= prec["target_rel"]  # the planned rounds cut
        out.append(
            Caveat(
                f"--precision {fmt_percent(prec['target_rel'])} "
                + ("met, but by fewer rounds than planned" if within else "not reached"),
                None,
                f"{got} after {prec['rounds']} round{'s' if prec['rounds'] != 1 else ''}, "
                f"stopped by {why[prec['stopped']]}",
            )
        )
    for mode, first in (env.get("skipped_after_oom") or {}).items():
        out.append(
            Caveat(
                "exceeded the memory limit, so later rounds skipped it (--retry-oom measures "
                "every round)",
                None,
                f"{mode} from round {first}",
            )
        )
    out += [Caveat(OVER_SLACK, Mode.CHECKPOINTED.value, line) for line in trace_warnings(result)]
    for mode, share in s.busy_modes.items():
        out.append(
            Caveat(
                f"the machine was busy: workers got less than {BUSY_CPU_SHARE:.0%} of a core "
                "(CPU/wall time)",
                mode,
                None,
                share,
                ".1%",  # 89.6%: at '.0%' it read 'less than 90% ... (down to 90%)'
                worst_is_low=True,
                note="times and slowdown are not trustworthy, memory is",
            )
        )
    return out


def _where(items: Sequence[Caveat]) -> str:
    modes = list(dict.fromkeys(c.mode for c in items if c.mode))
    details = list(dict.fromkeys(c.detail for c in items if c.detail))
    return ", ".join([*modes, *details])


def grouped_warning_lines(
    results: Sequence[RunResult], labels: Sequence[str] | None = None
) -> list[str]:
    """One line per caveat text over ``results``: the worst value, then where it applies
    (the modes and details; with ``labels``, per cell: 'cell (normal, checkpointed)'), and
    the unstable-times footnote once."""
    groups: dict[str, list[tuple[int, Caveat]]] = {}
    for i, r in enumerate(results):
        for c in caveats(r):
            groups.setdefault(c.text, []).append((i, c))
    lines = []
    for text, items in groups.items():
        values = [c.value for _, c in items if c.value is not None]
        worst = ""
        if values:
            first = items[0][1]
            v = min(values) if first.worst_is_low else max(values)
            shown = relative_text(v) if first.value_fmt == ".1%" else f"{v:{first.value_fmt}}"
            worst = f" ({'down to' if first.worst_is_low else 'up to'} {shown})"
        if labels is None:
            where = _where([c for _, c in items])
        else:
            cells = list(dict.fromkeys(i for i, _ in items))
            parts = []
            for i in cells:
                inner = _where([c for j, c in items if j == i])
                parts.append(f"{labels[i]} ({inner})" if inner else labels[i])
            where = "; ".join(parts)
            inners = {_where([c for j, c in items if j == i]) for i in cells}
            if len(cells) == len(results) > 1 and len(inners) == 1:
                inner = inners.pop()
                where = f"all {len(results)} cells" + (f" ({inner})" if inner else "")
        note = items[0][1].note
        lines.append(
            f"{text}{worst}" + (f": {where}" if where else "") + (f"; {note}" if note else "")
        )
    if any(r.summary.time_unstable for r in results):
        lines.append(_UNSTABLE)
    return lines


def warning_lines(result: RunResult) -> list[str]:
    """The caveats of one run, grouped (one line per kind, naming its modes)."""
    return grouped_warning_lines([result])
