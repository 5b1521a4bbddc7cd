"""The built-in RNN and LSTM written once for every array framework (torch, JAX).

Each framework's copy subclasses :class:`MirrorRNN` / :class:`MirrorLSTM`, naming its array
namespace ``xp`` (``torch`` or ``jax.numpy``: ``tanh``, ``concatenate``, ``mean`` and ``@``)
and how arrays are converted (``convert``). The math is that of :mod:`ckptbench.workloads.rnn`
and :mod:`ckptbench.workloads.lstm` op for op (the LSTM's one fused ``tanh`` over all four
gates, ``sigmoid(u) = 0.5 * tanh(u / 2) + 0.5``), and the initial values are not drawn
again: ``init`` converts what the autograd workload (``reference``) draws from the same
numpy generator, so one seed gives one loss on every backend (see docs/architecture.md).

This module imports no framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ckptbench.workloads.lstm import LSTM
from ckptbench.workloads.rnn import RNN

__all__ = ["MirrorLSTM", "MirrorRNN", "gate_affine"]


def gate_affine(hidden: int) -> tuple[np.ndarray, np.ndarray]:
    """(scale, shift) of the fused gate ``tanh(z * scale) * scale + shift``: the columns
    [i | f | o] get 0.5 and 0.5 (a sigmoid), [g] gets 1 and 0 (a tanh)."""
    scale = np.full(4 * hidden, 0.5)
    scale[3 * hidden :] = 1.0
    shift = np.full(4 * hidden, 0.5)
    shift[3 * hidden :] = 0.0
    return scale, shift


@dataclass(frozen=True)
class MirrorRNN:
    """``h' = tanh(h @ W_hh + x @ W_xh + b)``, ``y = h' @ W_out + b_out``, ``L = mean(y**2)``."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32
    dtype: str = "float64"  # what ``convert`` casts floating-point arrays to
    reference: Any = field(init=False, repr=False, compare=False)

    xp: ClassVar[Any] = None  # the framework's array namespace
    REFERENCE: ClassVar[type] = RNN

    def __post_init__(self) -> None:
        ref = self.REFERENCE(
            hidden=self.hidden, batch=self.batch, input=self.input, output=self.output
        )
        object.__setattr__(self, "reference", ref)

    def convert(self, tree: Any) -> Any:
        """numpy arrays of a nested dict/tuple/list as the framework's arrays, floating-point
        ones in ``dtype``."""
        raise NotImplementedError

    @property
    def state_nbytes(self) -> int:
        return self.reference.state_nbytes

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        """The autograd workload's ``(params, state0, inputs)`` for ``rng``, converted."""
        return self.convert(self.reference.init(steps, rng))

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return self.xp.tanh(state @ params["W_hh"] + x @ params["W_xh"] + params["b"])

    def post(self, params: Any, state: Any) -> Any:
        return state @ params["W_out"] + params["b_out"]

    def loss(self, outputs: Any) -> Any:
        return self.xp.mean(outputs**2)


@dataclass(frozen=True)
class MirrorLSTM(MirrorRNN):
    """The fused-gate LSTM of :mod:`ckptbench.workloads.lstm`; the state is ``(h, c)``."""

    scale: Any = field(init=False, repr=False, compare=False)
    shift: Any = field(init=False, repr=False, compare=False)

    REFERENCE: ClassVar[type] = LSTM

    def __post_init__(self) -> None:
        super().__post_init__()
        scale, shift = self.convert(gate_affine(self.hidden))
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "shift", shift)

    def step(self, params: Any, state: Any, x: Any) -> Any:
        h, c = state[0], state[1]
        n, xp = self.hidden, self.xp
        z = xp.concatenate((x, h), axis=1) @ params["W"] + params["b"]
        gates = xp.tanh(z * self.scale) * self.scale + self.shift
        c = gates[:, n : 2 * n] * c + gates[:, :n] * gates[:, 3 * n :]
        h = gates[:, 2 * n : 3 * n] * xp.tanh(c)
        return h, c

    def post(self, params: Any, state: Any) -> Any:
        return state[0] @ params["W_out"] + params["b_out"]
