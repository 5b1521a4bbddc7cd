"""The measured process: ``python -m ckptbench.worker`` runs one (case, mode) and reports JSON.

Protocol: a job document on stdin, ``{"case": {...}, "mode": "normal", "grad_path": str|null}``;
exactly one JSON line on stdout; exit status 0 on success, 1 when the job failed (the JSON
line then has ``"ok": false`` and ``"error"``). Every mode imports the same modules, so the
three processes start from the same footprint and overheads compare like for like.

Per iteration (docs/architecture.md, "Measurement protocol"): ``malloc_trim(0)``, reset
VmHWM through ``/proc/self/clear_refs``, run loss + gradient, read VmHWM. No pandas, rich or
click here.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any

import autograd
import autograd.numpy as anp
import numpy as np

from ckptbench import measure
from ckptbench.checkpoint import binomial_checkpoint
from ckptbench.results import Case, Mode
from ckptbench.workloads import Sizes, load_workload


def _zeros_like(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _zeros_like(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_zeros_like(v) for v in tree)
    return np.zeros_like(tree)


def _flatten(tree: Any) -> np.ndarray:
    if isinstance(tree, dict):
        return np.concatenate([_flatten(tree[k]) for k in sorted(tree)])
    if isinstance(tree, (tuple, list)):
        return np.concatenate([_flatten(v) for v in tree])
    return np.ravel(np.asarray(tree, dtype=np.float64))


def build_gradient(case: Case, mode: Mode):
    """(gradient function of params, step-call counter, checkpointed loop or None)."""
    wl = load_workload(case.model, Sizes(**case.sizes()))
    params, state0, inputs = wl.init(case.steps, np.random.default_rng(case.seed))
    calls = [0]
    step, post, steps = wl.step, wl.post, case.steps

    def counted(p, s, x):
        calls[0] += 1
        return step(p, s, x)

    def unrolled(p):
        state, outs = state0, []
        for i in range(steps):
            state = counted(p, state, inputs[i])
            outs.append(post(p, state))
        # anp.array, not anp.stack: autograd's stack/concatenate vjp is quadratic in the
        # number of pieces (1.4 s extra at 1000 steps here, 16 s at 4000), which would
        # flatter every ratio against normal mode. anp.array's vjp is linear.
        return wl.loss(anp.array(outs))

    loop = None
    if mode is Mode.BASELINE:

        def gradient(p):
            return float(unrolled(p)), _zeros_like(p)

    elif mode is Mode.NORMAL:
        gradient = autograd.value_and_grad(unrolled)
    else:
        loop = binomial_checkpoint(counted, post, steps, case.snaps, case.strategy)
        gradient = autograd.value_and_grad(lambda p: wl.loss(loop(p, state0, inputs)))
    return params, gradient, calls, loop


def _iteration(meter: measure.PeakMeter, gradient, params) -> tuple[dict[str, Any], Any]:
    with meter.measure() as window:
        t0, c0 = time.perf_counter(), time.process_time()
        value = gradient(params)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    r = window.reading
    return {
        "wall_time_s": wall,
        "cpu_time_s": cpu,
        "peak_rss_bytes": r.peak_rss_bytes,
        "start_rss_bytes": r.start_rss_bytes,
    }, value


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job; returns the JSON-able report (raises on failure)."""
    case = Case.from_dict(job["case"])
    mode = Mode(job["mode"])
    params, gradient, calls, loop = build_gradient(case, mode)
    meter = measure.PeakMeter()
    measure.trim_heap()
    rss_anon = measure.read_rss_anon_bytes() if meter.method == "vmhwm" else None
    warm, iters = [], []
    value = None
    for n in range(case.warmup + case.repeats):
        value = None  # drop the previous gradient before measuring the next iteration
        calls[0] = 0
        record, value = _iteration(meter, gradient, params)
        (warm if n < case.warmup else iters).append(record)
    loss, grad = value
    grad_path = job.get("grad_path")
    if grad_path:
        np.save(grad_path, _flatten(grad))
    counters: dict[str, int] = {"step_calls": calls[0]}
    if loop is not None and loop.stats is not None:
        st = loop.stats
        counters.update(
            steps_advanced=st.steps_advanced,
            steps_taped=st.steps_taped,
            post_calls=st.post_calls,
            peak_live_snapshots=st.peak_live_snapshots,
            peak_snapshot_bytes=st.peak_snapshot_bytes,
            state_bytes=st.state_bytes,
        )
    return {
        "ok": True,
        "mode": mode.value,
        "iterations": iters,
        "warmup": warm,
        "peak_method": meter.method,
        "baseline_rss_anon_bytes": rss_anon,
        "counters": counters,
        "loss": float(loss),
        "numpy": measure.numpy_environment(),
    }


def main() -> int:
    try:
        job = json.loads(sys.stdin.read())
        report = run_job(job)
    except Exception as err:  # report every failure as one JSON line; the parent decides
        lines = str(err).strip().splitlines()
        msg = f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"ok": False, "error": msg}), flush=True)
        return 1
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
