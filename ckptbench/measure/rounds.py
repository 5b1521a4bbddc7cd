"""How many rounds a run measures: exactly the planned ones, or, with ``--precision``
(:class:`Precision`), more until the slowdown's interval is narrow enough, within a
round count and a time cap (:func:`next_round`; docs/architecture.md, "Noise and
rounds"). A round is one invocation of every mode in fresh workers: the repetition level
Kalibera and Jones ("Rigorous Benchmarking in Reasonable Time", ISMM 2013) show dominates
the variance, so precision is bought with rounds, not with iterations inside one."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ckptbench.analysis.summary import round_estimates
from ckptbench.results.schema import ModeResult

__all__ = ["Precision", "next_round"]


@dataclass(frozen=True)
class Precision:
    """``--precision``: add rounds until the slowdown's half-width (relative) is at most
    ``target_rel``, but no more than ``max_rounds`` in all and no new round after
    ``max_time_s`` seconds of measuring. ``min_rounds`` always run, however long they take
    (one round's interval sees no process-to-process variation)."""

    min_rounds: ClassVar[int] = 2
    target_rel: float
    max_rounds: int = 30
    max_time_s: float = 1800.0

    def __post_init__(self) -> None:
        if not 0 < self.target_rel < 1:
            raise ValueError(f"precision must be a fraction such as 3%, got {self.target_rel}")
        if self.max_rounds < self.min_rounds:
            raise ValueError(
                f"max rounds must be at least {self.min_rounds}, got {self.max_rounds}"
            )
        if not 0 < self.max_time_s < math.inf:
            raise ValueError(f"max time must be a positive duration, got {self.max_time_s}")


def next_round(
    precision: Precision | None,
    results: Sequence[ModeResult],
    done: int,
    planned: int,
    round_starts: Sequence[float],
    env: dict[str, Any],
) -> bool:
    """After ``done`` rounds (of ``planned`` at least): start another one?

    Without ``precision``: exactly ``planned`` rounds. With it: at least two (one round's
    interval sees no process-to-process variation), the planned ones unless the next round
    would end after ``max_time_s`` (predicted from the mean round so far), then more until
    the slowdown's interval is within the target, at most ``max_rounds`` and never a round
    predicted to end after ``max_time_s``. Records the outcome in ``env["precision"]``
    (target, half-width, rounds, why it stopped)."""
    if precision is None:
        return done < planned
    est = round_estimates(results).get("slowdown")
    half = est.half_width_rel if est is not None else None
    elapsed = time.monotonic() - round_starts[0] if round_starts else 0.0
    mean_round = elapsed / done if done else 0.0
    over_time = done >= precision.min_rounds and elapsed + mean_round > precision.max_time_s
    if done < precision.min_rounds:
        stopped = ""
    elif over_time:
        stopped = "max-time"
    elif done < planned:
        stopped = ""
    elif half is None:
        stopped = "no-slowdown"  # normal or checkpointed not OK in a round: rounds won't help
    elif half <= precision.target_rel:
        stopped = "reached"
    elif done >= precision.max_rounds:
        stopped = "max-rounds"
    else:
        stopped = ""
    env["precision"] = {
        "target_rel": precision.target_rel,
        "half_width_rel": half,
        "rounds": done,
        "rounds_planned": planned,
        "max_rounds": precision.max_rounds,
        "max_time_s": precision.max_time_s,
        "elapsed_s": round(elapsed, 3),
        "stopped": stopped or "running",
    }
    return not stopped
