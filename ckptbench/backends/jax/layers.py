"""The built-in layer chains on JAX: :mod:`ckptbench.workloads.stacks` with ``xp =
jax.numpy``, their initial values the numpy draws of the autograd stacks, converted (one
seed, one loss on every backend). Run by the engine-driven executor
(:mod:`ckptbench.backends.jax.chain`)."""

from __future__ import annotations

from dataclasses import dataclass

from ckptbench.backends.jax.workloads import OnJax
from ckptbench.workloads.stacks import CNNStack, MLPStack, TransformerStack

__all__ = ["JaxCNNStack", "JaxMLPStack", "JaxTransformerStack"]


@dataclass(frozen=True)
class JaxMLPStack(OnJax, MLPStack):
    """``mlp-stack`` on JAX arrays."""


@dataclass(frozen=True)
class JaxCNNStack(OnJax, CNNStack):
    """``cnn-stack`` on JAX arrays."""


@dataclass(frozen=True)
class JaxTransformerStack(OnJax, TransformerStack):
    """``transformer-stack`` on JAX arrays."""
