"""The modes a case is measured in, the outcome of one mode's measurement, and how a mode's
rounds pool into one result. Imports nothing of ckptbench (the schema and the summary
both build on it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ckptbench.results.schema import ModeResult

__all__ = ["MODES", "Mode", "Status", "complete_rounds", "pool_rounds"]


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
