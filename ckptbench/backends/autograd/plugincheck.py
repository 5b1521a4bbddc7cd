"""autograd: the plug-in check's numpy side (:mod:`ckptbench.workloads.check`, run only in
a disposable worker: it executes the plug-in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptbench.workloads import Sizes
from ckptbench.workloads.base import check_init_result
from ckptbench.workloads.chain import check_chain_init, is_chain
from ckptbench.workloads.check import PluginCheck, PluginProblem
from ckptbench.workloads.frameworks import frameworks_in, wrong_backend

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["AutogradCheck"]


class AutogradCheck(PluginCheck):
    """How the plug-in check loads a numpy plug-in, stacks its outputs and differentiates."""

    name = "autograd"

    def load(self, case: Case) -> tuple[Any, Any, Any, Any, Any]:
        from ckptbench.workloads import load_workload

        wl = load_workload(case.model, Sizes(**case.sizes()))
        self.user = wl
        rng = np.random.default_rng(case.seed)
        if is_chain(wl):
            return (wl, wl, *check_chain_init(wl.init(case.steps, rng), case.steps, wl.init), None)
        drawn = check_init_result(wl.init(case.steps, rng), wl.init)
        found = frameworks_in(drawn) - {"autograd"}
        if found:
            raise PluginProblem(wrong_backend(sorted(found)[0], "autograd"))
        return (wl, wl, *drawn)

    def stack(self, ys: list[Any]) -> Any:
        import autograd.numpy as anp

        return anp.stack(ys)

    def value_and_grad(self, f: Callable[[Any], Any], params: Any) -> tuple[Any, Any]:
        from autograd import value_and_grad

        return value_and_grad(f)(params)
