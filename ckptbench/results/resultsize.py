"""How many iterations a case may record: the one check, before anything is measured, that
its result file can be read back (``store.MAX_RESULT_BYTES``).

A result stores every iteration of every round (warmup included) of each of the three modes,
``rounds x (warmup + repeats)`` records a mode; past :func:`most_iterations` the file
passes the bound every reader reads a result at (about 210 000 at 2 rounds, 178 000 at
10 000), so ``run``, a config and a sweep's grid cells are
refused (one line) instead of measuring for hours and writing a file nobody can read.
The RSS timelines are not counted: each mode's is thinned to at most
``measure.launch.TIMELINE_POINTS`` samples a round, and as long as the mode runs below that.
"""

from __future__ import annotations

from ckptbench.results.schema import Case, CaseError
from ckptbench.results.store import MAX_RESULT_BYTES
from ckptbench.results.units import size_text

__all__ = ["ITERATION_BYTES", "check_result_size", "most_iterations"]

#: Bytes one iteration adds to a result file (``indent=1`` JSON), the three modes together.
#: Measured in a real file (``run --backend autograd --model rnn --steps 20 --rounds 2
#: --repeats 3``): an iteration record of baseline 329 bytes, normal 316 to 326, checkpointed
#: 516 (its four phase times), a warmup record 327; written with 22-character floats,
#: 12-digit byte counts and the device fields set (a GPU's): 357, 357 and 557, rounded up
#: to 1,280 for the summary's figures they lengthen. A file of 2 rounds of 1 + 1000
#: iterations (hidden 8, batch 2) grew 1,212 bytes an iteration.
ITERATION_BYTES = 1280
#: Bytes a round adds besides its iterations, rounded up: three mode records with no
#: iterations (about 760 bytes each) and the summary's per-round ratios. A mode's RSS
#: timeline (at most ``measure.launch.TIMELINE_POINTS`` samples, about 52 bytes each) is
#: as long as the mode runs and is not counted here.
ROUND_BYTES = 4096
#: The case, environment and summary of a result (about 8 KiB), rounded up.
HEADER_BYTES = 64 * 1024


def most_iterations(rounds: int) -> int:
    """The most ``rounds x (warmup + repeats)`` that ``rounds`` rounds record within the
    bound: what is left of it once the header and the rounds' own records are counted."""
    return (MAX_RESULT_BYTES - HEADER_BYTES - rounds * ROUND_BYTES) // ITERATION_BYTES


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
