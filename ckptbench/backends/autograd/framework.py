"""The autograd backend: the framework operations the generic modes and step costs need.

:data:`BACKEND` is registered as ``autograd`` in :mod:`ckptbench.backends.registry`; the
three modes come from :mod:`ckptbench.backends.modes` and our schedules run through
:func:`ckptbench.backends.autograd.binding.binomial_checkpoint` (autograd's binding of the engine).
Imported only inside the worker of an autograd case (see docs/architecture.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import autograd
import autograd.numpy as anp
import numpy as np

from ckptbench.backends.autograd.binding import binomial_checkpoint
from ckptbench.backends.autograd.chain import chain_checkpoint, chain_ops
from ckptbench.backends.modes import FrameworkBackend
from ckptbench.workloads import Sizes, load_workload, state_nbytes
from ckptbench.workloads.chain import check_chain_init, is_chain, layer_names

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["BACKEND", "AutogradFramework", "build_gradient", "flatten", "zeros_like"]


def zeros_like(tree: Any) -> Any:
    """A tree of zero arrays shaped like ``tree`` (dict/tuple/list of arrays)."""
    if isinstance(tree, dict):
        return {k: zeros_like(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(zeros_like(v) for v in tree)
    return np.zeros_like(tree)


def flatten(tree: Any) -> np.ndarray:
    """All leaves of a tree as one float64 vector (dict keys in sorted order); an empty
    dict or list (a chain's layer without parameters) adds nothing."""
    if isinstance(tree, dict):
        parts = [flatten(tree[k]) for k in sorted(tree)]
    elif isinstance(tree, (tuple, list)):
        parts = [flatten(v) for v in tree]
    else:
        return np.ravel(np.asarray(tree, dtype=np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


class AutogradFramework:
    """autograd's operations for :class:`ckptbench.backends.modes.FrameworkBackend`."""

    name = "autograd"
    checkpoint = staticmethod(binomial_checkpoint)
    chain_checkpoint = staticmethod(chain_checkpoint)
    chain_ops = staticmethod(chain_ops)
    flatten = staticmethod(flatten)
    untaped_outputs = None  # the baseline stacks its outputs like normal mode
    tape_method = None  # tape_nbytes counts nothing: stepcosts measures a peak slope

    def setup(self, case: Case) -> None:
        return None

    def workload(self, case: Case, ctx: Any) -> tuple[Any, Any, Any, Any]:
        wl = load_workload(case.model, Sizes(**case.sizes()))
        rng = np.random.default_rng(case.seed)
        if is_chain(wl):
            params, x0 = check_chain_init(wl.init(case.steps, rng), case.steps, wl.init)
            return wl, params, x0, None
        return (wl, *wl.init(case.steps, rng))

    def stack(self, outputs: list[Any]) -> Any:
        # anp.array, not anp.stack: autograd's stack/concatenate vjp is quadratic in the
        # number of pieces (1.4 s extra at 1000 steps here, 16 s at 4000), which would
        # flatter every ratio against normal mode. anp.array's vjp is linear.
        return anp.array(outputs)

    def value_and_grad(self, value: Callable[[Any], Any], ctx: Any) -> Callable[[Any], Any]:
        return autograd.value_and_grad(value)

    def value_only(self, value: Callable[[Any], Any], ctx: Any) -> Callable[[Any], Any]:
        def gradient(p: Any) -> tuple[float, Any]:
            return float(value(p)), zeros_like(p)

        return gradient

    def device_meter(self, ctx: Any) -> None:
        return None

    def device_problem(self, device: str) -> str | None:
        return None if device == "cpu" else f"autograd runs on the CPU only, not {device}"

    # ---------------------------------------------------------------- step costs

    def untaped(self) -> contextlib.AbstractContextManager:
        """autograd records nothing outside a gradient: plain calls are untaped."""
        return contextlib.nullcontext()

    def state_nbytes(self, state: Any) -> int:
        return state_nbytes(state)

    def tape_nbytes(self, step, post, params, state, x) -> int | None:
        """None: autograd's tape size is measured as a peak-memory slope (stepcosts)."""
        return None

    def layer_tape_nbytes(self, layer, i, params, x) -> int | None:
        """None: a layer's tape is measured as a peak-memory slope (layercosts)."""
        return None

    def measure_costs(self, case: Case) -> dict[str, Any]:
        wl, params, state0, inputs = self.workload(case, None)
        if is_chain(wl):  # one value per layer of each cost
            from ckptbench.measure.layercosts import measure_layer_costs

            names = layer_names(wl, case.steps)
            return measure_layer_costs(wl, params, state0, framework=self, names=names).as_dict()
        from ckptbench.measure.stepcosts import measure_step_costs

        return measure_step_costs(wl, params, state0, inputs, framework=self).as_dict()


#: The registered autograd backend (``ckptbench.backends.registry``).
BACKEND = FrameworkBackend(AutogradFramework())


def build_gradient(case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Any:
    """``BACKEND.build_gradient``: the worker's view of ``case`` in ``mode`` on autograd."""
    return BACKEND.build_gradient(case, mode, costs)
