"""The torch backend: the framework operations the generic modes and step costs need.

:data:`BACKEND` is registered as ``torch`` in :mod:`ckptbench.backends.registry`; the three
modes come from :mod:`ckptbench.backends.modes` (written once for every backend):
``gradient(params)`` returns ``(loss: float, grad)`` where ``grad`` has the structure of
``params``; ``flatten`` (:func:`flatten_gradient`) turns it into the float64 vector the
autograd backend's flattening gives (dict keys sorted, leaves raveled), so gradients
compare across backends. On CUDA every gradient ends with a device synchronisation, so
wall times are whole.

Checkpointed strategies: ``revolve``, ``uniform``, ``store-all`` and ``optimal`` run our
action streams through :func:`ckptbench.backends.torch.binding.revolve_checkpoint` (torch's
binding of :mod:`ckptbench.engine.interpreter`); ``torch-checkpoint`` runs the peer,
``torch.utils.checkpoint`` over ``snaps`` equal segments (:mod:`.peers`, declared with its
factory in :mod:`ckptbench.schedules.peers`).

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
from typing import TYPE_CHECKING, Any

from ckptbench.backends.torch import require_torch

require_torch()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch._dynamo  # noqa: E402  (same footprint in every mode; see the docstring)
import torch.utils.checkpoint  # noqa: E402

import ckptbench.backends.torch.peers  # noqa: E402, F401  (the peer's module, in every mode)
from ckptbench.backends import Built  # noqa: E402
from ckptbench.backends.modes import FrameworkBackend, binding_executor  # noqa: E402
from ckptbench.backends.torch.binding import revolve_checkpoint  # noqa: E402
from ckptbench.backends.torch.chain import chain_checkpoint, chain_ops  # noqa: E402
from ckptbench.backends.torch.device import (  # noqa: E402
    DevicePeakMeter,
    cuda_available,
    resolve_device,
    synchronize,
)
from ckptbench.backends.torch.tapes import layer_tape_nbytes, tape_nbytes  # noqa: E402
from ckptbench.backends.torch.workloads import load_torch_workload  # noqa: E402
from ckptbench.workloads import Sizes, WorkloadError  # noqa: E402
from ckptbench.workloads.chain import check_chain_init, is_chain, layer_names  # noqa: E402

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = [
    "BACKEND",
    "TorchFramework",
    "build_gradient",
    "flatten_gradient",
    "tree_leaves",
]


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
        np.ravel(_host(leaf) if isinstance(leaf, torch.Tensor) else leaf)
        for leaf in tree_leaves(grad)
    ]
    return np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])


def _host(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds it exactly
        t = t.float()
    return t.numpy()


def _differentiable(model: str, leaves: list) -> None:
    """Every leaf a floating-point tensor that requires grad, or a one-line WorkloadError."""
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor) or not leaf.is_floating_point():
            got = (f"a tensor of dtype {str(leaf.dtype).replace('torch.', '')}"
                   if isinstance(leaf, torch.Tensor) else type(leaf).__name__)  # fmt: skip
            raise WorkloadError(
                f"workload {model!r}: every parameter must be a floating-point tensor, got {got}"
            )
        leaf.requires_grad_(True)


class TorchFramework:
    """torch's operations for :class:`ckptbench.backends.modes.FrameworkBackend`."""

    name = "torch"
    checkpoint = staticmethod(revolve_checkpoint)
    chain_checkpoint = staticmethod(chain_checkpoint)
    chain_ops = staticmethod(chain_ops)
    flatten = staticmethod(flatten_gradient)
    tape_method = "saved-tensors"

    def setup(self, case: Case) -> torch.device:
        """Pin torch's threads to ``case.threads`` and seed torch's global generator with
        ``case.seed`` (a plug-in's modules, built with torch's default initialisation, get
        the same parameters in every worker); the case's device (default cpu)."""
        threads = getattr(case, "threads", None)
        if threads:
            torch.set_num_threads(int(threads))
        torch.manual_seed(int(getattr(case, "seed", 0) or 0))
        return resolve_device(case.device)

    def workload(self, case: Case, device: torch.device) -> tuple[Any, Any, Any, Any]:
        sizes = Sizes(hidden=case.hidden, batch=case.batch, input=case.input, output=case.output)
        dtype = getattr(case, "dtype", "float64") or "float64"
        wl = load_torch_workload(case.model, sizes, str(device), dtype)
        rng = np.random.default_rng(case.seed)
        if is_chain(wl):  # a layer chain: (params per layer, x0), x0 differentiated too
            params, state0 = check_chain_init(wl.init(case.steps, rng), case.steps, wl.init)
            inputs = None
            _differentiable(case.model, [*tree_leaves(params), state0])
            return wl, params, state0, inputs
        params, state0, inputs = wl.init(case.steps, rng)
        _differentiable(case.model, tree_leaves(params))
        return wl, params, state0, inputs

    def stack(self, outputs: list[Any]) -> torch.Tensor:
        return torch.stack(outputs)

    def value_and_grad(self, value: Callable[[Any], Any], device: Any) -> Callable[[Any], Any]:
        def gradient(p: Any) -> tuple[float, Any]:
            with torch.enable_grad():
                loss = value(p)
                grads = torch.autograd.grad(loss, tree_leaves(p))
            if device is not None:
                synchronize(device)
            return float(loss.detach()), _rebuild(p, iter(grads))

        return gradient

    def untaped_outputs(self, step, post, params, state0, inputs, steps: int) -> torch.Tensor:
        """The baseline's loop (run under ``no_grad``): each step's output copied into one
        ``(steps, *output)`` buffer allocated at the first step, the step's own output freed.

        Kept as ``steps`` separate tensors, those small allocations land between the large
        per-step temporaries glibc frees, so the heap cannot reuse the holes and the
        baseline's peak moved by 40-120 MiB from one iteration to the next (torch 2.13 CPU);
        with the buffer its iterations repeat within 1 MiB (docs/results/torch-memory.md).
        """
        state, out = state0, None
        for i in range(steps):
            state = step(params, state, inputs[i])
            y = post(params, state)
            if out is None:
                out = y.new_empty((steps, *y.shape))
            out[i] = y
        return out

    def value_only(self, value: Callable[[Any], Any], device: Any) -> Callable[[Any], Any]:
        def gradient(p: Any) -> tuple[float, Any]:
            with torch.no_grad():
                loss = value(p)
                zeros = [torch.zeros_like(leaf) for leaf in tree_leaves(p)]
            synchronize(device)
            return float(loss), _rebuild(p, iter(zeros))

        return gradient

    def phases_on_host(self, device: torch.device) -> bool:
        """The engine's phase times are host clocks: on CUDA they would time kernel
        launches, not kernels, so they are left out there (the iteration's wall time ends
        with a synchronisation and is whole)."""
        return device.type != "cuda"

    def device_meter(self, device: torch.device) -> DevicePeakMeter | None:
        return DevicePeakMeter(device) if device.type == "cuda" else None

    def device_problem(self, device: str) -> str | None:
        if device == "cpu" or cuda_available():
            return None
        what = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
        return f"torch {torch.__version__} ({what}) sees no CUDA device here"

    # ---------------------------------------------------------------- step costs

    def untaped(self) -> Any:
        return torch.no_grad()

    def state_nbytes(self, state: Any) -> int:
        return sum(t.numel() * t.element_size() for t in tree_leaves(state))

    def tape_nbytes(self, step, post, params, state, x) -> int:
        """Bytes one kept tape holds: see :func:`ckptbench.backends.torch.tapes.tape_nbytes`."""
        return tape_nbytes(step, post, params, state, x)

    def layer_tape_nbytes(self, layer, i, params, x) -> int:
        """Bytes one kept tape of a chain's layer holds: see
        :func:`ckptbench.backends.torch.tapes.layer_tape_nbytes`."""
        return layer_tape_nbytes(layer, i, params, x)

    def measure_costs(self, case: Case) -> dict[str, Any]:
        device = self.setup(case)
        wl, params, state0, inputs = self.workload(case, device)
        # on CUDA every timed region ends with the device (synchronize), never at a launch
        sync = (lambda: synchronize(device)) if device.type == "cuda" else None
        if is_chain(wl):  # one value per layer of each cost
            from ckptbench.measure.layercosts import measure_layer_costs

            return measure_layer_costs(
                wl, params, state0, framework=self, names=layer_names(wl, case.steps),
                device_sync=sync,
            ).as_dict()  # fmt: skip
        from ckptbench.measure.stepcosts import measure_step_costs

        report = measure_step_costs(  # timed through the executor that will run the plan
            wl, params, state0, inputs, framework=self, device_sync=sync,
            executor=binding_executor(case),
        )  # fmt: skip
        return report.as_dict()


#: The registered torch backend (``ckptbench.backends.registry``).
BACKEND = FrameworkBackend(TorchFramework())


def build_gradient(case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Built:
    """``BACKEND.build_gradient``: the worker's view of ``case`` in ``mode`` on torch.

    Reads ``case.model, steps, snaps, strategy, hidden, batch, input, output, seed`` and, when
    present, ``case.device`` (default ``"cpu"``), ``case.threads`` and ``case.budget_bytes``.
    """
    return BACKEND.build_gradient(case, mode, costs)
