"""The three modes of a layer chain, written once over a framework's operations.

A chain (:mod:`ckptbench.workloads.chain`) is measured as a recurrence is (see
:mod:`ckptbench.backends.modes`), with the chain's own gradient: the parameters a mode
differentiates are ``{"input": x0, "layers": [params_0, ..., params_{L-1}]}`` (every
layer's parameters and the input), and the loss is ``loss(x_L)``.

* baseline — the layers run once without a tape, a zero gradient;
* normal — the framework's gradient of the unrolled stack (every layer's tape kept);
* checkpointed — our strategies through the framework's chain binding of the engine
  (``chain_checkpoint``): step i of the schedule is layer i; optimal plans from the
  given per-layer costs; or a framework's own checkpointing peer from its chain factory
  (``checkpoint-sequential``, per-layer checkpointing, ...). A peer that checkpoints
  recurrences only is refused here in one line naming the strategies a chain runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ckptbench.backends.contract import counting
from ckptbench.backends.registry import spec as backend_spec
from ckptbench.results.modes import Mode
from ckptbench.schedules import get_strategy, model_kind_refusal

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["chain_loop", "chain_modes"]


def chain_modes(
    fw: Any, case: Case, mode: Mode, wl: Any, params: list, x0: Any, ctx: Any, costs: Any
) -> tuple[Any, Callable[[Any], Any], list, Any]:
    """``(params, gradient, calls, loop)`` of chain ``wl`` in ``mode`` on
    framework ``fw``; ``loop`` is the checkpointed loop (None in the other modes)."""
    layers = case.steps
    counted, calls = counting(wl.layer)

    def forward(p: Any) -> Any:
        x, ps = p["input"], p["layers"]
        for i in range(layers):
            x = counted(i, ps[i], x)
        return wl.loss(x)

    loop = None
    if mode is Mode.BASELINE:
        gradient = fw.value_only(forward, ctx)
    elif mode is Mode.NORMAL:
        gradient = fw.value_and_grad(forward, ctx)
    else:
        loop = chain_loop(fw, case, counted, costs)
        gradient = fw.value_and_grad(lambda p: wl.loss(loop(p["layers"], p["input"])), ctx)
    return {"input": x0, "layers": params}, gradient, calls, loop


def chain_loop(fw: Any, case: Case, layer: Callable, costs: Any) -> Any:
    """The checkpointed loop of ``case.strategy`` over the chain's ``layer``: a peer's from
    its chain factory, ours from the framework's ``chain_checkpoint`` (a planned strategy
    plans from ``costs`` first)."""
    spec = get_strategy(case.strategy)
    refusal = model_kind_refusal(spec.name, backend_spec(fw.name), case.model, chain=True)
    if refusal is not None:
        raise ValueError(refusal)
    if not spec.ours:
        return spec.load_factory(chain=True)(layer, case.steps, case.snaps)
    plan = spec.plan_for(case, costs)
    if plan is not None:
        return fw.chain_checkpoint(layer, case.steps, strategy=spec, plan=plan)
    return fw.chain_checkpoint(layer, case.steps, case.snaps, spec)
