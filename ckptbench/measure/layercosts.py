"""Measure a layer chain's per-layer costs for the planner, inside the measured (worker) process.

A chain (:mod:`ckptbench.workloads.chain`) has one step per layer and its layers differ, so
the planner (:mod:`ckptbench.schedules.optimal`) gets one value per layer of each of its four
costs (:class:`Costs` with per-step tuples). As for a recurrence's step costs
(:mod:`ckptbench.measure.stepcosts`), everything is measured on the real chain through the
real executor of the backend that will run the plan, never estimated:

* untaped layer ``i``: ``layer(i, params[i], x_i)`` without a tape (what an ADVANCE runs),
  from the real input x_i (one untaped forward pass computes every x_i first);
* taped layer ``i`` plus its reverse: the chain executor's own operations
  (``chain_ops`` of the backend's chain binding: ``tape(x_i, i)`` then ``reverse(tape,
  x_bar, i)``, which accumulates the layer's parameter cotangents as a reverse sweep does),
  with a cotangent shaped like x_{i+1};
* each time is the minimum over ``samples`` (other processes only ever add time); a layer
  faster than about a millisecond is repeated within a sample and the sample divided; on
  an asynchronous device (torch on CUDA) ``device_sync`` brackets every timed region;
* ``fixed_time_s``: the loss of x_L (no schedule changes it);
* state bytes ``x_i``: the bytes of the layer's input, exact from its shape and dtype;
* tape bytes: what the framework counts itself when it can (torch: the distinct storages
  one taped layer keeps alive, ``ckptbench.backends.torch.tapes.layer_tape_nbytes``);
  otherwise, as for a recurrence, a peak-memory slope (tracemalloc's, which counts bytes;
  VmHWM's with ``tape_method="vmhwm"``, ``ckptbench.measure.peaks``, which reads too little
  once freed pages are reused: :func:`_peak_method`): k1 = 1 and k2 tapes of layer
  ``i`` kept at once (k2 up to 64 under VmHWM, up to 8 under tracemalloc; each tape from
  its own copy of x_i, so it counts its input as the executor's does),
  ``(peak(k2) - peak(k1)) / (k2 - k1)`` less the bytes of the kept outputs x_{i+1} (the
  next state pays for those), the median of up to three.

No pandas, rich or click: this runs in the worker.
"""

from __future__ import annotations

import math
import statistics
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ckptbench.engine import clock
from ckptbench.measure import peaks
from ckptbench.measure.costwork import (  # the constants an estimate counts (costwork.layer_units)
    MAX_REPEATS,
    SAMPLE_S,
    SAMPLES,
    SLOPE_BYTES,
    TAPE_SAMPLES,
    TRACEMALLOC_TAPES,
)
from ckptbench.schedules.optimal import Costs

__all__ = ["LayerCostReport", "measure_layer_costs"]


@dataclass(frozen=True)
class LayerCostReport:
    """The measured per-layer :class:`Costs`, the layers' names and the raw samples."""

    costs: Costs
    layers: tuple[str, ...]
    #: "vmhwm", "tracemalloc", both ("vmhwm+tracemalloc": some layers each) or the
    #: framework's own ("saved-tensors")
    tape_method: str
    forward_samples_s: tuple[tuple[float, ...], ...]  # per layer, each sample's time
    taped_samples_s: tuple[tuple[float, ...], ...]
    tape_samples_bytes: tuple[tuple[int, ...], ...]
    timing: str = "host"  # "device-synchronized": every timed region ends with the device

    def as_dict(self) -> dict[str, Any]:
        """JSON-able; ``costs`` is :meth:`Costs.as_dict` (the costs file format, per-step
        lists), ``layers`` the names of the layers in order."""
        return {
            "costs": self.costs.as_dict(),
            "steps": len(self.layers),
            "layers": list(self.layers),
            "tape_method": self.tape_method,
            "forward_samples_s": [list(s) for s in self.forward_samples_s],
            "taped_samples_s": [list(s) for s in self.taped_samples_s],
            "tape_samples_bytes": [list(s) for s in self.tape_samples_bytes],
            "timing": self.timing,
        }


def _no_sync() -> None:
    return None


def _sample_times(fn: Callable[[], Any], samples: int, sync: Callable[[], None]) -> list[float]:
    """Each sample's time of one ``fn()`` (the first call, which may allocate, is a warm-up
    that also sets how often a sample repeats ``fn``)."""
    sync()
    t0 = clock.perf_counter()
    fn()
    sync()
    first = clock.perf_counter() - t0
    reps = max(1, min(MAX_REPEATS, math.ceil(SAMPLE_S / max(first, 1e-9))))
    times = []
    for _ in range(samples):
        sync()
        t0 = clock.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        times.append((clock.perf_counter() - t0) / reps)
    return times


def _peak_of(fn: Callable[[], Any], method: str) -> int:
    """The peak memory while ``fn()`` runs (VmHWM reset first, or tracemalloc's peak)."""
    if method == "vmhwm":
        meter = peaks.PeakMeter(method="vmhwm")
        with meter.measure() as window:
            fn()
        return window.reading.peak_rss_bytes
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _slope_tape_bytes(fw, ops, i: int, x: Any, out_bytes: int, method: str) -> int:
    """Bytes of one kept tape of layer ``i``: the slope of the peak over k kept tapes."""
    k1, k2 = 1, _slope_tapes(fw.state_nbytes(x) + out_bytes)
    if method == "tracemalloc":
        k2 = min(k2, TRACEMALLOC_TAPES)

    def keep(k: int) -> Callable[[], None]:
        def run() -> None:
            kept = []
            with fw.untaped():
                copies = [x * 1 for _ in range(k)]
            for c in copies:
                kept.append(ops.tape(c, i, False))
            del copies, kept

        return run

    p1, p2 = (_peak_of(keep(k), method) for k in (k1, k2))
    return max(0, round((p2 - p1) / (k2 - k1)) - out_bytes)


def _slope_tapes(guess: int) -> int:
    """k2: enough tapes of at least ``guess`` bytes to hold about :data:`SLOPE_BYTES`."""
    return max(4, min(64, SLOPE_BYTES // max(1, guess)))


def _peak_method(forced: str | None) -> str:
    """``forced``, else tracemalloc. VmHWM's slope reads too little once the process has
    freed memory, which the allocator reuses without a new page: 9 tapes of a 2 x 64 dense
    layer read 0 B, and on mlp-stack (hidden 256, batch 32) and cnn-stack (hidden 16,
    batch 4) every layer's tape read 5-37 KB under tracemalloc's (2026-11-29), the Python
    objects and small buffers of the tape; tracemalloc was also the faster of the two."""
    return "tracemalloc" if forced is None else forced


def measure_layer_costs(
    chain: Any,
    params: list,
    x0: Any,
    *,
    framework: Any,
    names: tuple[str, ...] | None = None,
    samples: int = SAMPLES,
    tape_method: str | None = None,
    device_sync: Callable[[], None] | None = None,
) -> LayerCostReport:
    """Measure the per-layer costs of ``chain`` at ``params`` (one tree per layer) and
    ``x0`` on ``framework`` (the backend's framework object: its ``chain_ops``,
    ``untaped``, ``state_nbytes`` and ``layer_tape_nbytes``); see the module docstring.
    ``tape_method`` forces "vmhwm" or "tracemalloc" (default: the framework's own count
    where it has one). ``names`` default to ``layer0``, ``layer1``, ..."""
    fw, layers = framework, len(params)
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if layers < 1:
        raise ValueError("measuring layer costs needs at least 1 layer")
    if tape_method is not None and tape_method not in ("vmhwm", "tracemalloc"):
        raise ValueError(f"tape_method must be vmhwm or tracemalloc, got {tape_method!r}")
    names = tuple(names) if names is not None else tuple(f"layer{i}" for i in range(layers))
    if len(names) != layers:
        raise ValueError(f"{len(names)} layer names for {layers} layers")
    sync = device_sync if device_sync is not None else _no_sync
    with fw.untaped():
        xs = [x0]
        for i in range(layers):
            xs.append(chain.layer(i, params[i], xs[-1]))
    sizes = [fw.state_nbytes(x) for x in xs]
    ops = fw.chain_ops(chain.layer, layers, params)
    fwd, tap, tapes, methods = [], [], [], []
    for i in range(layers):
        fwd.append(_forward_samples(fw, chain, i, params[i], xs[i], samples, sync))
        tap.append(_taped_samples(ops, i, xs, samples, sync))
        counted, method = _tape_samples(fw, ops, chain, i, params, xs, sizes, samples, tape_method)
        tapes.append(counted)
        methods.append(method)
    with fw.untaped():
        loss = _sample_times(lambda: chain.loss(xs[-1]), samples, sync)
    costs = Costs(
        forward_time_s=tuple(min(s) for s in fwd),
        taped_time_s=tuple(max(min(t), min(f)) for t, f in zip(tap, fwd, strict=True)),
        state_bytes=tuple(sizes[:-1]),
        tape_bytes=tuple(int(statistics.median(t)) for t in tapes),
        fixed_time_s=min(loss),
    )
    return LayerCostReport(
        costs=costs,
        layers=names,
        tape_method="+".join(dict.fromkeys(methods)),
        forward_samples_s=tuple(tuple(s) for s in fwd),
        taped_samples_s=tuple(tuple(s) for s in tap),
        tape_samples_bytes=tuple(tuple(t) for t in tapes),
        timing="host" if device_sync is None else "device-synchronized",
    )


def _forward_samples(fw, chain, i: int, p: Any, x: Any, samples: int, sync) -> list[float]:
    with fw.untaped():
        return _sample_times(lambda: chain.layer(i, p, x), samples, sync)


def _taped_samples(ops, i: int, xs: list, samples: int, sync) -> list[float]:
    """Layer ``i`` taped by the executor's own operation, then reversed from a cotangent
    shaped like its output (x_{i+1} itself)."""
    return _sample_times(lambda: ops.reverse(ops.tape(xs[i], i, False)[0], xs[i + 1], i),
                         samples, sync)  # fmt: skip


def _tape_samples(fw, ops, chain, i, params, xs, sizes, samples, forced) -> tuple[list, str]:
    """Layer ``i``'s tape bytes and how they were measured: the framework's count (once: it
    is exact), else up to three peak slopes (their median is taken)."""
    own = None if forced is not None else fw.layer_tape_nbytes(chain.layer, i, params[i], xs[i])
    if own is not None:
        return [int(own)], fw.tape_method
    method = _peak_method(forced)
    slopes = [
        _slope_tape_bytes(fw, ops, i, xs[i], sizes[i + 1], method)
        for _ in range(max(1, min(samples, TAPE_SAMPLES)))
    ]
    return slopes, method
