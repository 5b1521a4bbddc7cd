"""The checks of one cell that ``ckptbench check`` gates on, each a :class:`GateLine`: its
status (every mode measured ok, or out of memory where ``--expect-oom`` said so), its
``[expect]`` thresholds, and its memory and time against the same cell of a reference.
Each line says both sides of its limit, so a failure reads without the files at hand.
What is checked and why is :mod:`ckptbench.analysis.gate`'s docstring; the gate puts the
lines of every cell into its report.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ckptbench.analysis import PooledCell, memory_delta, time_change
from ckptbench.analysis.stats import figure_apart
from ckptbench.results.schema import MODES, Mode, RunResult, Status
from ckptbench.results.units import interval_text, size_text
from ckptbench.schedules import get_strategy
from ckptbench.sweep.config import Expect

MIB = 2**20

__all__ = ["GateLine", "expect_lines", "memory_lines", "status_line", "time_lines"]


@dataclass(frozen=True)
class GateLine:
    """One check of one cell."""

    key: str
    host: str
    check: str  # "status", "memory_savings_min", "memory:normal", "time:checkpointed", ...
    passed: bool
    detail: str


# --------------------------------------------------------------------------- expectations


@lru_cache(maxsize=256)
def _fmt(v: float | None, spec: str = ".3g") -> str:
    return "n/a" if v is None else format(v, spec)


def _typical(tc: Any) -> str:
    """What a time line's two times are (``stats.TimeChange``): with two processes or more on
    either side, the ratio is the two divided; with one a side, it is the median of the
    iteration pairs' ratios (said after it, :func:`_ratio_word`)."""
    return "process medians (geometric mean)" if tc.by_process else "median iteration"


def _ratio_word(tc: Any) -> str:
    """How a time line's new/old was taken, where it is not its two times divided."""
    return "" if tc.by_process else " (median of the iteration pairs' ratios)"


def _limit(v: float) -> str:
    """An [expect] limit as written: '25', '1e-08', and every digit of a longer one ('%g'
    read 1.2940938 as 1.29409, below a figure of 1.2940932 that had passed it)."""
    short = f"{v:g}"
    return short if float(short) == v else repr(float(v))


def _need(value: str, condition: str, passed: bool) -> str:
    """Both sides of a threshold: '23.10x, need >= 25x' (failed) or '30.20x (need >= 25x)'."""
    return f"{value} (need {condition})" if passed else f"{value}, need {condition}"


def expect_lines(result: RunResult, expect: Expect) -> list[GateLine]:
    """One line per threshold ``expect`` sets that ``result`` is held to."""
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
            got = f">= {figure_apart(v, least)}x (checkpointed overhead within its noise)"
        elif v is None:
            got = "no figure (an overhead not measured ok, or at or below the baseline)"
        ok = v is not None and v >= least
        add(
            "memory_savings_min",
            ok,
            _need(got or f"{figure_apart(v, least)}x", f">= {_limit(least)}x", ok),
        )
    if (most := expect.slowdown_max) is not None:  # on the estimate, its interval shown
        v, ci = s.slowdown.value, s.slowdown.interval
        ok = v is not None and v <= most
        got = f"{figure_apart(v, most)}x" if v is not None else "no figure (a time not measured ok)"
        if v is not None and ci:
            wide = " (the interval reaches past the limit)" if ok and ci[1] > most else ""
            got += f" [{', '.join(interval_text(ci[0], ci[1], 2))}]{wide}"
        add("slowdown_max", ok, _need(got, f"<= {_limit(most)}x", ok))
    if (most := expect.grad_max_rel_err_max) is not None:
        v = s.grad_max_rel_err
        ok = v is not None and v <= most
        got = figure_apart(v, most, "e") if v is not None else _fmt(v)
        add("grad_max_rel_err_max", ok, _need(got, f"<= {_limit(most)}", ok))
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


def status_line(result: RunResult) -> GateLine:
    """Whether every mode of ``result`` was measured ok (or out of memory where
    ``--expect-oom`` said so); where not, which, in which rounds, and the first error."""
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
    lost = result.summary.rounds_missing  # no stop recorded: a gate passes no such cell
    if missing:
        detail, ok = f"incomplete: {result.absent_modes}", False
    elif lost:
        gone = "; ".join(x.text for x in lost)
        detail, ok = f"incomplete: {gone}; the file records no stop", False
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


def memory_lines(ref: PooledCell, cur: PooledCell, tolerance: float, floor: int) -> list[GateLine]:
    """The baseline's peak and each overhead of ``cur`` against ``ref``'s, one line per mode;
    a growth past ``max(tolerance * reference, floor)`` bytes fails."""
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


def time_lines(
    ref: PooledCell, cur: PooledCell, tol: float
) -> tuple[list, bool, bool, frozenset[bool]]:
    """The time checks of one cell, whether a side had one worker process, whether a
    check passed with an interval reaching past the limit (too wide to tell), and how its
    intervals were taken (``TimeChange.by_process`` of each: over the processes, or from one
    process a side's iterations)."""
    out, single, blind, methods = [], False, False, set()
    for mode in (Mode.NORMAL, Mode.CHECKPOINTED):
        before, after = ref.process_times(mode), cur.process_times(mode)
        tc = time_change(before, after, tolerance=tol)
        name = f"time:{mode.value}"
        if tc is None:  # a side shows no time for the mode: said, as a memory line says it
            out.append(_unmeasured(cur, mode, name, (bool(before), bool(after))))
            continue
        single = single or min(tc.processes_before, tc.processes_after) < 2
        methods.add(tc.by_process)
        verdict = tc.verdict
        if verdict in ("no change", "cannot tell") and tc.high > 1 + tol:
            verdict, blind = "no change shown, but the interval reaches past the limit", True
        limit = f"{1 + tol:.10g}"
        detail = (
            f"{_typical(tc)} {tc.before_median_s:.4f} -> {tc.after_median_s:.4f} s, new/old "
            f"{tc.ratio:.3f}{_ratio_word(tc)} "
            f"[{', '.join(_ends_apart(tc.low, tc.high, float(limit)))}] "
            f"vs limit {limit} "
            f"({tc.processes_before}v{tc.processes_after} processes, "
            f"{tc.n_before}v{tc.n_after} iterations): {verdict}"
        )
        out.append(GateLine(cur.case.key, cur.host, name, tc.verdict != "slower", detail))
    return out, single, blind, frozenset(methods)


def _ends_apart(low: float, high: float, limit: float) -> tuple[str, str]:
    """An interval's ends rounded outward to three decimals, or more until each is printed on
    its side of ``limit``: a low end of 1.1003 over a limit of 1.1 read '1.100' on a line
    saying slower."""
    for digits in range(3, 13):
        ends = interval_text(low, high, digits)
        if all((float(t) > limit) == (v > limit) for v, t in zip((low, high), ends, strict=True)):
            break
    return ends
