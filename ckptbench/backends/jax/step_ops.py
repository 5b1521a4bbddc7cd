"""The engine's step operations on JAX: what :mod:`ckptbench.backends.jax.dispatch`'s loop hands
the shared interpreter (:class:`ckptbench.engine.steps.StepOps`).

Each operation dispatches one or a few compiled executables (a run of ``n`` untaped steps:
one call per set bit of ``n``), or, inside a fused window (:mod:`.fusion`), is recorded
and runs with the whole window as one call.
"""

from __future__ import annotations

from typing import Any

import jax

from ckptbench.backends.jax.fusion import Lazy, Window

__all__ = ["JaxStepOps", "pieces", "value_of", "windowed"]


def pieces(n: int) -> list[int]:
    """``n`` as powers of two, largest first (one dispatch each)."""
    return [1 << b for b in range(n.bit_length() - 1, -1, -1) if n >> b & 1]


def value_of(x: Any) -> Any:
    """A recorded operation's value once its window ran; anything else as it is."""
    if isinstance(x, Lazy):
        if not x.ready:
            raise RuntimeError("a fused window's value was read before the window ran")
        return x.value
    return x


class JaxStepOps:
    """The engine's step operations on JAX (see
    :class:`ckptbench.engine.steps.StepOps`; ``ex``: the loop's compiled pieces,
    ``dispatch._Executables``): every
    call dispatches one or a few compiled executables and returns device arrays; inside a
    fused window (``window`` set, :mod:`.fusion`) it records the operation instead and
    returns :class:`~.fusion.Lazy` values, and :meth:`flush` runs the window as one call."""

    def __init__(self, ex: Any, params: Any, inputs: Any, idx: list, want_x: bool):
        self.ex, self.p, self.xs, self.idx = ex, params, inputs, idx
        self.dispatches = 0
        self.state0: Any = None
        self.state_bytes = 0
        self.zero_s: Any = None
        self.ys: Any = None
        self.g: Any = None
        self.inv: Any = None
        self.pbar: Any = None
        self.xsbar: Any = None
        self.want_x = want_x
        self.window: Window | None = None
        self.fold_runs = True  # a window's runs of kept tapes as one scan's vjp (.fusion)

    def flush(self) -> None:
        """Run the recorded window as one compiled call (compiled on the first occurrence
        of its program key); its values still referenced get their arrays."""
        w, self.window = self.window, None
        if w is None or not w.nodes:
            return
        outputs = w.live()
        key = (w.program_key(outputs), self.fold_runs)  # folded or not: two programs
        base = self.idx[min(w.indices)]
        fn = self.ex.fused.get(key)
        if fn is None:
            program = w.program(outputs, self.ex.impls, self.fold_runs)
            donate = tuple(1 + j for j in sorted(w.donated))
            jitted = jax.jit(program, donate_argnums=donate)
            fn = self.ex.fused[key] = jitted.lower(base, *w.outside).compile()
        values = fn(base, *w.outside)
        for lazy, value in zip(outputs, values, strict=True):
            lazy.value = value
        self.dispatches += 1

    def advance(self, state: Any, start: int, stop: int, outputs: bool) -> Any:
        w = self.window
        if w is not None:
            static = (stop - start, outputs)
            if outputs:
                args = (self.p, state, self.xs, self.ys)
                state, self.ys = w.add("advance", static, start, args, 2, donate=(3,))
                return state
            return w.add("advance", static, start, (self.p, state, self.xs), 1)[0]
        i, state = start, value_of(state)
        for n in pieces(stop - start):
            fn = self.ex.advance(n, outputs)
            if outputs:
                state, self.ys = fn(self.p, state, self.xs, self.ys, self.idx[i])
            else:
                state = fn(self.p, state, self.xs, self.idx[i])
            self.dispatches += 1
            i += n
        return state

    def tape(self, state: Any, i: int, outputs: bool) -> tuple[Any, Any]:
        ex, first, w = self.ex, self.inv is None, self.window
        if w is not None:
            # (saved, x_{i+1}[, readouts], invariant leaves: None unless first)
            if outputs:
                args = (self.p, state, self.xs, self.ys)
                made = w.add("tape", (True, first), i, args, 4, donate=(3,))
                self.ys = made[2]
            else:
                made = w.add("tape", (False, first), i, (self.p, state, self.xs), 3)
            if first:
                self.inv = made[-1]
            return made[0], made[1]
        self.dispatches += 1
        state = value_of(state)
        if outputs:
            fn = ex.tape_out_inv if first else ex.tape_out
            saved, s1, self.ys, inv = fn(self.p, state, self.xs, self.ys, self.idx[i])
        else:
            fn = ex.tape_inv if first else ex.tape
            saved, s1, inv = fn(self.p, state, self.xs, self.idx[i])
        if first:
            self.inv = inv
        return saved, s1

    def _sbar(self, state_bar: Any) -> Any:
        return self.zero_s if state_bar is None else state_bar

    def reverse(self, tape: Any, state_bar: Any, i: int) -> Any:
        args = (self.p, tape, self.inv, self.xs, self.g, self._sbar(state_bar))
        return self._reverse("reverse", self.ex.reverse, args, i)

    def turn(self, state: Any, state_bar: Any, i: int) -> Any:
        """Tape step ``i`` from ``state`` and reverse it at once (one fused call)."""
        args = (self.p, state, self.xs, self.g, self._sbar(state_bar))
        return self._reverse("turn", self.ex.turn, args, i)

    def _reverse(self, kind: str, fn: Any, args: tuple, i: int) -> Any:
        w = self.window
        if w is not None:
            n = len(args)
            args = (*args, self.pbar, self.xsbar)
            gs, self.pbar, self.xsbar = w.add(kind, (), i, args, 3, donate=(n, n + 1))
            return gs
        self.dispatches += 1
        args = tuple(value_of(a) for a in args)
        gs, self.pbar, self.xsbar = fn(
            *args[:-1], self.idx[i], args[-1], value_of(self.pbar), value_of(self.xsbar)
        )
        return gs

    def state_nbytes(self, state: Any) -> int:
        if isinstance(state, Lazy):
            return self.state_bytes  # a recurrence's states all have x_0's shapes
        return sum(int(a.size) * a.dtype.itemsize for a in jax.tree_util.tree_leaves(state))


def windowed(actions: Any, ops: JaxStepOps, position: int, windows: dict[int, int]) -> Any:
    """``actions`` from ``position`` on, recording each fused window in ``ops`` and running
    it once the engine has handled the window's last action."""
    end = None
    for k, act in enumerate(actions, start=position):
        if end is not None and k > end:
            ops.flush()
            end = None
        if end is None and k in windows:
            ops.window, end = Window(), windows[k]
        yield act
    ops.flush()
