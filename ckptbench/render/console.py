"""Consoles and progress displays for the command line (rich). On a terminal: colour and
the terminal's width. Elsewhere (logs, files, CI): plain text, tables fit ``COLUMNS`` or
:data:`PLAIN_WIDTH` columns and lines are never hard-wrapped."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from ckptbench.render.format import (
    fmt_duration,
    fmt_interval,
    fmt_percent,
    fmt_ratio,
    setting_text,
)
from ckptbench.results.schema import Case, Mode
from ckptbench.results.units import sides_text

__all__ = [
    "PLAIN_WIDTH",
    "JobClock",
    "escaped",
    "mode_progress",
    "plain_width",
    "plan_line",
    "stderr_console",
    "stdout_console",
]

#: Width of tables when stdout is not a terminal.
PLAIN_WIDTH = 120


def plain_width() -> int:
    """The width of output that is not a terminal: ``COLUMNS`` when it holds a width (a CI
    log or a narrow pager asks for it), kept within 20 (the narrowest layout) and 10 000;
    else :data:`PLAIN_WIDTH`."""
    text = os.environ.get("COLUMNS", "").strip()
    return min(max(int(text), 20), 10_000) if text.isdigit() and int(text) > 0 else PLAIN_WIDTH


def escaped(text: object) -> str:
    """``text`` as rich markup that prints as written: in a line like ``pip install
    'ckptbench[torch]'`` or a plug-in's error, ``[torch]`` is a word, not a style, and a
    ``[/x]`` no markup error (a traceback)."""
    from rich.markup import escape

    return escape(str(text))


def stdout_console() -> Console:
    """Results: the terminal's width, or ``COLUMNS`` (default 120) plain columns when piped."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=plain_width(), no_color=True, highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    """Progress, warnings and failures; lines are not wrapped when stderr is a log."""
    console = Console(stderr=True)
    if console.is_terminal:
        return console
    return Console(stderr=True, soft_wrap=True, no_color=True, highlight=False)


def _eta(event: Any) -> str:
    done = event.index + 1
    left = event.planned - done
    if done <= 0 or left <= 0:
        return ""
    return f", ETA {event.elapsed_s / done * left:.0f} s"


def _clock(seconds: float) -> str:
    """'0:42', '12:05', '1:02:05'."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class JobClock:
    """How far a run is and how long it has left: rounds done, the current slowdown and
    savings estimates with their intervals, and an ETA for the whole job.

    ``precision`` (``runner.Precision`` or None) says when the runner stops adding rounds;
    ``guess_round_s`` is the duration of a round before one is measured."""

    def __init__(self, case: Case, modes: Sequence[Mode], precision: Any, guess_round_s: float):
        import time

        self._time = time.monotonic
        self.case, self.modes, self.precision = case, tuple(modes), precision
        self.guess_round_s = guess_round_s
        self.t0: float | None = None
        self.done_rounds: set[int] = set()
        self.results: list[Any] = []
        self.seen: dict[int, set[Mode]] = {}
        self.estimate: dict[str, Any] = {}

    def elapsed(self) -> float:
        return 0.0 if self.t0 is None else self._time() - self.t0

    def started(self) -> None:
        if self.t0 is None:
            self.t0 = self._time()

    def mode_done(self, round_index: int, mode: Mode, result: Any = None) -> bool:
        """Record a finished (or skipped) mode; True when it completed its round."""
        if result is not None:
            self.results.append(result)
        seen = self.seen.setdefault(round_index, set())
        seen.add(mode)
        if seen >= set(self.modes) and round_index not in self.done_rounds:
            self.done_rounds.add(round_index)
            self._estimate()
            return True
        return False

    def _estimate(self) -> None:
        from ckptbench.analysis import memnoise
        from ckptbench.analysis.summary import pool_by_mode, round_estimates

        try:
            est = round_estimates(self.results)
            ranges = {
                m.mode.value: memnoise.peak_range([it.peak_rss_bytes for it in m.iterations])
                for m in pool_by_mode(self.results)
                if m.ok
            }
            base = ranges.get("baseline")
            over = [memnoise.overhead(ranges.get(k), base) for k in ("normal", "checkpointed")]
            if any(o is None or o.below_noise for o in over):
                # an overhead within its noise, or not shown (a mode not ok in some round)
                est.pop("memory_savings", None)
        except Exception:  # a display must never stop a run
            est = {}
        self.estimate = est

    def round_s(self) -> float:
        n = len(self.done_rounds)
        return self.elapsed() / n if n else self.guess_round_s

    def rounds_expected(self) -> int:
        """The rounds this job will most likely run: the planned ones, more while the
        interval is wider than --precision (shrinking as 1/sqrt(rounds)), capped."""
        planned = self.case.rounds
        prec = self.precision
        if prec is None:
            return planned
        done = len(self.done_rounds)
        slow = self.estimate.get("slowdown")
        half = getattr(slow, "half_width_rel", None)
        want = planned
        if half is not None and done >= 2 and half > prec.target_rel:
            want = max(planned, int(done * (half / prec.target_rel) ** 2 + 0.999))
        want = min(want, max(prec.max_rounds, planned))
        by_time = int(prec.max_time_s / max(self.round_s(), 1e-9))
        return max(min(want, max(by_time, prec.min_rounds)), done, 1)

    def eta_s(self) -> float:
        left = self.rounds_expected() - len(self.done_rounds)
        current = self.seen.get(len(self.done_rounds), set())
        into = len(current) / max(len(self.modes), 1)  # the round in flight, roughly
        eta = max(left - into, 0.0) * self.round_s()
        if self.precision is not None:
            # two rounds always run (measure.rounds.next_round), however long they take
            least = self.precision.min_rounds - len(self.done_rounds) - into
            two = max(least, 0.0) * self.round_s()
            cap = self.precision.max_time_s + self.round_s() - self.elapsed()
            eta = min(eta, max(cap, two, 0.0))
        return eta

    def summary(self) -> str:
        """'3 rounds done (plan 6-30) · 1:12 elapsed, ~2:40 left · slowdown 1.31x [1.25,
        1.37] -4.6%/+4.6% (goal 5%) · savings 79.8x': the time first, so a narrow terminal
        that cuts the line still shows it."""
        done = len(self.done_rounds)
        plan = f"{self.case.rounds}"
        if self.precision is not None:
            plan += f"-{max(self.precision.max_rounds, self.case.rounds)}"
        parts = [
            f"{done} round{'s' if done != 1 else ''} done (plan {plan})",
            f"{_clock(self.elapsed())} elapsed, ~{_clock(self.eta_s())} left",
        ]
        slow = self.estimate.get("slowdown")
        if slow is not None and done < 2:  # one process a mode: no spread between processes
            more = self.case.rounds > 1 or self.precision is not None  # a round 2 may come
            why = "the rounds' interval from round 2" if more else "one round: no interval"
            parts.append(f"slowdown {slow.value:.2f}x ({why})")
        elif slow is not None:
            lo, hi = slow.as_list()
            goal = f" (goal {fmt_percent(self.precision.target_rel, 0)})" if self.precision else ""
            parts.append(
                f"slowdown {slow.value:.2f}x {fmt_interval(lo, hi, center=slow.value)} "
                f"{sides_text(slow.value, lo, hi)}{goal}"
            )
        sav = self.estimate.get("memory_savings")
        if sav is not None:
            parts.append(f"savings {fmt_ratio(sav.value, 1)}")
        return " · ".join(parts)


def plan_line(
    case: Case,
    modes: Any,
    target: Any,
    round_s: float,
    load: tuple[float, int] | None = None,
    costs_s: float | None = None,
    costs_unknown: str = "",
) -> str:
    """What ``run`` will do and about how long, said before measuring: 'measuring lstm 1000
    steps, 31 snaps (revolve): baseline, normal, checkpointed in a fresh process each, 1
    warm-up + 1 iteration per round; 6 rounds of ~28 s, then more until the slowdown is
    within +/-5% (at most 30 rounds; none that would end past --max-time 4 min): about 2 min
    47 s to 4 min 28 s.' ``target`` is ``--precision`` (None: exactly ``case.rounds``);
    ``load`` (load average, cores) adds a note when the machine is busy; ``costs_s``: the
    step costs a plan needs, measured first (None: none measured), in every total, with
    what that estimate leaves out (``costs_unknown``, e.g. "JAX's compilations")."""
    names = ", ".join(m.value for m in modes)
    per = f"{case.warmup} warm-up + {case.repeats} iteration{'s' if case.repeats > 1 else ''}"
    first_costs, costs_s = _costs_first(costs_s, costs_unknown)
    head = (
        f"measuring {case.model} {case.steps} steps, {setting_text(case)}: {first_costs}"
        f"{names} in a fresh process each, {per} per round; "
    )
    least = case.rounds * round_s
    busy = _busy_note(load)
    rounds = f"{case.rounds} round{'s' if case.rounds != 1 else ''}"
    if target is None:
        total = f"about {fmt_duration(costs_s + least)}"
        return head + f"{rounds} of ~{fmt_duration(round_s)}: {total}{_plus(costs_unknown)}.{busy}"
    cap = target.max_time_s
    two = target.min_rounds * round_s  # these run however long: the cap never stops them
    first = max(min(least, cap + round_s), two)
    most = max(min(target.max_rounds * round_s, cap + round_s), two)
    past = f", but the first {target.min_rounds} always run" if two > cap else ""
    span = (
        f"about {fmt_duration(costs_s + first)}"
        if most - first < 30
        else f"about {fmt_duration(costs_s + first)} to {fmt_duration(costs_s + most)}"
    )
    return head + (
        f"{rounds} of ~{fmt_duration(round_s)}, then more until the slowdown is "
        f"within +/-{fmt_percent(target.target_rel, 0)} (at most {target.max_rounds} rounds; "
        "none that would "
        f"end past --max-time {fmt_duration(cap)}{past}): {span}{_plus(costs_unknown)}.{busy} "
        "Ctrl-C keeps the complete rounds."
    )


def _costs_first(costs_s: float | None, unknown: str) -> tuple[str, float]:
    """('the plan's step costs first, in a worker of their own (~8 s; ...), then ', 8.0),
    or ('', 0.0) where no step costs are measured (``costs_s`` None)."""
    if costs_s is None:
        return "", 0.0
    return (
        f"the plan's step costs first, in a worker of their own (~{fmt_duration(costs_s)}"
        f"{_plus(unknown)}; `ckptbench plan --save-costs FILE` keeps them for `--costs FILE`), "
        "then "
    ), costs_s


def _plus(unknown: str) -> str:
    """' plus JAX's compilations': what an estimate leaves out, said after it."""
    return f" plus {unknown}" if unknown else ""


def _busy_note(load: tuple[float, int] | None) -> str:
    """' The machine is busy (load average 14.2 on 2 cores): rounds take longer; the ETA
    follows the measured ones.' when more processes want a core than there are cores."""
    if load is None or load[0] <= load[1]:
        return ""
    return (
        f" The machine is busy (load average {load[0]:.1f} on {load[1]} cores): rounds take "
        "longer; the ETA follows the measured ones."
    )


def mode_progress(
    console: Console,
    modes: Sequence[Mode],
    case: Case,
    *,
    quiet: bool = False,
    verbose: bool = False,
    lines: bool = False,
    precision: Any = None,
    guess_round_s: float = 30.0,
    announce: str | None = None,
):
    """Progress fed by the runner's events; returns (callback, stop).

    In a terminal a live display of at most one line per mode of the round in flight and
    one summary line (rounds done, the current slowdown and savings with their intervals,
    elapsed time and an ETA for the whole job); each finished round prints one line above
    it and scrolls away, so the display never grows past the terminal. Elsewhere one line
    per finished mode and per finished round (with the same summary). ``lines``
    (``--progress``) prints one line per iteration with the elapsed time and an ETA even
    when not a terminal; ``verbose`` adds each iteration's time and exact peak; ``quiet``
    shows nothing. A (round, mode) the runner skips after the mode ran out of memory shows
    as skipped; the run's warnings say it once. ``announce`` (what the run will do and about
    how long) is printed as the first mode starts, after every input check.
    """
    clock = JobClock(case, modes, precision, guess_round_s)
    progress = _ModeProgress(
        console, modes, case, clock, quiet=quiet, verbose=verbose, lines=lines, announce=announce
    )
    return progress, progress.stop


class _ModeProgress:
    """The callback :func:`mode_progress` returns: what each mode of the round in flight
    is doing (``state``), the job's clock, and the live display on a terminal (``display``,
    with ``clock``: what tests read)."""

    def __init__(
        self, console: Console, modes: Sequence[Mode], case: Case, clock: JobClock, *,
        quiet: bool, verbose: bool, lines: bool, announce: str | None,
    ) -> None:  # fmt: skip
        from rich.live import Live

        self.console, self.modes, self.case, self.clock = console, modes, case, clock
        self.quiet, self.verbose, self.lines, self.announce = quiet, verbose, lines, announce
        self.live_on = console.is_terminal and not quiet and not lines
        self.planned = case.warmup + case.repeats
        self.state: dict[Mode, str] = {}
        self.current = 0
        self.display = Live(
            get_renderable=self.render,
            console=console,
            auto_refresh=True,
            refresh_per_second=2,
            transient=True,
            vertical_overflow="crop",
        )

    def label_of(self, round_index: int, mode: Mode) -> str:
        if self.case.rounds == 1 and round_index == 0 and self.clock.precision is None:
            return mode.value
        return f"round {round_index + 1} {mode.value}"

    def render(self) -> Any:
        from rich.text import Text

        text = Text(no_wrap=True, overflow="ellipsis")
        for m in self.modes:
            text.append(f"{self.label_of(self.current, m)}: {self.state.get(m, 'waiting')}\n")
        text.append(self.clock.summary(), style="bold")
        return text

    def say(self, text: str) -> None:
        if not self.quiet:
            self.console.print(text, highlight=False, markup=False, soft_wrap=not self.live_on)

    def round_line(self, round_index: int) -> str:
        """A finished round: one short line on a terminal (it scrolls away above the live
        display), with the job's summary in a log."""
        got = [r for r in self.clock.results if r.round == round_index]
        times = []
        for r in got:  # each mode's median iteration, as the table's time/iter
            t = [it.wall_time_s for it in r.iterations]
            times.append(f"{r.mode.value} {statistics.median(t):.2f} s" if t else
                         f"{r.mode.value} {r.status.value}")  # fmt: skip
        line = f"round {round_index + 1}: {', '.join(times)}"
        return line if self.live_on else f"{line}; {self.clock.summary()}"

    def __call__(self, event: Any) -> None:
        clock = self.clock
        if clock.t0 is None:  # measuring starts: say what and how long, then show progress
            if self.announce and not self.quiet:
                self.console.print(self.announce, highlight=False, markup=False)
            if self.live_on:
                self.display.start()
        clock.started()
        if event.round != self.current:
            self.current = event.round
            self.state.clear()
        label = self.label_of(event.round, event.mode)
        if event.phase == "skip":  # out of memory in an earlier round: the run's warning says so
            self.state[event.mode] = "skipped (out of memory before)"
            if clock.mode_done(event.round, event.mode):
                self.say(self.round_line(event.round))
        elif event.phase == "start":
            self.state[event.mode] = "starting a fresh worker"
        elif event.phase == "iteration":
            self._iteration(event, label)
        else:
            status = event.result.status.value
            self.state[event.mode] = status
            if not self.live_on:
                self.say(f"{label}: {status}")
            if clock.mode_done(event.round, event.mode, event.result):
                self.say(self.round_line(event.round))

    def _iteration(self, event: Any, label: str) -> None:
        """An iteration done: the mode's state, and a line with ``--progress`` or
        ``--verbose`` (its time and exact peak too with ``--verbose``)."""
        kind = "warm-up" if event.warmup else "iteration"
        self.state[event.mode] = f"{kind} {event.index + 1}/{self.planned}, {event.elapsed_s:.0f} s"
        if self.lines or self.verbose:
            rec = event.record
            detail = (
                f": {rec.wall_time_s:.3f} s, exact peak {rec.peak_rss_bytes / 2**20:.1f} MiB"
                if self.verbose and rec is not None
                else ""
            )
            self.say(
                f"{label}: {kind} {event.index + 1}/{event.planned}{detail}, elapsed "
                f"{event.elapsed_s:.0f} s{_eta(event)}"
            )

    def stop(self) -> None:
        if self.display.is_started:
            self.display.stop()
