"""``build_gradient(case, mode)`` for ``--backend torch``: the worker's contract, in PyTorch.

It returns a :class:`ckptbench.backends.Built`, as the autograd backend does:
``gradient(params)`` returns ``(loss: float, grad)`` where ``grad`` has the structure of
``params`` (a dict of tensors for the built-ins); ``flatten`` (:func:`flatten_gradient`)
turns it into the float64 vector the autograd backend's flattening gives (dict keys sorted,
leaves raveled), so gradients compare across backends; ``calls[0]`` counts step
evaluations; ``counters()`` and ``phases()`` are the executor's counters and phase times
(the names of ``ckptbench.checkpoint.CheckpointStats``; empty for the peer, which keeps
none). On CUDA every gradient ends with a device synchronisation, so wall times are whole.

Modes (see docs/architecture.md):

* ``baseline`` — the unrolled loop under ``torch.no_grad`` and zero gradients: the floor;
* ``normal`` — the unrolled loop with graph recording, ``torch.autograd.grad``;
* ``checkpointed`` — strategies ``revolve``, ``uniform``, ``store-all`` run our action
  streams with :func:`ckptbench.torch_backend.executor.revolve_checkpoint`; strategy
  ``torch-checkpoint`` runs the peer, ``torch.utils.checkpoint`` over ``snaps`` equal
  segments (:mod:`ckptbench.torch_backend.peer`).

What every mode imports, so overheads compare like for like: ``torch``,
``torch.utils.checkpoint``, ``torch._dynamo`` (which the peer's first non-reentrant
``checkpoint`` call would otherwise import mid-measurement: about 800 modules and 70 MiB of
RSS on torch 2.13 CPU), this backend's ``workloads``, ``executor``, ``peer`` and ``cuda``
modules, and ``ckptbench.workloads`` (the numpy initial values, which also loads
``autograd.numpy``: about 3 MiB, 48 modules). All of it happens when this module is
imported, before the worker measures anything. ``torch.set_num_threads(case.threads)`` pins
torch's intra-op pool the way the runner pins BLAS threads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ckptbench.torch_backend import require_torch

require_torch()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (same footprint in every mode; see the docstring)
import torch.utils.checkpoint  # noqa: E402

from ckptbench.backends import (  # noqa: E402
    Built,
    counting,
    loop_counters,
    loop_phases,
    unrolled_outputs,
)
from ckptbench.torch_backend.cuda import (  # noqa: E402
    DevicePeakMeter,
    resolve_device,
    synchronize,
)
from ckptbench.torch_backend.executor import revolve_checkpoint  # noqa: E402
from ckptbench.torch_backend.peer import torch_checkpoint  # noqa: E402
from ckptbench.torch_backend.workloads import load_torch_workload  # noqa: E402
from ckptbench.workloads import Sizes  # noqa: E402

__all__ = [
    "PEER_STRATEGY",
    "STRATEGIES",
    "build_gradient",
    "flatten_gradient",
    "tree_leaves",
]

#: The strategy name of torch's own checkpointing (equal segments, non-reentrant).
PEER_STRATEGY = "torch-checkpoint"

#: Checkpointed-mode strategies of the torch backend.
STRATEGIES: tuple[str, ...] = ("revolve", "uniform", "store-all", PEER_STRATEGY)

_MODES = ("baseline", "normal", "checkpointed")


def tree_leaves(tree: Any) -> list:
    """Leaves of nested dict/tuple/list containers; dict keys sorted, like the worker."""
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in tree_leaves(tree[k])]
    if isinstance(tree, tuple | list):
        return [leaf for v in tree for leaf in tree_leaves(v)]
    return [tree]


def _rebuild(tree: Any, leaves: Any) -> Any:
    """``tree``'s structure filled from the iterator ``leaves`` (sorted-key order)."""
    if isinstance(tree, dict):
        filled = {k: _rebuild(tree[k], leaves) for k in sorted(tree)}
        return {k: filled[k] for k in tree}
    if isinstance(tree, tuple | list):
        return type(tree)(_rebuild(v, leaves) for v in tree)
    return next(leaves)


def flatten_gradient(grad: Any) -> np.ndarray:
    """A gradient tree as one float64 numpy vector, in the autograd worker's order."""
    parts = [
        np.ravel(leaf.detach().cpu().numpy() if isinstance(leaf, torch.Tensor) else leaf)
        for leaf in tree_leaves(grad)
    ]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


def _mode_name(mode: Any) -> str:
    name = getattr(mode, "value", mode)
    if name not in _MODES:
        raise ValueError(f"unknown mode {mode!r} (choose from {', '.join(_MODES)})")
    return name


def build_gradient(case: Any, mode: Any) -> Built:
    """The worker's view of ``case`` in ``mode`` on the torch backend.

    Reads ``case.model, steps, snaps, strategy, hidden, batch, input, output, seed`` and, when
    present, ``case.device`` (default ``"cpu"``) and ``case.threads``.
    """
    name = _mode_name(mode)
    strategy = getattr(case, "strategy", "revolve")
    if name == "checkpointed" and strategy not in STRATEGIES:
        raise ValueError(
            f"strategy {strategy!r} is not available on the torch backend "
            f"(choose from {', '.join(STRATEGIES)})"
        )
    threads = getattr(case, "threads", None)
    if threads:
        torch.set_num_threads(int(threads))
    device = resolve_device(getattr(case, "device", "cpu") or "cpu")
    sizes = Sizes(hidden=case.hidden, batch=case.batch, input=case.input, output=case.output)
    wl = load_torch_workload(case.model, sizes, str(device))
    params, state0, inputs = wl.init(case.steps, np.random.default_rng(case.seed))
    leaves = tree_leaves(params)
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor) or not leaf.is_floating_point():
            raise ValueError(
                f"workload {case.model!r}: every parameter must be a floating-point tensor, "
                f"got {type(leaf).__name__}"
            )
        leaf.requires_grad_(True)
    post, loss_of, steps = wl.post, wl.loss, case.steps
    counted, calls = counting(wl.step)

    def unrolled(p):
        return loss_of(torch.stack(unrolled_outputs(counted, post, p, state0, inputs, steps)))

    def differentiate(value: Callable[[Any], Any]) -> Callable[[Any], tuple[float, Any]]:
        def gradient(p):
            with torch.enable_grad():
                loss = value(p)
                grads = torch.autograd.grad(loss, tree_leaves(p))
            synchronize(device)
            return float(loss.detach()), _rebuild(p, iter(grads))

        return gradient

    loop = None
    if name == "baseline":

        def gradient(p):
            with torch.no_grad():
                loss = unrolled(p)
                zeros = [torch.zeros_like(leaf) for leaf in tree_leaves(p)]
            synchronize(device)
            return float(loss), _rebuild(p, iter(zeros))

    elif name == "normal":
        gradient = differentiate(unrolled)
    else:
        if strategy == PEER_STRATEGY:
            loop = torch_checkpoint(counted, post, steps, case.snaps)
        else:
            loop = revolve_checkpoint(counted, post, steps, case.snaps, strategy)
        gradient = differentiate(lambda p: loss_of(loop(p, state0, inputs)))
    return Built(
        params=params,
        gradient=gradient,
        calls=calls,
        counters=lambda: loop_counters(loop),
        flatten=flatten_gradient,
        phases=lambda: loop_phases(loop),
        device_meter=DevicePeakMeter(device) if device.type == "cuda" else None,
    )
