"""The three modes of a case, written once over a framework's few operations.

* baseline — the unrolled loop without a tape and a zero gradient: the memory floor;
* normal — the framework's own gradient of the unrolled loop: every step's tape kept;
* checkpointed — our schedules through the framework's binding of :mod:`ckptbench.engine`
  (``strategy`` revolve, uniform, store-all, or optimal with measured step costs and the
  case's byte budget), or one of the framework's own checkpointing peers.

A :class:`Framework` supplies the operations; :class:`FrameworkBackend` turns it into a
:class:`ckptbench.backends.registry.Backend` (see docs/architecture.md, "Backends").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ckptbench.backends import registry
from ckptbench.backends.chains import chain_modes
from ckptbench.backends.contract import (
    Built,
    attach_recorder,
    counting,
    loop_counters,
    loop_phases,
    unrolled_outputs,
)
from ckptbench.results.modes import MODES, Mode
from ckptbench.schedules import get_strategy
from ckptbench.workloads.chain import is_chain, layer_names

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["Framework", "FrameworkBackend", "as_mode", "binding_executor"]


def as_mode(mode: Mode | str) -> Mode:
    """``mode`` (a :class:`ckptbench.results.modes.Mode` or its value, as the worker's job
    names it) as the enum every backend compares; one line when unknown."""
    if isinstance(mode, Mode):
        return mode
    try:
        return Mode(mode)
    except ValueError:
        names = ", ".join(m.value for m in MODES)
        raise ValueError(f"unknown mode {mode!r} (choose from {names})") from None


class Framework(Protocol):
    """What the generic modes need from a framework (autograd, torch, ...)."""

    name: str

    def setup(self, case: Case) -> Any:
        """Per-case settings (threads, device); returns a context the other calls get."""

    def workload(self, case: Case, ctx: Any) -> tuple[Any, Any, Any, Any]:
        """``(workload, params, state0, inputs)`` for the case, parameters differentiable;
        for a layer chain ``(chain, params per layer, x0, None)``, x0 differentiable too."""

    def stack(self, outputs: list[Any]) -> Any:
        """The per-step outputs stacked on a new leading axis (a linear-time vjp)."""

    def value_and_grad(self, value: Callable[[Any], Any], ctx: Any) -> Callable[[Any], Any]:
        """``params -> (loss: float, gradient tree shaped like params)``."""

    def value_only(self, value: Callable[[Any], Any], ctx: Any) -> Callable[[Any], Any]:
        """``params -> (loss, zero tree)`` without recording a tape (baseline)."""

    def untaped_outputs(
        self, step: Callable, post: Callable, params: Any, state0: Any, inputs: Any, steps: int
    ) -> Any:
        """The baseline's untaped loop, its outputs written into one buffer allocated once;
        ``None`` as the attribute (autograd) means the baseline stacks like normal mode."""

    def checkpoint(self, step: Callable, post: Callable, steps: int, *args, **kw) -> Any:
        """The framework's binding of the engine (``binomial_checkpoint``'s arguments)."""

    def chain_checkpoint(self, layer: Callable, layers: int, *args, **kw) -> Any:
        """The framework's binding of the engine for a layer chain (``loop(params, x0)``)."""

    def chain_ops(self, layer: Callable, layers: int, params: list) -> Any:
        """The chain executor's own step operations over ``params`` (``tape``, ``reverse``),
        for the per-layer costs (:mod:`ckptbench.measure.layercosts`)."""

    def flatten(self, grad: Any) -> Any:
        """A gradient tree as one float64 numpy vector (dict keys sorted)."""

    def device_meter(self, ctx: Any) -> Any:
        """A device-memory meter for the worker (``None`` on the CPU)."""

    def device_problem(self, device: str) -> str | None:
        """Why the framework cannot compute on ``device`` here (None when it can)."""

    def measure_costs(self, case: Case) -> dict[str, Any]:
        """The planner's step costs measured on this framework."""

    # the step-cost measurement (ckptbench.measure.stepcosts) calls these four:

    #: how ``tape_nbytes`` counts (e.g. "saved-tensors"); None where it returns None
    tape_method: str | None

    def untaped(self) -> Any:
        """A context in which steps record no tape."""

    def state_nbytes(self, state: Any) -> int:
        """The bytes one state holds."""

    def tape_nbytes(
        self, step: Callable, post: Callable, params: Any, state: Any, x: Any
    ) -> int | None:
        """The bytes one kept tape holds, counted by the framework (None: measure a peak
        slope instead)."""

    def layer_tape_nbytes(self, layer: Callable, i: int, params: Any, x: Any) -> int | None:
        """The bytes one kept tape of a chain's layer ``i`` holds, counted by the framework
        (None: measure a peak slope instead)."""


class FrameworkBackend:
    """A :class:`ckptbench.backends.registry.Backend` made of a :class:`Framework`."""

    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.name = framework.name

    def device_problem(self, case: Case) -> str | None:
        """Why the framework cannot compute on ``case.device`` here (None when it can)."""
        return self.framework.device_problem(case.device)

    def strategies(self) -> tuple[str, ...]:
        """Checkpointed-mode strategies: our schedules and the peers declared for this
        backend (``schedules.peers``), from the strategy registry."""
        return registry.strategies(self.name)

    def build_gradient(self, case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Built:
        """The worker's view of ``case`` in ``mode``: params, gradient and counters.

        Reads ``case.model, steps, snaps, strategy, budget_bytes, seed`` and the sizes;
        strategy ``optimal`` plans with ``costs`` and the case's byte budget.
        """
        fw = self.framework
        name = as_mode(mode)
        strategy = getattr(case, "strategy", "revolve")
        if name is Mode.CHECKPOINTED:
            registry.check_strategy(self.name, strategy)
        ctx = fw.setup(case)
        wl, params, state0, inputs = fw.workload(case, ctx)
        if is_chain(wl):
            if name is Mode.CHECKPOINTED and (other := binding_executor(case)):
                # a plug-in's chain, known only now (built-ins are refused with the case)
                raise ValueError(
                    f"--model {case.model} is a layer chain: on {self.name} our schedules "
                    f"run a chain with --executor engine, not {other}"
                )
            params, gradient, calls, loop = chain_modes(
                fw, case, name, wl, params, state0, ctx, costs
            )
            names = layer_names(wl, case.steps)  # a trace's step labels
            return self._built(params, gradient, calls, loop, ctx, names.__getitem__)
        post, steps = wl.post, case.steps
        counted, calls = counting(wl.step)

        def unrolled(p: Any) -> Any:
            return wl.loss(fw.stack(unrolled_outputs(counted, post, p, state0, inputs, steps)))

        untaped = fw.untaped_outputs

        def forward_only(p: Any) -> Any:
            # one output buffer instead of one small array per step: on torch those small
            # arrays, kept while each step's large temporaries are freed, fragmented glibc's
            # heap and moved the baseline's peak by 40-120 MiB between iterations
            return wl.loss(untaped(counted, post, p, state0, inputs, steps))

        loop = None
        if name is Mode.BASELINE:
            gradient = fw.value_only(unrolled if untaped is None else forward_only, ctx)
        elif name is Mode.NORMAL:
            gradient = fw.value_and_grad(unrolled, ctx)
        else:

            def one_tape() -> int | None:  # uncounted: a probe, not one of the gradient's steps
                return fw.tape_nbytes(wl.step, post, params, state0, inputs[0])

            loop = self.checkpointed_loop(case, counted, post, costs, one_tape)
            gradient = fw.value_and_grad(lambda p: wl.loss(loop(p, state0, inputs)), ctx)
        return self._built(params, gradient, calls, loop, ctx)

    def _built(
        self, params: Any, gradient: Any, calls: list, loop: Any, ctx: Any, label: Any = None
    ) -> Built:
        fw = self.framework
        return Built(
            params=params,
            gradient=gradient,
            calls=calls,
            counters=lambda: loop_counters(loop),
            flatten=fw.flatten,
            # host clocks around asynchronous launches (CUDA) are not phase times: left out
            phases=(lambda: loop_phases(loop)) if _host_clocked(fw, ctx) else dict,
            plan=lambda: _loop_plan(loop),
            device_meter=fw.device_meter(ctx),
            trace=lambda recorder: attach_recorder(loop, recorder),
            step_label=label,
        )

    def checkpointed_loop(
        self, case: Case, step: Callable, post: Callable, costs: dict[str, Any] | None,
        one_tape: Callable[[], int | None] | None = None,
    ) -> Any:  # fmt: skip
        """The checkpointed loop of ``case.strategy`` over ``step`` and ``post``: a peer's
        from its factory; ours from the binding, given the plan the strategy makes from
        ``costs`` first where it plans (the engine receives a stream, never plans). A
        strategy set by snaps declares one tape's bytes for ``peak_stored_bytes`` where the
        framework counts them (``one_tape``: torch's saved tensors; autograd's are None)."""
        spec = get_strategy(case.strategy)
        if not spec.ours:
            return spec.load_factory()(step, post, case.steps, case.snaps)
        plan = spec.plan_for(case, costs)
        executor = binding_executor(case)
        kw = {} if executor is None else {"executor": executor}
        if plan is not None:
            return self.framework.checkpoint(step, post, case.steps, strategy=spec, plan=plan, **kw)
        tape_bytes = one_tape() if one_tape is not None else None
        if tape_bytes:
            kw["tape_bytes"] = tape_bytes
        return self.framework.checkpoint(step, post, case.steps, case.snaps, spec, **kw)

    def measure_costs(self, case: Case) -> dict[str, Any]:
        return self.framework.measure_costs(case)


def binding_executor(case: Case) -> str | None:
    """The executor beside the engine binding every framework has that ``case`` runs (torch:
    one-call), by ``--executor`` or as its device's default; None for the engine binding.
    What the framework's ``checkpoint`` is told, and what its step costs are timed through."""
    executor = getattr(case, "executor_used", None) or getattr(case, "executor", None)
    return None if executor in (None, "engine") else executor


def _host_clocked(fw: Any, ctx: Any) -> bool:
    """Whether the engine's host clocks time the work itself (not on an asynchronous
    device: a framework says so with ``phases_on_host(ctx)``)."""
    check = getattr(fw, "phases_on_host", None)
    return True if check is None else bool(check(ctx))


def _loop_plan(loop: Any) -> dict[str, Any]:
    plan = getattr(loop, "plan", None)
    return plan.summary() if plan is not None else {}
