"""How many iterations a case may record: the one check, before anything is measured, that
its result file can be read back (``store.MAX_RESULT_BYTES``).

A result stores every iteration of every round (warmup included) of each of the three modes,
``rounds x (warmup + repeats)`` records a mode; past :func:`most_iterations` the file
passes the bound every reader reads a result at (about 209 000 at 2 rounds, 154 000 at
10 000), so ``run``, a config and a sweep's grid cells are
refused (one line) instead of measuring for hours and writing a file nobody can read.
The RSS timelines are counted at their bound: the runner thins each round's to
:func:`timeline_points` of the rounds a run may measure (2000 samples a round, the
launcher's own bound, up to 30 rounds; 60 000 over the rounds beyond, and at least 16 a
round, from 3750 rounds on), so they never outgrow a file.
"""

from __future__ import annotations

from ckptbench.results.schema import Case, CaseError
from ckptbench.results.store import MAX_RESULT_BYTES
from ckptbench.results.units import size_text

__all__ = ["ITERATION_BYTES", "check_result_size", "most_iterations", "timeline_points"]

#: Bytes one iteration adds to a result file (``indent=1`` JSON), the three modes together.
#: Measured in a real file (``run --backend autograd --model rnn --steps 20 --rounds 2
#: --repeats 3``): an iteration record of baseline 329 bytes, normal 316 to 326, checkpointed
#: 516 (its four phase times), a warmup record 327; written with 22-character floats,
#: 12-digit byte counts and the device fields set (a GPU's): 357, 357 and 557, rounded up
#: to 1,280 for the summary's figures they lengthen. A file of 2 rounds of 1 + 1000
#: iterations (hidden 8, batch 2) grew 1,212 bytes an iteration.
ITERATION_BYTES = 1280
#: Bytes a round adds besides its iterations and timelines, rounded up: three mode records
#: with neither (about 760 bytes each) and the summary's per-round ratios.
ROUND_BYTES = 4096
#: The case, environment and summary of a result (about 8 KiB), rounded up.
HEADER_BYTES = 64 * 1024
#: A round's RSS timeline keeps at most this many samples a mode (the launcher's
#: ``measure.launch.TIMELINE_POINTS``), and a run's rounds together :data:`TIMELINE_SAMPLES`,
#: but never fewer than :data:`TIMELINE_LEAST` a round (the first, the last and the peaks of
#: 14 stretches between).
TIMELINE_MOST = 2000
TIMELINE_SAMPLES = 60_000
TIMELINE_LEAST = 16
#: Bytes one timeline sample takes in the file: ``[seconds, bytes]`` at ``indent=1`` read 52
#: in the file measured; 64 with a 22-character time and a 12-digit RSS.
TIMELINE_SAMPLE_BYTES = 64


def timeline_points(rounds: int) -> int:
    """The samples each round's RSS timeline keeps of a run of up to ``rounds`` rounds (``run
    --precision``: its --max-rounds): 2000 up to 30 rounds, fewer beyond, at least 16."""
    return max(TIMELINE_LEAST, min(TIMELINE_MOST, TIMELINE_SAMPLES // max(rounds, 1)))


def most_iterations(rounds: int) -> int:
    """The most ``rounds x (warmup + repeats)`` that ``rounds`` rounds record within the
    bound: what is left of it once the header and the rounds' own records and timelines
    are counted."""
    per_round = ROUND_BYTES + 3 * timeline_points(rounds) * TIMELINE_SAMPLE_BYTES
    return (MAX_RESULT_BYTES - HEADER_BYTES - rounds * per_round) // ITERATION_BYTES


def check_result_size(case: Case, rounds: int | None = None, said: str = "rounds") -> None:
    """CaseError (one line naming the product and the bound) unless ``rounds`` (default:
    the case's; ``run --precision``: the most it may add up to, ``said`` --max-rounds)
    rounds of ``warmup + repeats`` iterations fit a result file that can be read back."""
    rounds = case.rounds if rounds is None else rounds
    per_round = case.warmup + case.repeats
    if rounds * per_round <= (most := most_iterations(rounds)):
        return
    raise CaseError(
        f"{said} x (warmup + repeats) = {rounds:,} x {per_round:,} = {rounds * per_round:,} "
        f"iterations a mode, more than the {most:,} that fit in the "
        f"{size_text(MAX_RESULT_BYTES)} a result file is read back at ({ITERATION_BYTES:,} "
        "bytes an iteration of the three modes): fewer rounds, repeats or warmup"
    )
