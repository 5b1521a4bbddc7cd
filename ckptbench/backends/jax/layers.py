"""The built-in layer chains on JAX: :mod:`ckptbench.workloads.stacks` with ``xp =
jax.numpy``, their initial values the numpy draws of the autograd stacks, converted (one
seed, one loss on every backend). Run by the engine-driven executor
(:mod:`ckptbench.backends.jax.chain`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import jax.numpy as jnp

from ckptbench.backends.jax.workloads import to_jax
from ckptbench.workloads.stacks import CNNStack, MLPStack, TransformerStack

__all__ = ["JaxCNNStack", "JaxMLPStack", "JaxTransformerStack"]


@dataclass(frozen=True)
class JaxMLPStack(MLPStack):
    """``mlp-stack`` on JAX arrays."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree, self.dtype)


@dataclass(frozen=True)
class JaxCNNStack(CNNStack):
    """``cnn-stack`` on JAX arrays."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree, self.dtype)


@dataclass(frozen=True)
class JaxTransformerStack(TransformerStack):
    """``transformer-stack`` on JAX arrays."""

    xp: ClassVar[Any] = jnp

    def convert(self, tree: Any) -> Any:
        return to_jax(tree, self.dtype)
