"""Measure one workload's step costs for the planner, inside the measured (worker) process.

The planner (:mod:`schedules.optimal.planner`, after Beaumont et al. 2019) needs, per step: the time
of an untaped step, the time of a taped step plus its reverse, and the bytes of a state and
of a kept tape. Everything here is measured on the real workload through the real executor
of the backend that will run the plan (its binding of :mod:`ckptbench.engine.interpreter`, reached
through a framework object of :mod:`ckptbench.backends.modes`), never estimated:

* untaped step: a plain loop of ``step`` calls without a tape (what an ADVANCE runs);
* taped step + reverse: the executor's own ``taped_time_s`` timer over a store-all schedule
  (every step a YOUTURN from its stored state) divided by the steps; on a device that runs
  asynchronously (torch on CUDA) the whole store-all gradient, timed between device
  synchronisations, less its untaped steps and readouts, divided by the steps (the engine's
  host clocks would time launches); the same whole gradient, on any device, for an
  executor beside the engine binding (torch's ``one-call`` records its first sweep on
  autograd's graph, a cost per step its advance timer cannot tell from recomputation: on
  the CPU a plan's prediction ran 17% under its one-call measurement when priced from the
  engine binding, docs/planner.md);
* readout: a loop of ``post`` calls; ``fixed_time_s`` = steps x that (the first sweep's
  readouts, which the schedule cost model does not count);
* each time is the minimum over ``samples`` (other processes only ever add time: on a
  shared 2-core machine one of three samples of the untaped step read 0.35 ms, two 0.74 ms);
* state bytes: the bytes of the state's leaves;
* tape bytes: what the framework counts itself when it can (torch: the distinct storages
  one taped step keeps alive, from autograd's saved-tensor hooks,
  ``ckptbench.backends.torch.tapes``); otherwise the slope of tracemalloc's peak (numpy
  reports its buffers to it, Python counts its own objects) over one gradient whose
  schedule keeps *every* tape (TAPE 0..k-2, then the reverses), between k1 and k2 steps:
  (peak(k2) - peak(k1)) / (k2 - k1). The slope cancels every constant; it includes the few
  bytes per step of the output and its cotangent. The slope of the exact peak RSS (VmHWM
  reset per run, ``ckptbench.measure.peaks``; ``tape_method="vmhwm"``) reads too little
  once a process has freed memory: the allocator reuses its freed pages without a new
  page, so an autograd LSTM's tape at hidden 8 read 29 013 B on a first sample and 3 541
  and 1 451 B on the next two (tracemalloc: 28 101, 26 803, 29 351 B), at hidden 64 x
  batch 8 51 712 B against tracemalloc's 76 041 B; at hidden 256 x batch 16 the two agree
  within 1% and take the same time (2026-11-29, 2-core VM).

No pandas, rich or click: this runs in the worker.
"""

from __future__ import annotations

import statistics
import tracemalloc
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckptbench.backends import registry
from ckptbench.engine import clock
from ckptbench.measure import peaks as measure
from ckptbench.measure.costwork import SAMPLES, TAPE_SAMPLES, TAPE_STEPS, TIME_STEPS, slope_steps
from ckptbench.schedules import STORE_ALL
from ckptbench.schedules.optimal import Costs, plan_optimal

__all__ = ["StepCostReport", "measure_step_costs"]


@dataclass(frozen=True)
class StepCostReport:
    """The measured :class:`Costs` and the raw samples behind them."""

    costs: Costs
    steps: int
    tape_method: str  # "vmhwm", "tracemalloc" or the framework's own ("saved-tensors")
    tape_steps: tuple[int, int]  # (k1, k2) of the tape slope
    forward_samples_s: tuple[float, ...]  # per-step time of each sample
    taped_samples_s: tuple[float, ...]
    post_samples_s: tuple[float, ...]
    tape_samples_bytes: tuple[int, ...]
    timing: str = "host"  # "device-synchronized": every timed region ends with the device
    executor: str = "engine"  # the executor the taped step was timed through
    taped_method: str = "phase-timer"  # or "whole-gradient" (less its untaped steps)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able; ``costs`` is :meth:`Costs.as_dict` (``Costs.from_dict`` reads it)."""
        return {
            "costs": self.costs.as_dict(),
            "steps": self.steps,
            "tape_method": self.tape_method,
            "tape_steps": list(self.tape_steps),
            "forward_samples_s": list(self.forward_samples_s),
            "taped_samples_s": list(self.taped_samples_s),
            "post_samples_s": list(self.post_samples_s),
            "tape_samples_bytes": list(self.tape_samples_bytes),
            "timing": self.timing,
            "executor": self.executor,
            "taped_method": self.taped_method,
        }


def _tape_all_plan(k: int):
    """A plan over k steps that keeps every tape (unit costs: any advance would cost more)."""
    unit = Costs(forward_time_s=1.0, taped_time_s=1.0, state_bytes=1, tape_bytes=1)
    plan = plan_optimal(unit, k, k)
    if plan.prediction.advances or plan.prediction.peak_tapes != k - 1:  # pragma: no cover
        raise RuntimeError(f"the tape-all plan over {k} steps is not tape-all: {plan}")
    return plan


def measure_step_costs(
    workload: Any,
    params: Any,
    state0: Any,
    inputs: Any,
    *,
    samples: int = SAMPLES,
    tape_steps: tuple[int, int] | None = None,
    tape_method: str | None = None,
    framework: Any = None,
    device_sync: Any = None,
    executor: str | None = None,
) -> StepCostReport:
    """Measure the step costs of ``workload`` on these arguments (see the module docstring).

    ``inputs`` has one row per step of the chain the costs are for (its length sets
    ``fixed_time_s``). ``tape_steps`` = (k1, k2) defaults to ``costwork.TAPE_STEPS``, (16,
    112), shrunk to fit (``costwork.slope_steps``; ``costwork.step_units`` counts this work).
    ``tape_method`` forces "vmhwm" or "tracemalloc" (default: the framework's own count
    where it has one, else tracemalloc). ``framework`` is the backend's framework
    object (default: autograd's, ``ckptbench.backends.autograd.framework``). ``device_sync``
    (torch on CUDA: ``torch.cuda.synchronize``) makes every time the device's: each timed region
    starts and ends with it, and the taped step comes from the whole store-all gradient so
    timed (less its first sweep's untaped steps and readouts), never from the engine's host
    clocks around asynchronous launches. ``executor``: an executor beside the framework's
    engine binding that runs the plan (torch: ``"one-call"``,
    :func:`ckptbench.backends.modes.binding_executor`; None: the binding); its taped step
    comes from whole store-all gradients through it, as on a device.
    """
    fw = (
        registry.get_backend(registry.DEFAULT_BACKEND).framework if framework is None else framework
    )
    steps = int(np.shape(inputs)[0])
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if steps < 1:
        raise ValueError("measuring step costs needs at least 1 step of inputs")
    if steps == 1:  # a one-step chain: its step measured twice (the tape is a difference)
        inputs = inputs[[0, 0]]
    method, own = _tape_method(fw, workload, params, state0, inputs, tape_method)
    k1, k2 = slope_steps(steps, tape_steps if tape_steps is not None else TAPE_STEPS)
    if k2 <= k1:
        raise ValueError(f"tape_steps must satisfy k1 < k2 <= steps, got ({k1}, {k2})")
    k_time = min(max(steps, 2), TIME_STEPS)
    kw = {} if executor is None else {"executor": executor}
    whole = device_sync is not None or bool(kw)
    times = _time_samples(
        fw, workload, params, state0, inputs[:k_time], samples, device_sync, whole, kw
    )
    tapes = []
    for _ in range(max(1, min(samples, TAPE_SAMPLES))):
        if own is not None:
            tapes.append(own)
            continue
        peaks = [_tape_all_peak(fw, workload, params, state0, inputs[:k], method) for k in (k1, k2)]
        tapes.append(max(0, round((peaks[1] - peaks[0]) / (k2 - k1))))

    costs = Costs(
        forward_time_s=min(times.forward),
        taped_time_s=min(times.taped),
        state_bytes=fw.state_nbytes(state0),
        tape_bytes=int(statistics.median(tapes)),
        fixed_time_s=steps * min(times.post),
    )
    return StepCostReport(
        costs=costs,
        steps=steps,
        tape_method=method,
        tape_steps=(k1, k2),
        forward_samples_s=times.forward,
        taped_samples_s=times.taped,
        post_samples_s=times.post,
        tape_samples_bytes=tuple(tapes),
        timing="host" if device_sync is None else "device-synchronized",
        executor=kw.get("executor", "engine"),
        taped_method="whole-gradient" if whole else "phase-timer",
    )


def _tape_method(fw, workload, params, state0, inputs, forced: str | None):
    """(how a tape's bytes are measured, the framework's own count of them or None): the
    ``forced`` method, else the framework's own count where it has one, else tracemalloc
    (the module docstring says why not VmHWM)."""
    if forced is not None and forced not in ("vmhwm", "tracemalloc"):
        raise ValueError(f"tape_method must be vmhwm or tracemalloc, got {forced!r}")
    if forced is not None:
        return forced, None
    own = fw.tape_nbytes(workload.step, workload.post, params, state0, inputs[0])
    if own is not None:
        return fw.tape_method, own
    return "tracemalloc", None


@dataclass(frozen=True)
class _Timings:
    """Per-step times (s) of each sample: an untaped step, a taped step and its reverse, a
    readout."""

    forward: tuple[float, ...]
    taped: tuple[float, ...]
    post: tuple[float, ...]


def _time_samples(
    fw, workload, params, state0, inputs, samples: int, device_sync, whole: bool, kw: dict
) -> _Timings:
    """Time ``samples`` times, over the steps of ``inputs``: an untaped loop of steps, a
    loop of readouts, and the taped steps with their reverses (the executor's own timer;
    ``whole``: the whole store-all gradient through the executor ``kw`` names, synchronised
    with ``device_sync`` where given, less its untaped steps and readouts, never below the
    untaped steps' time)."""
    f, post = workload.step, workload.post
    k_time = int(np.shape(inputs)[0])
    sync = device_sync if device_sync is not None else _no_sync
    fwd, tap, pst = [], [], []
    for _ in range(samples):
        state = state0
        with fw.untaped():
            sync()
            t0 = clock.perf_counter()
            for i in range(k_time):
                state = f(params, state, inputs[i])
            sync()
            fwd.append((clock.perf_counter() - t0) / k_time)
            t0 = clock.perf_counter()
            for _ in range(k_time):
                post(params, state)
            sync()
            pst.append((clock.perf_counter() - t0) / k_time)
        if not whole:
            taped = _store_all_taped_time(fw, workload, params, state0, inputs)
        else:
            untaped = (k_time - 1) * (fwd[-1] + pst[-1])
            total = _store_all_synced_time(fw, workload, params, state0, inputs, sync, kw)
            taped = max(total - untaped, k_time * fwd[-1])  # noise floor: never below a step
        tap.append(taped / k_time)
    return _Timings(tuple(fwd), tuple(tap), tuple(pst))


def _no_sync() -> None:
    return None


def _store_all_synced_time(fw, workload, params, state0, inputs, sync, kw: dict) -> float:
    """One whole store-all gradient through the executor ``kw`` names, timed from a
    synchronised device to a synchronised device (its first call, which may allocate, is
    not timed)."""
    k = int(np.shape(inputs)[0])
    loop = fw.checkpoint(workload.step, workload.post, k, k, STORE_ALL, **kw)
    grad = fw.value_and_grad(lambda p: workload.loss(loop(p, state0, inputs)), None)
    grad(params)
    sync()
    t0 = clock.perf_counter()
    grad(params)
    sync()
    return clock.perf_counter() - t0


def _store_all_taped_time(fw, workload, params, state0, inputs) -> float:
    """The executor's taped-phase time of one gradient that turns every step from a snapshot."""
    k = int(np.shape(inputs)[0])
    loop = fw.checkpoint(workload.step, workload.post, k, k, STORE_ALL)
    fw.value_and_grad(lambda p: workload.loss(loop(p, state0, inputs)), None)(params)
    return loop.stats.taped_time_s


def _tape_all_peak(fw, workload, params, state0, inputs, method: str) -> int:
    k = int(np.shape(inputs)[0])
    loop = fw.checkpoint(workload.step, workload.post, k, plan=_tape_all_plan(k))
    grad = fw.value_and_grad(lambda p: workload.loss(loop(p, state0, inputs)), None)
    if method == "vmhwm":
        meter = measure.PeakMeter(method="vmhwm")
        with meter.measure() as window:
            grad(params)
        return window.reading.peak_rss_bytes
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        grad(params)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
