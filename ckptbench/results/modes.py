"""The modes a case is measured in, the outcome of one mode's measurement, how a mode's
rounds pool into one result, whether the run that wrote a file finished, and the planned
rounds a file lacks with no reason recorded. Imports nothing of ckptbench (the schema and
the summary both build on it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptbench.results.schema import ModeResult

__all__ = ["FINISHED_WHY", "MODES", "UNFINISHED", "MissingRounds", "Mode", "Status",
           "complete_rounds", "finished_record", "missing_rounds", "pool_rounds",
           "recorded_stop"]  # fmt: skip

#: Why a finished run measured no more rounds (``environment.finished.why``, written by
#: ``measure.recording.Recording.finish``; :func:`finished_record` says what each means).
FINISHED_WHY = ("planned", "reached", "max-time", "max-rounds", "no-slowdown",
                "out-of-memory", "plugin-changed")  # fmt: skip

#: What a file saved mid-run says stopped it (``environment.interrupted.by``), until the
#: run's last save replaces it: read later, the run was killed outright (SIGKILL, a power
#: cut) or is still measuring (``ckptbench.measure.recording``).
UNFINISHED = "nothing recorded: saved mid-run, and never finished (killed, or still running)"


class Mode(Enum):
    """How the gradient is computed in one worker process."""

    BASELINE = "baseline"  # forward only, zero gradient: the memory floor
    NORMAL = "normal"  # plain autograd, every step's tape kept
    CHECKPOINTED = "checkpointed"  # binomial_checkpoint with the case's strategy


class Status(Enum):
    """Outcome of one mode's measurement."""

    OK = "ok"
    FAILED = "failed"  # the worker reported an error (e.g. gradient mismatch)
    CRASHED = "crashed"  # the worker died or printed no result
    TIMEOUT = "timeout"  # stopped at --timeout; the iterations it completed are kept
    OUT_OF_MEMORY = "out-of-memory"  # RSS exceeded --memory-limit; the worker was stopped
    INTERRUPTED = "interrupted"  # ckptbench itself was stopped (SIGTERM, SIGHUP, Ctrl-C)


MODES: tuple[Mode, ...] = (Mode.BASELINE, Mode.NORMAL, Mode.CHECKPOINTED)


def complete_rounds(results: Sequence[ModeResult]) -> tuple[ModeResult, ...]:
    """The (round, mode) results of the complete rounds (rounds in which no mode was cut by an
    interruption), where there is one: every figure of a stopped run comes from them, not a
    mode of the cut round beside them. A mode that failed in the cut round before the stop
    is kept (a failure is never hidden: its pooled status says it, its figures are none).
    With no complete round, every result."""
    cut = {r.round for r in results if r.status is Status.INTERRUPTED}
    if not cut or not {r.round for r in results} - cut:
        return tuple(results)
    return tuple(
        r for r in results if r.round not in cut or not (r.ok or r.status is Status.INTERRUPTED)
    )


def pool_rounds(rounds: tuple[ModeResult, ...]) -> ModeResult:
    """One mode's rounds as one result: iterations concatenated in round order.

    A round stopped because ckptbench itself was interrupted is left out when the mode has
    rounds that were not: the mode's figures come from its complete rounds, and the
    interruption is the run's note, not the mode's failure. Otherwise the status is the first
    round's that is not ok (so a failure is never hidden); counters and gradient error come
    from the first round (every round runs the same schedule); the sampled peak is the
    highest of any round.
    """
    kept = tuple(r for r in rounds if r.status is not Status.INTERRUPTED)
    rounds = kept or rounds
    if len(rounds) == 1:
        return replace(rounds[0], round=0)
    first = rounds[0]
    bad = next((r for r in rounds if not r.ok), None)
    sampled = [r.sampled_peak_rss_bytes for r in rounds if r.sampled_peak_rss_bytes]
    errs = [r.grad_max_rel_err for r in rounds if r.grad_max_rel_err is not None]
    return replace(
        bad or first,
        iterations=tuple(it for r in rounds for it in r.iterations),
        warmup=tuple(it for r in rounds for it in r.warmup),
        sampled_peak_rss_bytes=max(sampled) if sampled else None,
        sample_count=sum(r.sample_count for r in rounds),
        grad_max_rel_err=max(errs) if errs else None,
        counters=first.counters,
        trace=next((r.trace for r in rounds if r.trace is not None), None),
        round=0,
    )


@dataclass(frozen=True)
class MissingRounds:
    """A mode the file holds in fewer of the case's planned rounds than it should, with no
    reason recorded (:func:`missing_rounds`): ``present`` of ``planned`` rounds, and the
    1-based rounds it lacks."""

    mode: Mode
    present: int
    planned: int
    absent: tuple[int, ...]

    @property
    def text(self) -> str:
        """'normal: 1 of 2 planned rounds (round 2 missing)'."""
        gone = ", ".join(map(str, self.absent[:5])) + (", ..." if len(self.absent) > 5 else "")
        s = "s" * (len(self.absent) > 1)
        return (
            f"{self.mode.value}: {self.present} of {self.planned} planned rounds "
            f"(round{s} {gone} missing)"
        )


def _whole(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool)
    return value if ok else None


def finished_record(environment: Mapping[str, Any] | None) -> Mapping[str, Any] | bool | None:
    """Whether the run that wrote a file finished, as its ``environment.finished`` says:
    False in every save before the run's last (saved mid-run, or stopped by a signal), the
    run's ``{"rounds": N, "why": ...}`` in its last save: N rounds ran, and no more because
    every ``planned`` one had; ``--precision`` was ``reached`` or stopped at ``max-time``,
    ``max-rounds`` or ``no-slowdown`` (its ``precision.stopped``); every mode was over the
    memory limit (``out-of-memory``); or the plug-in changed mid-run (``plugin-changed``).
    None where the file does not say (written before ckptbench recorded it, or built by
    hand): such a file is read as before, by what else it records."""
    env = environment if isinstance(environment, Mapping) else {}
    end = env.get("finished")
    if end is False:
        return False
    if isinstance(end, Mapping) and _whole(end.get("rounds")) is not None:
        return end
    return None


def recorded_stop(
    results: Sequence[ModeResult], environment: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    """The stop a file records (``environment.interrupted``: by what, the 1-based round it
    cut), or None. A file whose run says it did not finish (:func:`finished_record` False)
    and records no stop otherwise reads as saved mid-run (:data:`UNFINISHED`), cut in the
    round of a mode ``interrupted``, else in its last round where a mode the file holds is
    absent from it, else before the next one."""
    env = environment if isinstance(environment, Mapping) else {}
    stop = env.get("interrupted")
    if isinstance(stop, Mapping) or finished_record(env) is not False:
        return stop if isinstance(stop, Mapping) else None
    cut = [r.round for r in results if r.status is Status.INTERRUPTED]
    last = max((r.round for r in results), default=-1)
    whole = {r.mode for r in results} <= {r.mode for r in results if r.round == last}
    return {"by": UNFINISHED, "round": min(cut) + 1 if cut else last + (2 if whole else 1)}


def missing_rounds(
    results: Sequence[ModeResult], planned: int, environment: Mapping[str, Any] | None
) -> tuple[MissingRounds, ...]:
    """Each mode the results hold in some round but not in every round of the ``planned``
    ones (0 to ``planned - 1``) that the run should have measured it in: a record deleted
    or lost (files merged, edited, cut). Which rounds it should have: those the run says it
    ran, in its last save (``environment.finished.rounds``: a file that holds fewer rounds
    in every mode is missing the rest; one whose ``why`` is ``planned`` ran every planned
    round, whatever number it says); in a file that does not say (written before that was
    recorded, or built by hand), up to the last round any mode holds. Rounds the file says
    why it lacks are not missing: those from the round a stop cut
    (``environment.interrupted``, or a mode ``interrupted``; a file saved mid-run too), those
    after ``--precision`` stopped early (``environment.precision.rounds``), and a mode's
    rounds after it ran out of memory (its own ``out-of-memory`` round,
    ``environment.skipped_after_oom``). A mode absent from every round is not here: it was
    not measured (``RunResult.absent_modes``)."""
    env = environment if isinstance(environment, Mapping) else {}
    end = finished_record(env)
    if isinstance(end, Mapping) and end.get("why") == "planned":  # it ran every planned one
        upto = planned  # (fewer said: a contradiction, read as the rounds it lacks)
    elif isinstance(end, Mapping):  # the run said how many rounds it ran: every one is held
        upto = min(planned, end["rounds"])
    else:  # not said: trailing rounds no mode holds are not counted (a file cut by an
        # earlier ckptbench, a result built by hand, as the tests' synthetic ones)
        upto = min(planned, max((r.round for r in results), default=-1) + 1)
    stop = recorded_stop(results, env)
    if isinstance(stop, Mapping) and (cut := _whole(stop.get("round"))) is not None:
        upto = min(upto, cut - 1)  # the cut round (1-based) and after
    cut_rounds = [r.round for r in results if r.status is Status.INTERRUPTED]
    if cut_rounds:
        upto = min(upto, min(cut_rounds))
    prec = env.get("precision")
    if isinstance(prec, Mapping) and (ran := _whole(prec.get("rounds"))) is not None:
        upto = min(upto, ran)
    skipped = env.get("skipped_after_oom")
    skipped = skipped if isinstance(skipped, Mapping) else {}
    out = []
    for mode in MODES:
        held = {r.round for r in results if r.mode is mode}
        if not held:
            continue
        last = upto
        oom = [r.round for r in results if r.mode is mode and r.status is Status.OUT_OF_MEMORY]
        if oom:
            last = min(last, min(oom) + 1)
        if (first := _whole(skipped.get(mode.value))) is not None:
            last = min(last, first)  # its 1-based first round over the limit: later skipped
        absent = tuple(k + 1 for k in range(max(last, 0)) if k not in held)
        if absent:
            present = len({k for k in held if 0 <= k < planned})
            out.append(MissingRounds(mode, present, planned, absent))
    return tuple(out)
