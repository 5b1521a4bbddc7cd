"""The planner's step costs measured on the JAX backend, in a fresh worker process.

What ``ckptbench plan --backend jax`` and strategy ``optimal`` on JAX plan with
(:mod:`schedules.optimal.planner`, after Beaumont et al., 2019), measured on the compiled code that
will run the plan, each time the minimum over ``samples`` runs after a compiling one:

* untaped step: a jitted ``lax.scan`` of ``step`` alone, divided by the steps;
* readout: the same scan with ``post`` minus the scan without, divided by the steps;
  ``fixed_time_s`` = steps x that (the first sweep's readouts);
* taped step + reverse: the gradient of the executor the case runs (``--executor``: the
  compiled table, or the engine dispatching compiled pieces) under the store-all schedule
  (steps - 1 advances with readouts, then every step a turn from its stored state) minus
  the scan with readouts, divided by the steps; every time is taken after
  ``block_until_ready``, so it is the device's time, never a launch's;
* with the engine executor's fused windows (its default on an accelerator) the taped
  step + reverse is the plain gradient's (``jax.grad`` of the scan with readouts) less
  its readouts: a window runs a plan's advances as scans and each run of kept
  tapes as the vjp of one scan (:func:`ckptbench.backends.jax.fusion.tape_runs`), as the
  plain gradient does; store-all's one-step segments would each be a call (on an H200
  that charge predicted 0.217 s for a plan measured at 0.102 s). ``taped_method`` says
  which;
* on a GPU the compiled executor's loops read their trip counts back to the host once per
  iteration, a cost per table row that store-all's 1 000 rows fold into the taped step:
  a 24 MiB plan (fewer rows) for the 1000-step LSTM on an H100 was predicted at 0.20 s
  and measured at 0.10 s, so plans there are ranked by a pessimistic model;
* state bytes: the state's leaves; tape bytes: the bytes a kept tape stores, from the
  shapes of the step's ``jax.vjp`` residuals that depend on the state or input (exact,
  :class:`ckptbench.backends.jax.binding.TapeLayout`).

A layer chain's costs are per layer (:mod:`ckptbench.backends.jax.layercosts`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ckptbench.backends.jax import SPEC
from ckptbench.backends.jax.binding import COUNTERS, compiled_checkpoint, tape_layout
from ckptbench.backends.jax.device import resolve_device
from ckptbench.backends.jax.table import encode
from ckptbench.backends.jax.workloads import load_jax_workload
from ckptbench.engine import clock
from ckptbench.schedules import store_all_schedule
from ckptbench.schedules.optimal import Costs
from ckptbench.workloads import Sizes
from ckptbench.workloads.chain import is_chain

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["measure_jax_costs"]


def _best(fn: Callable, args: tuple, samples: int) -> float:
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(samples):
        t0 = clock.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(clock.perf_counter() - t0)
    return min(times)


def _best_engine(wl: Any, layout: Any, args: tuple, samples: int) -> float | None:
    """The engine-driven executor's store-all gradient (``--executor engine``), timed the
    way it runs: pieces dispatched asynchronously, the clock stopped when the result is
    ready on the device. ``None`` where the executor fuses windows (an accelerator): there
    store-all's one-step segments would each be a call, which no plan pays."""
    from ckptbench.backends.jax.dispatch import engine_checkpoint

    params, state0, inputs = args
    steps = int(inputs.shape[0])
    loop = engine_checkpoint(wl.step, wl.post, steps, steps, "store-all", layout=layout)
    if loop.span_on(next(iter(inputs.devices())).platform) > 0:
        return None

    def run() -> Any:
        return loop.value_and_grad(wl.loss, params, state0, inputs, inputs_grad=False)

    jax.block_until_ready(run())  # compiles every piece
    times = []
    for _ in range(samples):
        t0 = clock.perf_counter()
        jax.block_until_ready(run())
        times.append(clock.perf_counter() - t0)
    return min(times)


def measure_jax_costs(case: Case, samples: int = SPEC.costs_work.samples) -> dict[str, Any]:
    """The step costs of ``case``'s workload on JAX: ``{"costs": Costs document, ...}``."""
    sizes = Sizes(hidden=case.hidden, batch=case.batch, input=case.input, output=case.output)
    wl = load_jax_workload(case.model, sizes, getattr(case, "dtype", "float64") or "float64")
    if is_chain(wl):  # one value per layer of each cost, on the chain executor's pieces
        from ckptbench.backends.jax.layercosts import measure_jax_layer_costs

        return measure_jax_layer_costs(case, wl)
    steps = case.steps
    # on the case's device: JAX's default device is a GPU wherever one is visible, so
    # uncommitted arrays would measure a --device cpu plan on the GPU
    device = resolve_device(case.device)
    params, state0, inputs = jax.device_put(
        wl.init(steps, np.random.default_rng(case.seed)), device
    )
    step, post = wl.step, wl.post

    def scan(readout: bool) -> Callable:
        def run(p, s0, xs):
            def body(s, x):
                s = step(p, s, x)
                return s, (post(p, s) if readout else None)

            return lax.scan(body, s0, xs)

        return run

    layout = tape_layout(step, post, params, state0, inputs[0])
    args = (params, state0, inputs)
    plain = _best(scan(False), args, samples)
    with_post = _best(scan(True), args, samples)
    executor = getattr(case, "executor_used", "compiled")
    method = "store-all"
    if executor == "engine":
        taped = _best_engine(wl, layout, args, samples)
        if taped is None:  # fused windows: steps run as a scan runs them (plain gradient)
            method = "plain-gradient"

            def plain_grad(p, s0, xs):
                return jax.grad(lambda q: wl.loss(scan(True)(q, s0, xs)[1]))(p)

            # every step taped and reversed, with readouts: the same terms as store-all's
            # turns once the untaped steps (which store-all has, this has not) are added
            taped = _best(plain_grad, args, samples) + plain
    else:
        loop = compiled_checkpoint(step, post, encode(store_all_schedule(steps), steps), layout)

        def store_all(p, s0, xs):
            zero = jnp.zeros(len(COUNTERS), jnp.float64)
            return jax.grad(lambda q: wl.loss(loop(q, s0, xs, zero)))(p)

        taped = _best(store_all, args, samples)
    forward_s = plain / steps
    post_s = max(with_post - plain, 0.0) / steps
    taped_s = max((taped - with_post) / steps, forward_s)  # noise floor: never below a step
    state_bytes = sum(int(a.size) * a.dtype.itemsize for a in jax.tree_util.tree_leaves(state0))
    costs = Costs(
        forward_time_s=forward_s,
        taped_time_s=taped_s,
        state_bytes=state_bytes,
        tape_bytes=layout.tape_bytes,
        fixed_time_s=post_s * steps,
    )
    return {
        "costs": costs.as_dict(),
        "steps": steps,
        "tape_method": "jax-residual-shapes",
        "backend": "jax",
        "executor": executor,
        "taped_method": method,
        "samples": samples,
    }
