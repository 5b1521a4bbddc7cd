"""Every mode's code touched once in every worker, before anything is measured.

A mode's peak is its RSS high-water mark, and RSS counts the pages of the framework's shared
libraries a process has executed as well as the memory it allocated. The first gradient a
worker runs (its warm-up iteration) maps in the machine code its mode calls: on torch 2.13
CPU, an 8-layer mlp-stack of width 8 touched 5.8 MiB of ``libtorch_cpu.so`` in the baseline
(forward only), 8.6 MiB in normal mode (the backward kernels too) and 10.8 MiB (+1.3 MiB of
``libtorch_python.so``) under ``checkpoint_sequential`` (saved-tensor hooks, the
checkpoint's dispatch). Those pages stay resident, so every measured iteration started that
much higher, and a peer's overhead over the baseline read +6.0 MiB against normal's +2.8 MiB
where no gradient grew the RSS by more than 12 KiB: the code of a library, paid once per
process whatever the model's size, charged as the gradient's memory.

:func:`prime` runs a miniature of the case (:func:`miniature`: the same model, backend,
device, dtype, executor and strategy, a few layers or steps of width 8 and batch 2) once in
each of the three modes, in every worker of a backend whose spec asks for it
(``BackendSpec.primes_modes``: torch), before the worker's data is built and its
``ready`` event sent. Every mode then starts its measured iterations with the same code
resident, and a mode's overhead is what its gradient adds at the case's size. What the
miniature cannot touch stays charged: code only a larger size runs (a kernel chosen by
shape), and a plug-in's own code, which is never run at sizes it was not asked for (a
plug-in case is not primed). docs/measuring.md, "The same code resident in every mode".
"""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import TYPE_CHECKING

from ckptbench.backends import registry
from ckptbench.results.modes import MODES
from ckptbench.schedules import STRATEGIES, get_strategy
from ckptbench.workloads.registry import is_builtin

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["MINIATURE", "miniature", "prime"]

#: The miniature's sizes: each at most this (never more than the case's own).
MINIATURE = {"steps": 4, "snaps": 2, "hidden": 8, "batch": 2, "input": 8, "output": 2}


def miniature(case: Case) -> Case | None:
    """``case`` shrunk to :data:`MINIATURE` (same model, backend, device, dtype, executor,
    strategy), or None for a plug-in model. A strategy that plans from measured costs is
    replaced by the first of ours on the backend that needs none (the same engine and
    binding run it; a miniature has no costs to plan with)."""
    if not is_builtin(case.model):
        return None
    small = {k: min(getattr(case, k), v) for k, v in MINIATURE.items()}
    spec = get_strategy(case.strategy)
    if spec.planned:
        runs = registry.spec(case.backend)
        spec = next(s for s in STRATEGIES.values() if s.ours and not s.planned and s.runs_on(runs))
        small["budget_bytes"] = None
    mini = replace(case, **small, strategy=spec.name, trace=False, memory_limit_bytes=None)
    return mini.effective()[0]


def prime(case: Case) -> bool:
    """Run :func:`miniature` of ``case`` once in every mode when its backend asks for it
    (``primes_modes``); True when it ran. Whatever the miniature leaves is collected."""
    if not registry.spec(case.backend).primes_modes:
        return False
    mini = miniature(case)
    if mini is None:
        return False
    for mode in MODES:
        built = registry.build(mini, mode, None)
        built.gradient(built.params)
        del built
    gc.collect()  # the loops' closures hold cycles: free them before the case is built
    return True
