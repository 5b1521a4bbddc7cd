"""Vanilla tanh RNN with a linear readout, in float64.

    h' = tanh(h @ W_hh + x @ W_xh + b)        step
    y  = h' @ W_out + b_out                   post
    L  = mean(y_1..y_steps ** 2)              loss (every step's output counts)

The state is one array ``h`` of shape ``(batch, hidden)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import autograd.numpy as anp
import numpy as np

from ckptbench.workloads.base import Sizes, WorkloadError, check_positive

__all__ = ["RNN", "rnn"]

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class RNN:
    """A tanh RNN workload; build it with :func:`rnn`."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32

    def __post_init__(self) -> None:
        for name in ("hidden", "batch", "input", "output"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    @property
    def sizes(self) -> Sizes:
        return Sizes(hidden=self.hidden, batch=self.batch, input=self.input, output=self.output)

    @property
    def state_nbytes(self) -> int:
        """Bytes of one state snapshot ``h``."""
        return self.batch * self.hidden * np.dtype(np.float64).itemsize

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Params, np.ndarray, np.ndarray]:
        """Draw ``(params, h0, inputs)`` from ``rng`` (an int seed is accepted too).

        Draw order is params, then ``h0``, then inputs, so the parameters do not
        depend on ``steps`` and the inputs for fewer steps are a prefix of those
        for more. Weights are N(0, 1/fan_in); biases start at zero; ``h0`` is
        N(0, 0.1**2) so the gradient w.r.t. the initial state is not trivial.
        """
        steps = check_positive("steps", steps)
        rng = np.random.default_rng(rng)
        h, n, o = self.hidden, self.input, self.output
        params = {
            "W_xh": rng.standard_normal((n, h)) / np.sqrt(n),
            "W_hh": rng.standard_normal((h, h)) / np.sqrt(h),
            "b": np.zeros(h),
            "W_out": rng.standard_normal((h, o)) / np.sqrt(h),
            "b_out": np.zeros(o),
        }
        h0 = 0.1 * rng.standard_normal((self.batch, h))
        inputs = rng.standard_normal((steps, self.batch, n))
        return params, h0, inputs

    def step(self, params: Params, state, x):
        return anp.tanh(anp.dot(state, params["W_hh"]) + anp.dot(x, params["W_xh"]) + params["b"])

    def post(self, params: Params, state):
        return anp.dot(state, params["W_out"]) + params["b_out"]

    def loss(self, outputs):
        return anp.mean(outputs**2)


def rnn(hidden: int = 256, batch: int = 16, input: int = 32, output: int | None = None) -> RNN:
    """Factory for the built-in ``"rnn"`` workload; ``output=None`` means ``output = input``."""
    if output is None:
        output = input
    try:
        return RNN(hidden=hidden, batch=batch, input=input, output=output)
    except WorkloadError as err:
        raise WorkloadError(f"rnn: {err}") from None


def least_elements(sizes: Sizes, steps: int) -> int:
    """Array elements of the parameters, the inputs and one state at ``sizes``: the least
    any mode holds (nothing allocated; ``Case.check_fits_memory``)."""
    h, b, n, o = sizes.hidden, sizes.batch, sizes.input, sizes.output
    return n * h + h * h + h + h * o + o + steps * b * n + b * h


def state_elements(sizes: Sizes, steps: int) -> int:
    """Elements of the state ``h`` every step is handed (a costs file's ``state_bytes`` is
    this times the dtype's size)."""
    return sizes.batch * sizes.hidden
