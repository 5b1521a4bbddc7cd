"""The RNN and LSTM workloads in JAX, and plug-ins whose arrays are JAX arrays.

The math is that of :mod:`ckptbench.workloads.rnn` and :mod:`ckptbench.workloads.lstm`, op
for op (the LSTM's one fused ``tanh`` over all four gates included), in float64 (the
backend enables ``jax_enable_x64``). Initial values are not drawn again: ``init`` calls the
autograd workload's own ``init`` with the same numpy generator and converts its arrays with
``jnp.asarray``, so one seed gives the same parameters, states and inputs on every backend
and the losses agree to rounding (``tests/test_jax_backend.py``).

A plug-in (``"path/to/file.py:NAME"`` or ``"package.module:NAME"``) is loaded by
:func:`ckptbench.workloads.load_workload` (same factory protocol and one-line errors); its
``init`` may return numpy or JAX arrays, and its ``step``, ``post`` and ``loss`` receive
JAX arrays (write them with ``jax.numpy``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ckptbench.workloads import LSTM, RNN, Sizes, WorkloadError, load_workload

__all__ = ["JAX_BUILTINS", "JaxLSTM", "JaxPlugin", "JaxRNN", "load_jax_workload", "to_jax"]


def to_jax(tree: Any) -> Any:
    """numpy arrays and JAX arrays of a nested dict/tuple/list, as JAX arrays (dtype kept)."""
    if isinstance(tree, dict):
        return {k: to_jax(v) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(to_jax(v) for v in tree)
    if isinstance(tree, np.ndarray | np.generic | jax.Array):
        return jnp.asarray(tree)
    raise WorkloadError(f"init must return arrays, got {type(tree).__name__}")


@dataclass(frozen=True)
class JaxRNN:
    """``h' = tanh(h @ W_hh + x @ W_xh + b)``, ``y = h' @ W_out + b_out``, ``L = mean(y**2)``."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32
    reference: RNN = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ref = RNN(hidden=self.hidden, batch=self.batch, input=self.input, output=self.output)
        object.__setattr__(self, "reference", ref)

    @property
    def state_nbytes(self) -> int:
        return self.reference.state_nbytes

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        """The autograd workload's ``(params, h0, inputs)`` for ``rng``, as JAX arrays."""
        return to_jax(self.reference.init(steps, rng))

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return jnp.tanh(jnp.dot(state, params["W_hh"]) + jnp.dot(x, params["W_xh"]) + params["b"])

    def post(self, params: Any, state: Any) -> Any:
        return jnp.dot(state, params["W_out"]) + params["b_out"]

    def loss(self, outputs: Any) -> Any:
        return jnp.mean(outputs**2)


@dataclass(frozen=True)
class JaxLSTM:
    """The fused-gate LSTM of :mod:`ckptbench.workloads.lstm`; the state is ``(h, c)``."""

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 32
    reference: LSTM = field(init=False, repr=False, compare=False)
    scale: np.ndarray = field(init=False, repr=False, compare=False)
    shift: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ref = LSTM(hidden=self.hidden, batch=self.batch, input=self.input, output=self.output)
        object.__setattr__(self, "reference", ref)
        h = self.hidden
        # sigmoid(u) = 0.5 * tanh(u / 2) + 0.5: columns [i | f | o] get 0.5, [g] gets 1 / 0.
        scale = np.full(4 * h, 0.5)
        scale[3 * h :] = 1.0
        shift = np.full(4 * h, 0.5)
        shift[3 * h :] = 0.0
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "shift", shift)

    @property
    def state_nbytes(self) -> int:
        return self.reference.state_nbytes

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        """The autograd workload's ``(params, (h0, c0), inputs)`` for ``rng``, as JAX arrays."""
        return to_jax(self.reference.init(steps, rng))

    def step(self, params: Any, state: Any, x: Any) -> Any:
        h, c = state[0], state[1]
        n = self.hidden
        z = jnp.dot(jnp.concatenate((x, h), axis=1), params["W"]) + params["b"]
        gates = jnp.tanh(z * self.scale) * self.scale + self.shift
        c = gates[:, n : 2 * n] * c + gates[:, :n] * gates[:, 3 * n :]
        h = gates[:, 2 * n : 3 * n] * jnp.tanh(c)
        return h, c

    def post(self, params: Any, state: Any) -> Any:
        return jnp.dot(state[0], params["W_out"]) + params["b_out"]

    def loss(self, outputs: Any) -> Any:
        return jnp.mean(outputs**2)


@dataclass(frozen=True)
class JaxPlugin:
    """A user workload run with JAX arrays: ``init``'s arrays become JAX arrays."""

    spec: str
    workload: Any

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        drawn = self.workload.init(steps, rng)
        if not isinstance(drawn, tuple) or len(drawn) != 3:
            raise WorkloadError(
                f"workload {self.spec!r}: init must return (params, state0, inputs), "
                f"got {type(drawn).__name__}"
            )
        return to_jax(drawn)

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return self.workload.step(params, state, x)

    def post(self, params: Any, state: Any) -> Any:
        return self.workload.post(params, state)

    def loss(self, outputs: Any) -> Any:
        return self.workload.loss(outputs)


JAX_BUILTINS: dict[str, Callable[..., Any]] = {"lstm": JaxLSTM, "rnn": JaxRNN}


def load_jax_workload(spec: str, sizes: Sizes) -> Any:
    """The JAX workload named by ``spec`` (``"rnn"``, ``"lstm"`` or a plug-in).

    Plug-ins follow :func:`ckptbench.workloads.load_workload`'s protocol and errors.
    """
    if not isinstance(sizes, Sizes):
        raise WorkloadError(f"sizes must be a Sizes instance, got {type(sizes).__name__}")
    name = spec.strip() if isinstance(spec, str) else spec
    if name in JAX_BUILTINS:
        return JAX_BUILTINS[name](**sizes.as_kwargs())
    return JaxPlugin(spec=name, workload=load_workload(name, sizes))
