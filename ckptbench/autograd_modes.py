"""The three modes of a case on the autograd backend, as the worker runs them.

* baseline — the forward loop only, a zero gradient: the memory floor;
* normal — ``autograd.value_and_grad`` of the unrolled loop: every step's tape kept;
* checkpointed — :func:`ckptbench.checkpoint.binomial_checkpoint` with the case's strategy.

Imported only inside the worker of an autograd case (see docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import autograd
import autograd.numpy as anp
import numpy as np

from ckptbench.backends import Built, counting, loop_counters, loop_phases, unrolled_outputs
from ckptbench.checkpoint import binomial_checkpoint
from ckptbench.planner import Costs
from ckptbench.results import Case, Mode
from ckptbench.workloads import Sizes, load_workload

__all__ = ["build_gradient", "flatten", "zeros_like"]


def zeros_like(tree: Any) -> Any:
    """A tree of zero arrays shaped like ``tree`` (dict/tuple/list of arrays)."""
    if isinstance(tree, dict):
        return {k: zeros_like(v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(zeros_like(v) for v in tree)
    return np.zeros_like(tree)


def flatten(tree: Any) -> np.ndarray:
    """All leaves of a tree as one float64 vector (dict keys in sorted order)."""
    if isinstance(tree, dict):
        return np.concatenate([flatten(tree[k]) for k in sorted(tree)])
    if isinstance(tree, (tuple, list)):
        return np.concatenate([flatten(v) for v in tree])
    return np.ravel(np.asarray(tree, dtype=np.float64))


def build_gradient(case: Case, mode: Mode, costs: dict[str, Any] | None = None) -> Built:
    """The worker's view of ``case`` in ``mode``: params, gradient and counters.

    Strategy ``optimal`` plans with ``costs`` (a ``planner.Costs`` document measured by the
    parent in a fresh worker, or read from a costs file) and the case's byte budget.
    """
    wl = load_workload(case.model, Sizes(**case.sizes()))
    params, state0, inputs = wl.init(case.steps, np.random.default_rng(case.seed))
    post, steps = wl.post, case.steps
    counted, calls = counting(wl.step)

    def unrolled(p):
        outs = unrolled_outputs(counted, post, p, state0, inputs, steps)
        # anp.array, not anp.stack: autograd's stack/concatenate vjp is quadratic in the
        # number of pieces (1.4 s extra at 1000 steps here, 16 s at 4000), which would
        # flatter every ratio against normal mode. anp.array's vjp is linear.
        return wl.loss(anp.array(outs))

    loop = None
    if mode is Mode.BASELINE:

        def gradient(p):
            return float(unrolled(p)), zeros_like(p)

    elif mode is Mode.NORMAL:
        gradient = autograd.value_and_grad(unrolled)
    else:
        if case.strategy == "optimal":
            if costs is None:
                raise ValueError("strategy 'optimal' needs measured step costs")
            loop = binomial_checkpoint(
                counted,
                post,
                steps,
                strategy="optimal",
                costs=Costs.from_dict(costs),
                budget_bytes=case.budget_bytes,
            )
        else:
            loop = binomial_checkpoint(counted, post, steps, case.snaps, case.strategy)
        gradient = autograd.value_and_grad(lambda p: wl.loss(loop(p, state0, inputs)))
    return Built(
        params=params,
        gradient=gradient,
        calls=calls,
        counters=lambda: loop_counters(loop),
        flatten=flatten,
        phases=lambda: loop_phases(loop),
        plan=lambda: _loop_plan(loop),
    )


def _loop_plan(loop: Any) -> dict[str, Any]:
    plan = getattr(loop, "plan", None)
    return plan.summary() if plan is not None else {}
