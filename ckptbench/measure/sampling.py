"""How often the parent samples a worker's RSS (``--sample-interval``, a config's
``sample_interval_s``): the interval's bounds and the one-line reason an interval outside
them is refused, said before anything runs (``run``, ``sweep``). The sampler itself is
``measure.peaks.RssSampler``, started by ``measure.launch``."""

from __future__ import annotations

__all__ = ["MAX_SAMPLE_INTERVAL_S", "MIN_SAMPLE_INTERVAL_S", "sample_interval_problem"]

#: The longest ``--sample-interval``: the sampler takes one sample as the worker starts and
#: one per interval after, and a mode lasts seconds to minutes, so a longer interval leaves
#: the RSS timeline and the sampled max a sample or two (``5m`` typed for ``5ms``). mprof
#: samples every 0.1 s by default, every second for long jobs.
MAX_SAMPLE_INTERVAL_S = 10.0
#: The shortest. One sample (psutil's ``memory_info``, a read of ``/proc/PID/statm``) takes
#: 8-9 us of CPU, and each wait's wake-up adds more: on a 2-core VM (2026-11-30) the
#: sampling thread used 4% of a core at 5 ms, 8% at 1 ms (a sample every 1.18 ms), 12% at
#: 0.5 ms, 27% at 0.1 ms (every 0.23 ms) and 43% at 100 ns, where it never waits and samples
#: every 0.11 ms at most. That CPU is taken beside the worker being measured (and holds the
#: parent's GIL), while the timeline keeps 2000 points of a mode at most and the exact peak
#: is read in the worker: below 1 ms the sampler perturbs more than it can add.
MIN_SAMPLE_INTERVAL_S = 0.001


def sample_interval_problem(interval_s: float, timeout_s: float | None) -> str | None:
    """Why ``interval_s`` cannot sample a mode (below :data:`MIN_SAMPLE_INTERVAL_S`, above
    :data:`MAX_SAMPLE_INTERVAL_S`, or not below ``timeout_s``: no sample after the first
    within a mode), or None. The exact peak and the memory limit are read in the worker
    whatever the interval."""
    given = f"--sample-interval {interval_s:g} s"
    if interval_s < MIN_SAMPLE_INTERVAL_S:
        why = (f"{given} is below the shortest it takes, 1 ms: one RSS sample costs about "
               "10 us of CPU, so sampling faster would keep a core busy (27% at 0.1 ms) beside "
               "the worker it measures")  # fmt: skip
    elif interval_s > MAX_SAMPLE_INTERVAL_S:
        why = (f"{given} is above the longest it takes, {MAX_SAMPLE_INTERVAL_S:g} s: a "
               "mode lasts seconds to minutes, so its RSS timeline and sampled max would hold "
               "a sample or two")  # fmt: skip
    elif timeout_s is not None and interval_s >= timeout_s:
        why = (f"{given} is not below --timeout {timeout_s:g} s: no sample after the worker's "
               "first would fall within a mode")  # fmt: skip
    else:
        return None
    return f"{why} (default 5ms; the exact peak is read in the worker whatever the interval)"
