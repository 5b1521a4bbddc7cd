"""How much the planner's step-cost measurement computes, known before it runs: the
measuring code's constants (:mod:`ckptbench.measure.stepcosts`,
:mod:`ckptbench.measure.layercosts` and JAX's ``backends.jax.costs`` read them here) and
the untaped step evaluations they add up to, the unit of ``sweep.progress.cell_cost``, so
an estimate prices them as it prices a cell's iterations (``sweep.progress.costs_seconds``).

What a backend's measurement does differently is its spec's :class:`CostsWork`. Readouts (a
fraction of a step on the built-ins) are not counted, as ``cell_cost`` does not count them.
Pure Python: imported by the command line before anything is measured, and by the worker.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "MAX_REPEATS",
    "SAMPLES",
    "SAMPLE_S",
    "SLOPE_BYTES",
    "TAPED_UNITS",
    "TAPE_SAMPLES",
    "TAPE_STEPS",
    "TIME_STEPS",
    "TRACEMALLOC_TAPES",
    "CostsWork",
    "costs_units",
    "layer_units",
    "slope_steps",
    "step_units",
]

#: Samples of every timed quantity (the minimum is kept): a recurrence's and a chain's.
SAMPLES = 5
#: A recurrence's step times are taken over at most this many steps of its inputs.
TIME_STEPS = 200
#: (k1, k2): the tape slope of a recurrence between tape-all gradients of k1 and k2 steps.
TAPE_STEPS = (16, 112)
#: At most this many tape slopes (their median is kept), fewer when ``samples`` is less.
TAPE_SAMPLES = 3
#: A timed sample of a chain's layer repeats a fast layer until it takes about this long.
SAMPLE_S = 1e-3
#: At most this many repetitions of a layer in one timed sample.
MAX_REPEATS = 64
#: A layer's tape slope keeps up to about this many bytes of tapes at once (k2 tapes).
SLOPE_BYTES = 16 * 2**20
#: At most this many tapes in a tracemalloc slope: it counts bytes, not pages, so a few
#: tapes give the slope (on the built-in stacks 4, 8, 16 and 64 tapes agree within about
#: 2%), and tracing every allocation of 64 tapes made a small stack's costs take 10x longer.
TRACEMALLOC_TAPES = 8
#: A taped step and its reverse, in untaped steps (``sweep.progress.cell_cost``: ~3l).
TAPED_UNITS = 3


@dataclass(frozen=True)
class CostsWork:
    """How a backend measures step costs, as far as an estimate made before it needs."""

    #: samples of each timed quantity of a recurrence
    samples: int = SAMPLES
    #: untimed runs of each timed quantity before its samples (JAX: the compiling one)
    warmups: int = 0
    #: a recurrence is timed over every step at once (JAX: an untaped scan, one with
    #: readouts, the store-all gradient), not over at most :data:`TIME_STEPS` steps
    whole_chain: bool = False
    #: the framework counts a tape's bytes itself (torch, JAX): no peak slopes over
    #: tape-all gradients
    counts_tapes: bool = False
    #: what no estimate knows before the measurement runs, said beside it (JAX: "its
    #: compilations"); empty: nothing
    unknown: str = ""


def slope_steps(steps: int, tape_steps: tuple[int, int] = TAPE_STEPS) -> tuple[int, int]:
    """(k1, k2) of a recurrence's tape slope over ``steps`` steps of inputs:
    ``tape_steps`` shrunk to fit (``stepcosts.measure_step_costs``)."""
    k1, k2 = tape_steps
    k2 = min(k2, max(steps, 2))
    return max(1, min(k1, k2 // 4)), k2


def _store_all(k: int) -> int:
    """A store-all gradient over ``k`` steps: k - 1 advances, then every step taped and
    reversed."""
    return (k - 1) + TAPED_UNITS * k


def step_units(work: CostsWork, steps: int, *, whole_gradient: bool = False) -> int:
    """Untaped step evaluations of a recurrence's step costs over ``steps`` steps.

    Each sample: an untaped loop of the timed steps and one store-all gradient over them
    (two where ``whole_gradient``: an asynchronous device or an executor beside the
    engine binding, whose first, untimed call may allocate); then, unless the framework
    counts tapes, up to :data:`TAPE_SAMPLES` slopes of two tape-all gradients (k1 and k2
    steps), else one taped step. ``work.whole_chain`` (JAX): every step at once, an
    untaped scan, one with readouts and the store-all gradient, each ``warmups +
    samples`` times."""
    if work.whole_chain:
        runs = work.warmups + work.samples
        timed = runs * (2 * steps + _store_all(steps))
    else:
        k = min(max(steps, 2), TIME_STEPS)
        gradients = (2 if whole_gradient else 1) * _store_all(k)
        timed = (work.warmups + work.samples) * (k + gradients)
    if work.counts_tapes:
        return timed + TAPED_UNITS
    k1, k2 = slope_steps(steps)
    return timed + min(work.samples, TAPE_SAMPLES) * TAPED_UNITS * (k1 + k2)


def layer_units(work: CostsWork, layers: int, step_s: float) -> int:
    """Untaped layer evaluations of a chain's per-layer costs (``layercosts``, on every
    backend), a layer taking about ``step_s``: one untaped pass for the layers' inputs;
    per layer its untaped and its taped-and-reversed call, each once then
    :data:`SAMPLES` samples of as many repetitions as make :data:`SAMPLE_S` (at most
    :data:`MAX_REPEATS`), and its tape's bytes (counted: one taped call; else up to
    :data:`TAPE_SAMPLES` slopes of 1 and at most :data:`TRACEMALLOC_TAPES` kept tapes)."""
    reps = max(1, min(MAX_REPEATS, math.ceil(SAMPLE_S / max(step_s, 1e-9))))
    calls = 1 + SAMPLES * reps
    tapes = 1 if work.counts_tapes else TAPE_SAMPLES * (1 + TRACEMALLOC_TAPES)
    return layers + layers * (calls + TAPED_UNITS * calls + tapes)


def costs_units(
    work: CostsWork, steps: int, *, chain: bool, step_s: float, whole_gradient: bool = False
) -> int:
    """The step-cost measurement's untaped step evaluations: a chain's per layer
    (:func:`layer_units`), a recurrence's (:func:`step_units`)."""
    if chain:
        return layer_units(work, steps, step_s)
    return step_units(work, steps, whole_gradient=whole_gradient)
