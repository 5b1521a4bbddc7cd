"""``revolve_checkpoint``: run a checkpointing schedule as one ``torch.autograd.Function``.

The executor interprets a :mod:`ckptbench.schedules` action stream (binomial checkpointing,
Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1), 2000; uniform segments and
store-all come from the same vocabulary) with PyTorch, the way ``ckptbench.checkpoint`` does
with autograd (see docs/architecture.md):

* ``forward`` *is* the schedule's first sweep, under ``no_grad``: it computes every output,
  places the snapshots and tapes only the last step (FIRSTURN), whose graph it keeps;
* ``backward`` resumes the same schedule: it reverses step l-1 on that graph, then re-tapes
  one step at a time (YOUTURN), advancing untaped from restored snapshots in between. The
  cotangents of the parameters, the initial state and the inputs come from this one reverse
  sweep. Parameter gradients accumulate in place: every taped step shares one set of detached
  parameter leaves, and torch's ``AccumulateGrad`` adds into their ``.grad`` buffers.

One gradient therefore evaluates ``step`` exactly ``t(l, s) + l`` times with
``strategy="revolve"`` (t from :func:`ckptbench.schedules.optimal_forward_steps`), and keeps at
most ``snaps`` states plus one step's graph alive. ``loop.stats`` has the counters under the
names of ``ckptbench.checkpoint.CheckpointStats``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ckptbench.backends import CheckpointStats, ExecutorCounters
from ckptbench.schedules import Action, ActionKind, StrategySpec, get_strategy, make_schedule
from ckptbench.torch_backend.trees import check_state, flatten_tree, state_signature

__all__ = ["RevolveLoop", "TorchCheckpointStats", "UnknownActionError", "revolve_checkpoint"]


class UnknownActionError(NotImplementedError):
    """The schedule emitted an action kind this executor cannot interpret."""


#: The counters of every executor (``ckptbench.backends.CheckpointStats``).
TorchCheckpointStats = CheckpointStats


@dataclass
class _Turn:
    """One taped step: its input leaves, its outputs and the graph between them."""

    state_leaves: list[torch.Tensor]
    x: torch.Tensor
    new_leaves: list[torch.Tensor]
    y: torch.Tensor


class _Run(ExecutorCounters):
    """Mutable state of one call: the schedule, the snapshots, the taped leaves, the counters."""

    def __init__(self, loop: RevolveLoop, prebuild: Callable, srebuild: Callable, n_p: int):
        super().__init__()
        self.loop = loop
        self.prebuild = prebuild
        self.srebuild = srebuild
        self.n_p = n_p
        self.actions: Iterator[Action] | None = None
        self.slots: dict[int, tuple[int, Any]] = {}  # slot -> (step, state)
        self.turn: _Turn | None = None  # step l-1, taped by the forward pass
        self.param_leaves: list[torch.Tensor] = []
        self.tape_params: Any = None
        self.want_inputs = False
        self.signature: tuple = ()

    def stats(self) -> CheckpointStats:
        lp = self.loop
        return self.frozen(
            lp.steps,
            lp.snaps,
            lp.strategy.name,
            tape_bytes=0,
            peak_stored_bytes=self.peak_live * self.state_bytes,
        )

    def store(self, slot: int, step: int, state: Any) -> None:
        self.slots[slot] = (step, state)
        self.peak_live = max(self.peak_live, len(self.slots))

    def restore(self, slot: int, step: int) -> Any:
        held = self.slots.get(slot)
        if held is None or held[0] != step:
            raise RuntimeError(f"RESTORE of x_{step}: slot {slot} holds {held and held[0]}")
        return held[1]

    def free(self, step: int) -> None:
        """Drop snapshots of x_step: once step is reversed, no action can need them again."""
        for k in [k for k, (st, _) in self.slots.items() if st == step]:
            del self.slots[k]


class _Revolve(torch.autograd.Function):
    """``apply(run, *param_leaves, *state0_leaves, inputs)`` -> stacked outputs."""

    @staticmethod
    def forward(ctx, run: _Run, *args: torch.Tensor) -> torch.Tensor:
        ctx.run = run
        ctx.save_for_backward(*args)
        return run.loop.first_sweep(run, args)

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple:
        run: _Run = ctx.run
        grads = run.loop.reverse_sweep(run, ctx.saved_tensors, g, ctx.needs_input_grad[1:])
        return (None, *grads)


class RevolveLoop:
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs, differentiable by torch.

    ``params`` is a tensor or a nested dict/tuple/list of tensors, ``state0`` a tensor or a
    tuple of tensors, ``inputs`` a tensor whose leading axis is ``steps``. ``stats`` holds the
    counters of the most recent call (updated again after its backward).
    """

    def __init__(
        self,
        step: Callable[[Any, Any, Any], Any],
        post: Callable[[Any, Any], Any],
        steps: int,
        snaps: int,
        strategy: StrategySpec | str = "revolve",
    ) -> None:
        if not callable(step) or not callable(post):
            raise ValueError("step and post must be callables")
        self.step = step
        self.post = post
        self.steps = _positive("steps", steps)
        self.snaps = _positive("snaps", snaps)
        self.strategy = _as_strategy(strategy)
        self.stats: TorchCheckpointStats | None = None

    def __repr__(self) -> str:
        return (
            f"RevolveLoop(steps={self.steps}, snaps={self.snaps}, strategy={self.strategy.name!r})"
        )

    def __call__(self, params: Any, state0: Any, inputs: torch.Tensor) -> torch.Tensor:
        pleaves, prebuild = flatten_tree(params, "params")
        sleaves, srebuild = flatten_tree(state0, "state0")
        if not isinstance(inputs, torch.Tensor) or inputs.dim() == 0:
            raise ValueError("inputs must be a tensor whose leading axis is the step axis")
        if inputs.shape[0] != self.steps:
            raise ValueError(
                f"inputs has leading axis {inputs.shape[0]}, expected steps={self.steps}"
            )
        run = _Run(self, prebuild, srebuild, len(pleaves))
        run.signature = state_signature(sleaves)
        run.state_bytes = sum(t.numel() * t.element_size() for t in sleaves)
        return _Revolve.apply(run, *pleaves, *sleaves, inputs)

    # ------------------------------------------------------------------ forward = first sweep

    def first_sweep(self, run: _Run, args: tuple) -> torch.Tensor:
        """Run the schedule up to FIRSTURN under ``no_grad``; return every step's output."""
        clock = time.perf_counter
        t_enter = clock()
        n_p = run.n_p
        pleaves, sleaves, inputs = args[:n_p], args[n_p:-1], args[-1]
        run.param_leaves = [p.detach().requires_grad_(p.requires_grad) for p in pleaves]
        run.tape_params = run.prebuild(run.param_leaves)
        run.want_inputs = inputs.requires_grad
        run.actions = make_schedule(self.strategy, self.steps, self.snaps)
        params = run.prebuild(list(pleaves))
        state = run.srebuild(list(sleaves))
        step, post = self.step, self.post
        out: torch.Tensor | None = None
        t_prev = clock()
        with torch.no_grad():
            for act in run.actions:
                t0 = clock()
                run.book_s += t0 - t_prev
                kind = act.kind
                if kind is ActionKind.ADVANCE:
                    for i in range(act.start, act.stop):
                        state = step(params, state, inputs[i])
                        if i == 0:
                            check_state(state, run.signature)
                        out = _store_output(out, i, post(params, state), self.steps)
                    run.advanced += act.stop - act.start
                    run.post_calls += act.stop - act.start
                    t_prev = clock()
                    run.advance_s += t_prev - t0
                elif kind is ActionKind.TAKESHOT:
                    run.store(act.slot, act.step, state)
                    t_prev = clock()
                    run.book_s += t_prev - t0
                elif kind is ActionKind.FIRSTURN:
                    run.turn = self._tape(run, state, inputs, act.step)
                    out = _store_output(out, act.step, run.turn.y.detach(), self.steps)
                    run.taped_s += clock() - t0
                    break
                elif kind in _HANDLED:
                    raise RuntimeError(f"unexpected {act!r} in the first sweep")
                else:
                    raise _unknown(act)
        run.executor_s += clock() - t_enter
        self.stats = run.stats()
        return out

    def _tape(self, run: _Run, state: Any, inputs: torch.Tensor, i: int) -> _Turn:
        """Evaluate step i and its output with graph recording, from detached leaves."""
        with torch.enable_grad():
            leaves = [t.detach().requires_grad_() for t in flatten_tree(state, "state")[0]]
            x = inputs[i].detach().requires_grad_(run.want_inputs)
            new = self.step(run.tape_params, run.srebuild(leaves), x)
            check_state(new, run.signature)
            y = self.post(run.tape_params, new)
        run.taped += 1
        return _Turn(leaves, x, flatten_tree(new, "state")[0], y)

    # ------------------------------------------------------------------ reverse sweep

    def reverse_sweep(self, run: _Run, saved: tuple, g: torch.Tensor, needs: tuple) -> list:
        """Resume the schedule after FIRSTURN; return the cotangents of every ``apply`` arg."""
        clock = time.perf_counter
        t_enter = clock()
        n_p = run.n_p
        pleaves, sleaves, inputs = saved[:n_p], saved[n_p:-1], saved[-1]
        if run.turn is None:  # a second backward of the same call (retain_graph)
            self._replace_snapshots(run, pleaves, sleaves, inputs)
        for leaf in run.param_leaves:
            leaf.grad = None
        inputs_bar = torch.zeros_like(inputs) if needs[-1] else None
        state_bar: list[torch.Tensor | None] = [None] * len(sleaves)

        def reverse(turn: _Turn, i: int) -> None:
            nonlocal state_bar
            outs, grads = [], []
            for o, gb in zip(turn.new_leaves, state_bar, strict=True):
                if gb is not None and o.requires_grad:
                    outs.append(o)
                    grads.append(gb)
            if turn.y.requires_grad:
                outs.append(turn.y)
                grads.append(g[i])
            if outs:
                torch.autograd.backward(outs, grads)
            state_bar = [leaf.grad for leaf in turn.state_leaves]
            if inputs_bar is not None and turn.x.grad is not None:
                inputs_bar[i] = turn.x.grad
            run.free(i)

        t0 = clock()
        turn, run.turn = run.turn, None
        reverse(turn, self.steps - 1)
        del turn
        params = run.prebuild(list(pleaves))
        state = None
        step = self.step
        t_prev = clock()
        run.taped_s += t_prev - t0
        with torch.no_grad():
            for act in run.actions:
                t0 = clock()
                run.book_s += t0 - t_prev
                kind = act.kind
                if kind is ActionKind.YOUTURN:
                    reverse(self._tape(run, state, inputs, act.step), act.step)
                    state = None
                    t_prev = clock()
                    run.taped_s += t_prev - t0
                elif kind is ActionKind.ADVANCE:
                    for i in range(act.start, act.stop):
                        state = step(params, state, inputs[i])
                    run.advanced += act.stop - act.start
                    t_prev = clock()
                    run.advance_s += t_prev - t0
                elif kind is ActionKind.RESTORE:
                    state = run.restore(act.slot, act.step)
                    t_prev = clock()
                    run.book_s += t_prev - t0
                elif kind is ActionKind.TAKESHOT:
                    run.store(act.slot, act.step, state)
                    t_prev = clock()
                    run.book_s += t_prev - t0
                elif kind is ActionKind.TERMINATE:
                    break
                elif kind in _HANDLED:
                    raise RuntimeError(f"unexpected {act!r} in the reverse sweep")
                else:
                    raise _unknown(act)
        run.slots.clear()
        result: list[torch.Tensor | None] = []
        for leaf, need in zip(run.param_leaves, needs[:n_p], strict=True):
            result.append(_or_zeros(leaf.grad, leaf) if need else None)
            leaf.grad = None
        for s_bar, s0, need in zip(state_bar, sleaves, needs[n_p:-1], strict=True):
            result.append(_or_zeros(s_bar, s0) if need else None)
        result.append(inputs_bar)
        run.executor_s += clock() - t_enter
        self.stats = run.stats()
        return result

    def _replace_snapshots(self, run: _Run, pleaves, sleaves, inputs) -> None:
        """Re-run the first sweep (no outputs) so the schedule can be reversed once more."""
        run.slots.clear()
        run.actions = make_schedule(self.strategy, self.steps, self.snaps)
        params = run.prebuild(list(pleaves))
        state = run.srebuild(list(sleaves))
        with torch.no_grad():
            for act in run.actions:
                if act.kind is ActionKind.ADVANCE:
                    for i in range(act.start, act.stop):
                        state = self.step(params, state, inputs[i])
                    run.advanced += act.stop - act.start
                elif act.kind is ActionKind.TAKESHOT:
                    run.store(act.slot, act.step, state)
                elif act.kind is ActionKind.FIRSTURN:
                    run.turn = self._tape(run, state, inputs, act.step)
                    return


def revolve_checkpoint(
    step: Callable[[Any, Any, Any], Any],
    post: Callable[[Any, Any], Any],
    steps: int,
    snaps: int,
    strategy: StrategySpec | str = "revolve",
) -> RevolveLoop:
    """Checkpointed ``loop(params, state0, inputs)`` for ``state = step(params, state, x)``.

    ``loop`` returns ``post(params, x_i)`` for i = 1..steps stacked on a new leading axis; a
    torch backward through it yields the gradients of ``params``, ``state0`` and ``inputs``
    (whichever require grad) from one reverse sweep. ``snaps`` counts every snapshot slot
    *including the one holding state0*. With ``strategy="revolve"`` one gradient evaluates
    ``step`` exactly ``optimal_forward_steps(steps, snaps) + steps`` times.

    Example::

        loop = revolve_checkpoint(lstm.step, lstm.post, steps=1000, snaps=31)
        loss = lstm.loss(loop(params, (h0, c0), xs))
        grads = torch.autograd.grad(loss, list(params.values()))   # 2439 + 1000 steps
    """
    return RevolveLoop(step, post, steps, snaps, strategy)


# ---------------------------------------------------------------------- helpers

#: The action kinds this executor interprets; any other kind is an UnknownActionError.
_HANDLED = frozenset(
    {
        ActionKind.ADVANCE,
        ActionKind.TAKESHOT,
        ActionKind.RESTORE,
        ActionKind.FIRSTURN,
        ActionKind.YOUTURN,
        ActionKind.TERMINATE,
    }
)


def _unknown(act: Any) -> UnknownActionError:
    known = ", ".join(sorted(k.name for k in _HANDLED))
    kind = getattr(act.kind, "name", act.kind)
    return UnknownActionError(
        f"the torch executor cannot run action {kind!r} (it knows {known}); "
        "teach ckptbench.torch_backend.executor the new kind"
    )


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _as_strategy(strategy: StrategySpec | str) -> StrategySpec:
    spec = get_strategy(strategy)
    if spec.stream is None:
        raise ValueError(
            f"strategy {spec.name!r} is not an action stream the torch executor runs on snaps"
        )
    return spec


def _store_output(out: torch.Tensor | None, i: int, y: Any, steps: int) -> torch.Tensor:
    if not isinstance(y, torch.Tensor):
        raise ValueError(f"post must return a tensor, got {type(y).__name__}")
    if out is None:
        out = torch.empty((steps, *y.shape), dtype=y.dtype, device=y.device)
    elif y.shape != out.shape[1:]:
        raise ValueError(
            f"post returned shape {list(y.shape)} at step {i}, expected {list(out.shape[1:])}"
        )
    out[i] = y
    return out


def _or_zeros(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if grad is None else grad
