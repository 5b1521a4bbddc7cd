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
wrapper), so the engine sees the parameters as explicit leaves like any other params. Only
parameters that require grad are differentiated: frozen ones (``requires_grad=False``) stay
the module's own constants, and the plug-in check notes them (``notes``).

A step written the usual PyTorch way works as written too: a workload that keeps its module
(an attribute holding an ``nn.Module``, or a list/tuple/dict of them, or the workload being a
module itself) and returns that module's parameter tensors as its params (``list(
self.net.parameters())``, ``dict(self.net.named_parameters())``) may call ``self.net(...)``
in ``step`` and ``post``, ignoring the params it is passed: each call runs with the
differentiated tensors in place of the module's own (``torch.func.functional_call``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from ckptbench.backends.torch import SPEC
from ckptbench.backends.torch.layers import module_chain
from ckptbench.workloads import Sizes, WorkloadError, build_workload, checked_workload, registry
from ckptbench.workloads.base import check_init_result
from ckptbench.workloads.chain import check_chain_init, is_chain, layer_names
from ckptbench.workloads.mirror import MirrorLSTM, MirrorRNN

__all__ = [
    "TorchChainPlugin",
    "TorchLSTM",
    "TorchPlugin",
    "TorchRNN",
    "load_torch_workload",
    "to_device",
]


def to_device(tree: Any, device: torch.device | str, dtype: str | None = None) -> Any:
    """numpy arrays and tensors of a nested dict/tuple/list, as tensors on ``device``;
    floating-point ones cast to ``dtype`` (``None``: dtype kept).

    CPU conversion of a float64 array kept in float64 shares its memory
    (``torch.from_numpy``).
    """
    if isinstance(tree, dict):
        return {k: to_device(v, device, dtype) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(to_device(v, device, dtype) for v in tree)
    if isinstance(tree, np.ndarray | np.generic):
        arr = np.asarray(tree)
        if not arr.flags.c_contiguous:
            arr = arr.copy()
        return _cast(torch.from_numpy(arr).to(device), dtype)
    if isinstance(tree, torch.Tensor):
        return _cast(tree.to(device), dtype)
    if _is_jax(tree):
        raise WorkloadError("this plug-in returns JAX arrays: use --backend jax")
    raise WorkloadError(f"init must return arrays or tensors, got {type(tree).__name__}")


def _cast(t: torch.Tensor, dtype: str | None) -> torch.Tensor:
    if dtype is None or not t.is_floating_point():
        return t
    return t.to(getattr(torch, dtype))


def _is_jax(x: Any) -> bool:
    import sys

    jax, eqx = sys.modules.get("jax"), sys.modules.get("equinox")
    return (jax is not None and isinstance(x, jax.Array)) or (
        eqx is not None and isinstance(x, eqx.Module)
    )


@dataclass(frozen=True)
class TorchRNN(MirrorRNN):
    """The RNN of :mod:`ckptbench.workloads.mirror` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return to_device(tree, self.device, self.dtype)


@dataclass(frozen=True)
class TorchLSTM(MirrorLSTM):
    """The LSTM of :mod:`ckptbench.workloads.mirror` on torch tensors on ``device``."""

    device: str = "cpu"
    xp: ClassVar[Any] = torch

    def convert(self, tree: Any) -> Any:
        return to_device(tree, self.device, self.dtype)


class _Call(torch.nn.Module):
    """Runs ``fn(module, *args)`` as its forward, so ``functional_call`` can swap the held
    module's parameters for the tensors the engine differentiates."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.m = module

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(self.m, *args)


class _Held(torch.nn.Module):
    """The modules a workload keeps: ``forward(fn, *args)`` is ``fn(*args)``, so
    ``functional_call`` swaps their parameters while the workload's own ``step`` runs."""

    def __init__(self, modules: list[torch.nn.Module]) -> None:
        super().__init__()
        self.held = torch.nn.ModuleList(modules)

    def forward(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


def _leaves(tree: Any) -> list:
    """Leaves of nested dict/tuple/list containers, dict keys sorted (the framework's order)."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in _leaves(tree[k])]
    if isinstance(tree, tuple | list):
        return [leaf for v in tree for leaf in _leaves(v)]
    return [tree]


def _held_modules(workload: Any) -> list[torch.nn.Module]:
    """The ``nn.Module`` objects a workload keeps: itself, its attributes, and the items of
    attributes that are lists, tuples or dicts (one level)."""
    found: list[torch.nn.Module] = []
    if isinstance(workload, torch.nn.Module):
        return [workload]
    try:
        values = list(vars(workload).values())
    except TypeError:
        return found
    for value in values:
        items = value.values() if isinstance(value, dict) else (
            value if isinstance(value, list | tuple) else (value,))  # fmt: skip
        found.extend(v for v in items if isinstance(v, torch.nn.Module))
    unique: dict[int, torch.nn.Module] = {}
    for m in found:
        unique.setdefault(id(m), m)
    return list(unique.values())


@dataclass(frozen=True)
class TorchPlugin:
    """A user workload run with torch tensors: ``init``'s arrays are moved to ``device``; an
    ``nn.Module`` as params becomes the dict of its named parameters, and a module the
    workload keeps is called with the differentiated tensors (module docstring)."""

    spec: str
    workload: Any
    device: str = "cpu"
    dtype: str = "float64"
    call: list = field(default_factory=list, repr=False, compare=False)  # [_Call|_Held]
    names: list = field(default_factory=list, repr=False, compare=False)  # per params leaf
    notes: list = field(default_factory=list, repr=False, compare=False)  # for the check

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        params, state0, inputs = check_init_result(
            self.workload.init(steps, rng), self.workload.init
        )
        self.call.clear()
        self.names.clear()
        self.notes.clear()
        if isinstance(params, torch.nn.Module):
            module = params.to(self.device)
            # in the case's dtype, as every other floating-point array of the workload
            module = module.to(dtype=getattr(torch, self.dtype))
            named = dict(module.named_parameters())
            frozen = [k for k, p in named.items() if not p.requires_grad]
            if not named:
                raise WorkloadError(
                    f"init returned a {type(module).__name__} without parameters as params: "
                    "there is nothing to differentiate (buffers are not parameters)"
                )
            if len(frozen) == len(named):
                raise WorkloadError(
                    f"every parameter of the {type(module).__name__} init returned is frozen "
                    "(requires_grad=False): there is nothing to differentiate"
                )
            if frozen:
                self.notes.append(
                    f"{len(frozen)} of {len(named)} parameters of the module are frozen "
                    f"(requires_grad=False) and not differentiated: {', '.join(frozen)}"
                )
            self.call.append(_Call(module))
            params = {k: p.detach().clone() for k, p in named.items() if p.requires_grad}
            self.names.extend(f"m.{k}" for k in sorted(params))
            return (params, *to_device((state0, inputs), self.device, self.dtype))
        leaves = _leaves(params)
        frozen = sum(1 for p in leaves
                     if isinstance(p, torch.nn.Parameter) and not p.requires_grad)  # fmt: skip
        if frozen:
            self.notes.append(
                f"params holds {frozen} frozen parameter(s) (requires_grad=False): ckptbench "
                "differentiates every tensor in params; leave them out to keep them frozen"
            )
        held = _held_modules(self.workload)
        if held:
            wrapper = _Held(held)
            own = {id(p): name for name, p in wrapper.named_parameters(remove_duplicate=False)}
            names = [own.get(id(p)) for p in leaves]
            if any(names):
                wrapper.to(device=self.device, dtype=getattr(torch, self.dtype))
                self.call.append(wrapper)
                self.names.extend(names)
                params = _detached(params)
        return to_device((params, state0, inputs), self.device, self.dtype)

    def _run(self, fn: Callable[..., Any], params: Any, *args: Any) -> Any:
        if not self.call:
            return fn(params, *args)
        call = self.call[0]
        if isinstance(call, _Call):
            named = {f"m.{k}": v for k, v in params.items()}
            return torch.func.functional_call(call, named, (fn, *args))
        named = {n: v for n, v in zip(self.names, _leaves(params), strict=True) if n}
        return torch.func.functional_call(call, named, (fn, params, *args))

    def step(self, params: Any, state: Any, x: Any) -> Any:
        return self._run(self.workload.step, params, state, x)

    def post(self, params: Any, state: Any) -> Any:
        return self._run(self.workload.post, params, state)

    def loss(self, outputs: Any) -> Any:
        return self.workload.loss(outputs)


def _detached(tree: Any) -> Any:
    """A copy of a params tree whose tensors are detached clones (the module keeps its own)."""
    if isinstance(tree, dict):
        return {k: _detached(v) for k, v in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(_detached(v) for v in tree)
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    return tree


@dataclass(frozen=True)
class TorchChainPlugin:
    """A user's layer chain (:mod:`ckptbench.workloads.chain`) run with torch tensors: the
    arrays ``init`` returns are moved to ``device`` in ``dtype``."""

    workload: Any
    device: str = "cpu"
    dtype: str = "float64"

    def layer_names(self, layers: int) -> tuple[str, ...]:
        return layer_names(self.workload, layers)

    def init(self, layers: int, rng: Any) -> tuple[list[Any], Any]:
        params, x0 = check_chain_init(self.workload.init(layers, rng), layers, self.workload.init)
        params, x0 = to_device((params, x0), self.device, self.dtype)
        return list(params), x0

    def layer(self, i: int, params: Any, x: Any) -> Any:
        return self.workload.layer(i, params, x)

    def loss(self, x: Any) -> Any:
        return self.workload.loss(x)


def load_torch_workload(
    spec: str, sizes: Sizes, device: str = "cpu", dtype: str = "float64"
) -> Any:
    """The torch workload named by ``spec`` (a built-in of
    :mod:`ckptbench.workloads.registry` or a plug-in) on ``device``, its floating-point
    tensors in ``dtype``.

    Plug-ins follow :func:`ckptbench.workloads.load_workload`'s protocol and errors; a
    factory returning an ``nn.Sequential`` (or a list of modules) is a layer chain
    (:mod:`ckptbench.backends.torch.layers`).
    """
    if not isinstance(sizes, Sizes):
        raise WorkloadError(f"sizes must be a Sizes instance, got {type(sizes).__name__}")
    name = spec.strip() if isinstance(spec, str) else spec
    if registry.is_builtin(name):
        build = registry.factory(name, SPEC.name)
        return build(**sizes.as_kwargs(), device=device, dtype=dtype)
    built = build_workload(name, sizes)
    chain = module_chain(built, sizes.batch, sizes.input, device, dtype)
    if chain is not None:
        return chain
    workload = checked_workload(name, built)
    if is_chain(workload):
        return TorchChainPlugin(workload, device, dtype)
    return TorchPlugin(spec=name, workload=workload, device=device, dtype=dtype)
