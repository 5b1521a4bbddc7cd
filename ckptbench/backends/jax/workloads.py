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
from dataclasses import dataclass
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ckptbench.workloads import Sizes, WorkloadError, load_workload
from ckptbench.workloads.mirror import MirrorLSTM, MirrorRNN

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
class JaxRNN(MirrorRNN):
    """The RNN of :mod:`ckptbench.workloads.mirror` on JAX arrays."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree)


@dataclass(frozen=True)
class JaxLSTM(MirrorLSTM):
    """The LSTM of :mod:`ckptbench.workloads.mirror` on JAX arrays."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree)


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
