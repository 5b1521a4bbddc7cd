"""The RNN and LSTM workloads in PyTorch, and plug-ins whose arrays are torch tensors.

The math is that of :mod:`ckptbench.workloads.rnn` and :mod:`ckptbench.workloads.lstm`, op
for op (the LSTM's one fused ``tanh`` over all four gates included), in float64. Initial
values are *not* drawn again: ``init`` calls the autograd workload's own ``init`` with the
same generator and converts its numpy arrays with ``torch.from_numpy``, so the same seed
gives bit-identical parameters, states and inputs on both backends by construction, and the
losses agree to rounding (see ``tests/test_torch_backend.py``).

A plug-in (``"path/to/file.py:NAME"`` or ``"package.module:NAME"``) is loaded by
:func:`ckptbench.workloads.load_workload` (same factory protocol, same one-line errors). Its
``init`` may return numpy arrays or torch tensors; both are moved to the requested device.
Its ``step``, ``post`` and ``loss`` receive torch tensors.

A plug-in's ``init`` may also return an ``nn.Module`` as its params (for example one holding
an ``nn.LSTMCell`` and a readout ``nn.Linear``): then ``step(module, state, x)`` and
``post(module, state)`` receive that module, and the gradient's parameters are the module's
named parameters (a dict, keys as ``named_parameters`` gives them). Each call runs the
module with those tensors in place of its own (``torch.func.functional_call`` over a small
wrapper), so the engine sees the parameters as explicit leaves like any other params.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from ckptbench.workloads import Sizes, WorkloadError, load_workload
from ckptbench.workloads.mirror import MirrorLSTM, MirrorRNN

__all__ = [
    "TORCH_BUILTINS",
    "TorchLSTM",
    "TorchPlugin",
    "TorchRNN",
    "load_torch_workload",
    "to_device",
]


def to_device(tree: Any, device: torch.device | str) -> Any:
    """numpy arrays and tensors of a nested dict/tuple/list, as tensors on ``device``.

    CPU conversion of a float64 array shares its memory (``torch.from_numpy``); nothing is
    cast, so float64 stays float64.
    """
    if isinstance(tree, dict):
        return {k: to_device(v, device) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(to_device(v, device) for v in tree)
    if isinstance(tree, np.ndarray | np.generic):
        arr = np.asarray(tree)
        if not arr.flags.c_contiguous:
            arr = arr.copy()
        return torch.from_numpy(arr).to(device)
    if isinstance(tree, torch.Tensor):
        return tree.to(device)
    raise WorkloadError(f"init must return arrays or tensors, got {type(tree).__name__}")


@dataclass(frozen=True)
class TorchRNN(MirrorRNN):
    """The RNN of :mod:`ckptbench.workloads.mirror` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return to_device(tree, self.device)


@dataclass(frozen=True)
class TorchLSTM(MirrorLSTM):
    """The LSTM of :mod:`ckptbench.workloads.mirror` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return to_device(tree, self.device)


class _Call(torch.nn.Module):
    """Runs ``fn(module, *args)`` as its forward, so ``functional_call`` can swap the held
    module's parameters for the tensors the engine differentiates."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.m = module

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self.m, *args)


@dataclass(frozen=True)
class TorchPlugin:
    """A user workload run with torch tensors: ``init``'s arrays are moved to ``device``; an
    ``nn.Module`` as params becomes the dict of its named parameters (module docstring)."""

    spec: str
    workload: Any
    device: str = "cpu"
    call: list = field(default_factory=list, repr=False, compare=False)  # [_Call] once known

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        drawn = self.workload.init(steps, rng)
        if not isinstance(drawn, tuple) or len(drawn) != 3:
            raise WorkloadError(
                f"workload {self.spec!r}: init must return (params, state0, inputs), "
                f"got {type(drawn).__name__}"
            )
        params, state0, inputs = drawn
        if isinstance(params, torch.nn.Module):
            module = params.to(self.device)
            self.call[:] = [_Call(module)]
            params = {k: p.detach().clone() for k, p in module.named_parameters()}
        else:
            params = to_device(params, self.device)
        return (params, *to_device((state0, inputs), self.device))

    def _run(self, fn: Callable[..., Any], params: Any, *args: Any) -> Any:
        if not self.call:
            return fn(params, *args)
        named = {f"m.{k}": v for k, v in params.items()}
        return torch.func.functional_call(self.call[0], named, (fn, *args))

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return self._run(self.workload.step, params, state, x)

    def post(self, params: Any, state: Any) -> Any:
        return self._run(self.workload.post, params, state)

    def loss(self, outputs: Any) -> Any:
        return self.workload.loss(outputs)


TORCH_BUILTINS: dict[str, Callable[..., Any]] = {"lstm": TorchLSTM, "rnn": TorchRNN}


def load_torch_workload(spec: str, sizes: Sizes, device: str = "cpu") -> Any:
    """The torch workload named by ``spec`` (``"rnn"``, ``"lstm"`` or a plug-in) on ``device``.

    Plug-ins follow :func:`ckptbench.workloads.load_workload`'s protocol and errors.
    """
    if not isinstance(sizes, Sizes):
        raise WorkloadError(f"sizes must be a Sizes instance, got {type(sizes).__name__}")
    name = spec.strip() if isinstance(spec, str) else spec
    if name in TORCH_BUILTINS:
        return TORCH_BUILTINS[name](**sizes.as_kwargs(), device=device)
    return TorchPlugin(spec=name, workload=load_workload(name, sizes), device=device)
