"""A layer chain's per-layer costs measured on JAX, in the worker, on the case's device.

The same measurement as on autograd and torch (:mod:`ckptbench.measure.layercosts`: each
time the minimum over 5 samples, a fast layer repeated within a sample), run on the
engine-driven chain executor's own compiled pieces (:func:`ckptbench.backends.jax.chain.
chain_ops`), each call ending with ``jax.block_until_ready`` on its results (JAX dispatches
asynchronously, on the CPU too, so the clock stops when the device is done):

* forward: layer ``i``'s compiled untaped piece (what an ADVANCE runs) from the real x_i;
* taped + reverse: its compiled ``tape`` then ``reverse`` from a cotangent shaped like
  x_{i+1}, the parameter cotangent added into its accumulator as in a reverse sweep;
* ``fixed_time_s``: the jitted loss of x_L;
* state bytes: x_i's, from its shape and dtype;
* tape bytes: the distinct device buffers one kept tape holds (x_i and the residuals of the
  layer's ``jax.vjp`` that are not its inputs), less the output's, exact
  (:func:`ckptbench.backends.jax.chain.tape_nbytes`).

The arrays are committed to the case's device (JAX's default device is a GPU wherever one
is visible), so every piece compiles and runs there.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from ckptbench.backends.jax.chain import JaxChainOps, chain_ops, tape_nbytes
from ckptbench.backends.jax.device import resolve_device
from ckptbench.measure.costwork import SAMPLES
from ckptbench.measure.layercosts import measure_layer_costs
from ckptbench.workloads.chain import check_chain_init, layer_names

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["JaxLayerFramework", "measure_jax_layer_costs"]


class _BlockingOps:
    """A chain's step operations whose ``tape`` and ``reverse`` return once their results
    (the reverse's parameter cotangent included) are ready on the device."""

    def __init__(self, ops: JaxChainOps) -> None:
        self.ops = ops

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[Any, Any]:
        return jax.block_until_ready(self.ops.tape(state, i, outputs))

    def reverse(self, tape: Any, state_bar: Any, i: int) -> Any:
        gx = self.ops.reverse(tape, state_bar, i)
        jax.block_until_ready((gx, self.ops.pbar[i]))
        return gx


class JaxLayerFramework:
    """What :func:`ckptbench.measure.layercosts.measure_layer_costs` asks a framework for,
    over one chain's compiled pieces; :attr:`chain` is the chain it times (its ``layer``
    and ``loss`` compiled, each call blocking until its result is ready)."""

    tape_method = "jax-vjp-residuals"

    def __init__(self, wl: Any, layers: int, params: list) -> None:
        self.ops = chain_ops(wl.layer, layers, params)
        loss = jax.jit(wl.loss)
        pieces = self.ops.pieces
        self.chain = _TimedChain(
            layer=lambda i, p, x: jax.block_until_ready(pieces[i].advance(p, x)),
            loss=lambda x: jax.block_until_ready(loss(x)),
        )

    def chain_ops(self, layer: Any, layers: int, params: list) -> _BlockingOps:
        return _BlockingOps(self.ops)

    def untaped(self) -> contextlib.AbstractContextManager:
        """JAX records nothing outside a ``vjp``: every piece but ``tape`` is untaped."""
        return contextlib.nullcontext()

    def state_nbytes(self, state: Any) -> int:
        return self.ops.state_nbytes(state)

    def layer_tape_nbytes(self, layer: Any, i: int, params: Any, x: Any) -> int:
        """The bytes one kept tape of layer ``i`` holds, from the executor's own tape."""
        tape, out = self.ops.tape(x, i, False)
        return tape_nbytes(tape, out)


class _TimedChain:
    """A chain's ``layer`` and ``loss`` as the measurement calls them."""

    def __init__(self, layer: Any, loss: Any) -> None:
        self.layer, self.loss = layer, loss


def _blocked() -> None:
    """Every timed call blocks on its own results (nothing else to wait for)."""


def measure_jax_layer_costs(case: Case, wl: Any, samples: int = SAMPLES) -> dict[str, Any]:
    """The per-layer costs of ``case``'s chain ``wl`` on JAX (a ``costs_report`` document:
    :meth:`ckptbench.measure.layercosts.LayerCostReport.as_dict` and the device)."""
    device = resolve_device(case.device)
    drawn = wl.init(case.steps, np.random.default_rng(case.seed))
    params, x0 = jax.device_put(check_chain_init(drawn, case.steps, wl.init), device)
    fw = JaxLayerFramework(wl, case.steps, list(params))
    report = measure_layer_costs(
        fw.chain, list(params), x0, framework=fw, names=layer_names(wl, case.steps),
        samples=samples, device_sync=_blocked,
    )  # fmt: skip
    return {**report.as_dict(), "backend": "jax", "executor": "engine",
            "device": device.platform}  # fmt: skip
