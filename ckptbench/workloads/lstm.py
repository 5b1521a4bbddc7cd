"""Standard LSTM with one fused gate matmul and a linear readout, in float64.

    z        = concat(x, h) @ W + b             W: (input + hidden, 4 * hidden)
    i, f, o  = sigmoid(z_i), sigmoid(z_f), sigmoid(z_o)
    g        = tanh(z_g)
    c'       = f * c + i * g
    h'       = o * tanh(c')                     step returns (h', c')
    y        = h' @ W_out + b_out               post
    L        = mean(y_1..y_steps ** 2)          loss (every step's output counts)

Gate columns of ``W`` and ``b`` are ordered ``[i | f | o | g]``.

Memory matters here (the project measures what autograd keeps per taped
step), so the four nonlinearities are one ``tanh`` over the whole of ``z``:
sigmoid(u) = 0.5 * tanh(u / 2) + 0.5 is exact and cannot overflow, so

    gates = tanh(z * scale) * scale + shift     scale = [.5 .5 .5 1], shift = [.5 .5 .5 0]

(per block of ``hidden`` columns) gives ``[i | f | o | g]`` with one tanh
node instead of four, and no Python loop over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import autograd.numpy as anp
import numpy as np

from ckptbench.workloads.base import Sizes, WorkloadError, check_positive

__all__ = ["LSTM", "lstm"]

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class LSTM:
    """An LSTM workload; build it with :func:`lstm`. The state is the tuple ``(h, c)``."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32
    # Constant per-column vectors for the fused gate nonlinearity (not parameters).
    _scale: np.ndarray = field(init=False, repr=False, compare=False)
    _shift: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("hidden", "batch", "input", "output"):
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))
        h = self.hidden
        scale = np.full(4 * h, 0.5)
        scale[3 * h :] = 1.0
        shift = np.full(4 * h, 0.5)
        shift[3 * h :] = 0.0
        scale.flags.writeable = False
        shift.flags.writeable = False
        object.__setattr__(self, "_scale", scale)
        object.__setattr__(self, "_shift", shift)

    @property
    def sizes(self) -> Sizes:
        return Sizes(hidden=self.hidden, batch=self.batch, input=self.input, output=self.output)

    @property
    def state_nbytes(self) -> int:
        """Bytes of one state snapshot ``(h, c)``."""
        return 2 * self.batch * self.hidden * np.dtype(np.float64).itemsize

    def init(
        self, steps: int, rng: np.random.Generator
    ) -> tuple[Params, tuple[np.ndarray, np.ndarray], np.ndarray]:
        """Draw ``(params, (h0, c0), inputs)`` from ``rng`` (an int seed is accepted too).

        Draw order is params, then ``h0``, ``c0``, then inputs, so the parameters
        do not depend on ``steps`` and the inputs for fewer steps are a prefix of
        those for more. Weights are N(0, 1/fan_in); biases are zero except the
        forget gate's, which starts at 1 (the usual choice: keeps ``c`` bounded
        by about 1 / (1 - f) yet lets it remember). ``h0`` and ``c0`` are
        N(0, 0.1**2) so the gradient w.r.t. the initial state is not trivial.
        """
        steps = check_positive("steps", steps)
        rng = np.random.default_rng(rng)
        h, n, o = self.hidden, self.input, self.output
        b = np.zeros(4 * h)
        b[h : 2 * h] = 1.0
        params = {
            "W": rng.standard_normal((n + h, 4 * h)) / np.sqrt(n + h),
            "b": b,
            "W_out": rng.standard_normal((h, o)) / np.sqrt(h),
            "b_out": np.zeros(o),
        }
        h0 = 0.1 * rng.standard_normal((self.batch, h))
        c0 = 0.1 * rng.standard_normal((self.batch, h))
        inputs = rng.standard_normal((steps, self.batch, n))
        return params, (h0, c0), inputs

    def step(self, params: Params, state, x):
        h, c = state[0], state[1]
        n = self.hidden
        z = anp.dot(anp.concatenate((x, h), axis=1), params["W"]) + params["b"]
        gates = anp.tanh(z * self._scale) * self._scale + self._shift
        c = gates[:, n : 2 * n] * c + gates[:, :n] * gates[:, 3 * n :]
        h = gates[:, 2 * n : 3 * n] * anp.tanh(c)
        return h, c

    def post(self, params: Params, state):
        return anp.dot(state[0], params["W_out"]) + params["b_out"]

    def loss(self, outputs):
        return anp.mean(outputs**2)


def lstm(hidden: int = 256, batch: int = 16, input: int = 32, output: int | None = None) -> LSTM:
    """Factory for the built-in ``"lstm"`` workload; ``output=None`` means ``output = input``."""
    if output is None:
        output = input
    try:
        return LSTM(hidden=hidden, batch=batch, input=input, output=output)
    except WorkloadError as err:
        raise WorkloadError(f"lstm: {err}") from None


def least_elements(sizes: Sizes, steps: int) -> int:
    """Array elements of the parameters (the fused gate matrix, its bias and the readout),
    the gates' constant vectors, the inputs and one state ``(h, c)`` at ``sizes``: the least
    any mode holds (nothing allocated; ``Case.check_fits_memory``)."""
    h, b, n, o = sizes.hidden, sizes.batch, sizes.input, sizes.output
    return (n + h) * 4 * h + 4 * h + h * o + o + 8 * h + steps * b * n + 2 * b * h


def state_elements(sizes: Sizes, steps: int) -> int:
    """Elements of the state ``(h, c)`` every step is handed (a costs file's ``state_bytes`` is
    this times the dtype's size)."""
    return 2 * sizes.batch * sizes.hidden
