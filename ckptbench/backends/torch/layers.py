"""Layer chains on torch: the built-in stacks, and any ``nn.Sequential`` from a plug-in.

The built-in stacks (``mlp-stack``, ``cnn-stack``, ``transformer-stack``) are
:mod:`ckptbench.workloads.stacks` with ``xp = torch``; their initial values are the numpy
draws of the autograd stacks, converted (one seed, one loss on every backend).

A plug-in factory (``--model path/file.py:NAME``) that returns an ``nn.Sequential``, a list
or tuple of ``nn.Module`` objects, or a pair ``(modules, x0)`` is a chain too
(:class:`ModuleChain`): layer ``i`` is module ``i`` called with its own parameters
(``torch.func.functional_call``), ``--steps`` must be the number of modules, ``x0`` is
drawn N(0, 1) of shape ``(batch, input)`` unless the pair gives it (an array, a tensor or a
shape), and the loss is ``mean(x_L ** 2)``. The modules run in eval mode (dropout off,
batch norm on its running statistics), so a recomputed layer gives what it gave the first
time; frozen parameters (``requires_grad=False``) stay the module's own constants.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from ckptbench.workloads import WorkloadError
from ckptbench.workloads.stacks import STACKS, CNNStack, MLPStack, TransformerStack

__all__ = [
    "TORCH_STACKS",
    "ModuleChain",
    "TorchCNNStack",
    "TorchMLPStack",
    "TorchTransformerStack",
    "module_chain",
]


def _convert(tree: Any, device: str, dtype: str) -> Any:
    if isinstance(tree, dict):
        return {k: _convert(v, device, dtype) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_convert(v, device, dtype) for v in tree)
    return torch.from_numpy(np.ascontiguousarray(tree)).to(device, getattr(torch, dtype))


@dataclass(frozen=True)
class TorchMLPStack(MLPStack):
    """``mlp-stack`` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return _convert(tree, self.device, self.dtype)


@dataclass(frozen=True)
class TorchCNNStack(CNNStack):
    """``cnn-stack`` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return _convert(tree, self.device, self.dtype)


@dataclass(frozen=True)
class TorchTransformerStack(TransformerStack):
    """``transformer-stack`` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return _convert(tree, self.device, self.dtype)


#: The built-in stacks on torch, by name.
TORCH_STACKS: dict[str, Callable[..., Any]] = {
    cls.NAME: cls for cls in (TorchMLPStack, TorchCNNStack, TorchTransformerStack)
}
assert set(TORCH_STACKS) == set(STACKS)


@dataclass(frozen=True)
class ModuleChain:
    """A list of ``nn.Module`` objects as a chain (module docstring)."""

    modules: tuple[torch.nn.Module, ...]
    names: tuple[str, ...]
    x0: Any = None  # an array, a tensor or a shape; None: (batch, input)
    batch: int = 16
    input: int = 32
    device: str = "cpu"
    dtype: str = "float64"

    def layer_names(self, layers: int) -> tuple[str, ...]:
        return self.names

    def init(self, layers: int, rng: Any) -> tuple[list[Any], Any]:
        n = len(self.modules)
        if layers != n:
            raise WorkloadError(f"this chain has {n} modules: run it with --steps {n}")
        dtype = getattr(torch, self.dtype)
        params = []
        for m in self.modules:
            m.to(device=self.device, dtype=dtype).train(False)
            params.append(
                {k: p.detach().clone() for k, p in m.named_parameters() if p.requires_grad}
            )
        x0 = self.x0
        if x0 is None or (isinstance(x0, tuple | list) and all(isinstance(d, int) for d in x0)):
            shape = (self.batch, self.input) if x0 is None else tuple(x0)
            x0 = np.random.default_rng(rng).standard_normal(shape)
        if isinstance(x0, np.ndarray):
            x0 = torch.from_numpy(np.ascontiguousarray(x0))
        if not isinstance(x0, torch.Tensor):
            got = type(x0).__name__
            raise WorkloadError(f"x0 must be an array, a tensor or a shape, got {got}")
        return params, x0.detach().to(self.device, dtype)

    def layer(self, i: int, params: Any, x: Any) -> Any:
        return torch.func.functional_call(self.modules[i], params, (x,))

    def loss(self, x: Any) -> Any:
        return torch.mean(x**2)


def module_chain(obj: Any, batch: int, input: int, device: str, dtype: str) -> ModuleChain | None:
    """``obj`` (what a plug-in factory returned) as a :class:`ModuleChain`, or None when it
    is no ``nn.Sequential``, list or tuple of modules, or pair ``(modules, x0)``."""
    x0 = None
    if (
        isinstance(obj, tuple)
        and len(obj) == 2
        and isinstance(obj[0], torch.nn.Sequential | list | tuple)
        and not isinstance(obj[1], torch.nn.Module)
    ):
        obj, x0 = obj
    if isinstance(obj, torch.nn.Sequential):
        named = list(obj.named_children())
    elif isinstance(obj, list | tuple) and obj and all(isinstance(m, torch.nn.Module) for m in obj):
        named = [(str(i), m) for i, m in enumerate(obj)]
    else:
        return None
    if not named:
        raise WorkloadError("the plug-in's chain holds no modules")
    names = tuple(f"{k}.{type(m).__name__.lower()}" if k.isdigit() else k for k, m in named)
    modules = tuple(m for _, m in named)
    return ModuleChain(modules, names, x0, batch, input, device, dtype)
