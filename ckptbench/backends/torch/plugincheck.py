"""PyTorch: the plug-in check's PyTorch side (:mod:`ckptbench.workloads.check`, run only in a
disposable worker: it executes the plug-in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckptbench.workloads.check import PluginCheck, PluginProblem
from ckptbench.workloads.frameworks import leaves

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["TorchCheck"]


class TorchCheck(PluginCheck):
    """How the plug-in check loads a torch plug-in, stacks its outputs and differentiates."""

    name = "torch"

    def load(self, case: Case) -> tuple[Any, Any, Any, Any, Any]:
        from ckptbench.backends.torch.framework import TorchFramework

        fw = TorchFramework()
        self.fw = fw
        wl, params, state0, inputs = fw.workload(case, fw.setup(case))
        self.user = wl.workload if hasattr(wl, "workload") else wl
        return (self.user, wl, params, state0, inputs)

    def nonfinite(self, leaf: Any) -> tuple[int, int, Any] | None:
        import torch

        if not isinstance(leaf, torch.Tensor):
            return super().nonfinite(leaf)
        t = leaf.detach()  # counted on its device, in its dtype
        if not (t.is_floating_point() or t.is_complex()):
            return 0, t.numel(), None
        ok = torch.isfinite(t)
        bad = t.numel() - int(ok.count_nonzero().item())
        return bad, t.numel(), t[~ok][0].item() if bad else None

    def stack(self, ys: list[Any]) -> Any:
        import torch

        return torch.stack(ys)

    def value_and_grad(self, f: Callable[[Any], Any], params: Any) -> tuple[Any, Any]:
        import torch

        tensors = leaves(params)
        with torch.enable_grad():
            loss = f(params)
            if not getattr(loss, "requires_grad", False):
                raise PluginProblem(
                    "the loss does not depend on params: step and post must compute with the "
                    "params they are given (an nn.Module: return it, or its parameters, as "
                    f"params){self.at(self.user.step)}"
                )
            grads = torch.autograd.grad(loss, tensors, allow_unused=True)
        return loss, grads
