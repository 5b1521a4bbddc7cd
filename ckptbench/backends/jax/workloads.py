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

A plug-in's params may be any pytree, equinox modules included (``eqx.nn.GRUCell`` as params,
``step(cell, state, x)`` calling it): they are partitioned into their floating-point arrays,
which are differentiated (as a list, in ``jax.tree_util`` order), and the rest (functions,
integers, integer arrays), which stays fixed; ``step`` and ``post`` get the pytree put back
together (``equinox.partition``/``combine``, written with ``jax.tree_util``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from ckptbench.backends.jax import SPEC
from ckptbench.workloads import Sizes, WorkloadError, load_workload, registry
from ckptbench.workloads.base import check_init_result
from ckptbench.workloads.chain import check_chain_init, is_chain, layer_names
from ckptbench.workloads.mirror import MirrorLSTM, MirrorRNN

__all__ = [
    "JaxChainPlugin",
    "JaxLSTM",
    "JaxPlugin",
    "JaxRNN",
    "OnJax",
    "load_jax_workload",
    "to_jax",
]


def to_jax(tree: Any, dtype: str | None = None) -> Any:
    """numpy arrays and JAX arrays of a nested dict/tuple/list, as JAX arrays; floating-point
    ones cast to ``dtype`` (``None``: dtype kept)."""
    if isinstance(tree, dict):
        return {k: to_jax(v, dtype) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(to_jax(v, dtype) for v in tree)
    if isinstance(tree, np.ndarray | np.generic | jax.Array):
        arr = jnp.asarray(tree)
        if dtype is not None and jnp.issubdtype(arr.dtype, jnp.floating):
            arr = arr.astype(dtype)
        return arr
    if _is_torch(tree):
        raise WorkloadError("this plug-in returns torch tensors: use --backend torch")
    raise WorkloadError(f"init must return arrays, got {type(tree).__name__}")


def _is_torch(x: Any) -> bool:
    import sys

    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor | torch.nn.Module)


def _is_param(leaf: Any) -> bool:
    """A pytree leaf that is differentiated: a floating-point (or complex) array."""
    return isinstance(leaf, np.ndarray | np.generic | jax.Array) and jnp.issubdtype(
        jnp.result_type(leaf), jnp.inexact
    )


def _partition(params: Any) -> tuple[list[Any], tuple[Any, tuple, tuple]]:
    """A params pytree as (its floating-point arrays, what puts the pytree back together)."""
    leaves, treedef = jax.tree_util.tree_flatten(params)
    if any(_is_torch(leaf) for leaf in leaves):
        raise WorkloadError("this plug-in returns torch tensors: use --backend torch")
    mask = tuple(_is_param(leaf) for leaf in leaves)
    arrays = [jnp.asarray(leaf) for leaf, keep in zip(leaves, mask, strict=True) if keep]
    if not arrays:
        raise WorkloadError(
            f"params ({type(params).__name__}) holds no floating-point arrays: there is "
            "nothing to differentiate"
        )
    rest = tuple(None if keep else leaf for leaf, keep in zip(leaves, mask, strict=True))
    return arrays, (treedef, mask, rest)


def _combine(arrays: Any, static: tuple[Any, tuple, tuple]) -> Any:
    treedef, mask, rest = static
    it = iter(arrays)
    return jax.tree_util.tree_unflatten(
        treedef, [next(it) if keep else leaf for keep, leaf in zip(mask, rest, strict=True)]
    )


class OnJax:
    """What makes a workload written over an array namespace (``xp``) run on JAX: the
    namespace, and the numpy initial values converted (``to_jax``, in the case's dtype)."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree, self.dtype)


@dataclass(frozen=True)
class JaxRNN(OnJax, MirrorRNN):
    """The RNN of :mod:`ckptbench.workloads.mirror` on JAX arrays."""


@dataclass(frozen=True)
class JaxLSTM(OnJax, MirrorLSTM):
    """The LSTM of :mod:`ckptbench.workloads.mirror` on JAX arrays."""


@dataclass(frozen=True)
class JaxPlugin:
    """A user workload run with JAX arrays: ``init``'s arrays become JAX arrays; a params
    pytree that is not plain arrays is partitioned (module docstring)."""

    spec: str
    workload: Any
    dtype: str = "float64"
    static: list = field(default_factory=list, repr=False, compare=False)  # [partition]

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        params, state0, inputs = check_init_result(
            self.workload.init(steps, rng), self.workload.init
        )
        self.static.clear()
        state0, inputs = to_jax((state0, inputs), self.dtype)
        try:
            return to_jax(params, self.dtype), state0, inputs
        except WorkloadError:
            if _is_torch(params):
                raise
        arrays, static = _partition(params)
        self.static.append(static)
        arrays = to_jax(arrays, self.dtype)
        return arrays, state0, inputs

    def _params(self, params: Any) -> Any:
        return _combine(params, self.static[0]) if self.static else params

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return self.workload.step(self._params(params), state, x)

    def post(self, params: Any, state: Any) -> Any:
        return self.workload.post(self._params(params), state)

    def loss(self, outputs: Any) -> Any:
        return self.workload.loss(outputs)


@dataclass(frozen=True)
class JaxChainPlugin:
    """A user's layer chain (:mod:`ckptbench.workloads.chain`) run with JAX arrays."""

    workload: Any
    dtype: str = "float64"

    def layer_names(self, layers: int) -> tuple[str, ...]:
        return layer_names(self.workload, layers)

    def init(self, layers: int, rng: Any) -> tuple[list[Any], Any]:
        params, x0 = check_chain_init(self.workload.init(layers, rng), layers, self.workload.init)
        params, x0 = to_jax((params, x0), self.dtype)
        return list(params), x0

    def layer(self, i: int, params: Any, x: Any) -> Any:
        return self.workload.layer(i, params, x)

    def loss(self, x: Any) -> Any:
        return self.workload.loss(x)


def load_jax_workload(spec: str, sizes: Sizes, dtype: str = "float64") -> Any:
    """The JAX workload named by ``spec`` (a built-in of :mod:`ckptbench.workloads.registry`
    or a plug-in), its floating-point arrays in ``dtype``.

    Plug-ins follow :func:`ckptbench.workloads.load_workload`'s protocol and errors.
    """
    if not isinstance(sizes, Sizes):
        raise WorkloadError(f"sizes must be a Sizes instance, got {type(sizes).__name__}")
    name = spec.strip() if isinstance(spec, str) else spec
    if registry.is_builtin(name):
        return registry.factory(name, SPEC.name)(**sizes.as_kwargs(), dtype=dtype)
    workload = load_workload(name, sizes)
    if is_chain(workload):
        return JaxChainPlugin(workload, dtype)
    return JaxPlugin(spec=name, workload=workload, dtype=dtype)
