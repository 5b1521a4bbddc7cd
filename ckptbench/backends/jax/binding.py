"""Any checkpointing schedule compiled into XLA: ``compiled_checkpoint`` for the JAX backend.

The action stream (Revolve, Griewank & Walther, "Algorithm 799: Revolve", ACM TOMS 26(1),
2000; the uniform and store-all schedules; or a budget plan that keeps tapes, Beaumont et
al., "Optimal checkpointing for heterogeneous chains", 2019) is encoded as an int32 table
(:mod:`ckptbench.backends.jax.table`) and run by one ``lax.fori_loop`` over its rows. Every
part of a row (restore, snapshot, advance, tape run, turn, reverse run) is an inner
``fori_loop`` whose trip count comes from the table (0 or 1 for the flags): no
``lax.cond``/``lax.switch``, which would make XLA copy every buffer a branch passes through.
The snapshot buffer ``(slots, *state)`` and the kept-tape buffers are loop carries updated
with ``lax.dynamic_update_index_in_dim``, so XLA keeps them in place.

``jax.custom_vjp`` binds it: the forward pass is the first sweep (every output, the
snapshots and kept tapes, and the taped last step: FIRSTURN), the backward pass resumes the
schedule and returns the cotangents of params, initial state and inputs from one reverse
sweep. A step's tape is the residuals of ``jax.vjp`` of step + readout; residual leaves that
do not depend on the state or the input (the parameters themselves, constants and what is
computed from them only) are computed once per sweep from the parameters instead of being
stored with every tape, and a leaf that is the step's input is read back from the inputs.

Counters are measured inside the compiled loops (int carries): untaped advances, taped
steps, readouts and kept tapes. They leave the backward pass as the cotangent of a probe
argument (``counts``), so ``jax.grad`` with respect to it returns them. See
docs/architecture.md, "The JAX backend".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ckptbench.backends.jax.table import ActionTable

__all__ = ["COUNTERS", "TapeLayout", "compiled_checkpoint", "tape_layout"]

#: What the probe's cotangent holds, in order (all measured inside the compiled loops).
COUNTERS: tuple[str, ...] = ("steps_advanced", "steps_taped", "post_calls", "tapes_kept")

_STORED, _INPUT, _INVARIANT = 0, 1, 2

# Counter increments (int32 vectors in COUNTERS' order), added inside the loop bodies.
_ADVANCED = np.array([1, 0, 0, 0], np.int32)  # an untaped step
_ADVANCED_POST = np.array([1, 0, 1, 0], np.int32)  # an untaped step and its readout
_KEPT = np.array([0, 1, 0, 1], np.int32)  # a taped step whose tape is kept (TAPE)
_TURNED = np.array([0, 1, 0, 0], np.int32)  # a taped step reversed at once (a turn)


@dataclass(frozen=True)
class TapeLayout:
    """Which residual leaves of one step's ``jax.vjp`` a kept tape stores."""

    treedef: Any  # of the vjp function (from a probe trace; reused in every trace)
    kinds: tuple[int, ...]  # per leaf: stored, the step's input, or invariant
    shapes: tuple[tuple[tuple[int, ...], Any], ...]  # per leaf: (shape, dtype)

    @property
    def stored(self) -> tuple[int, ...]:
        return tuple(k for k, kind in enumerate(self.kinds) if kind == _STORED)

    @property
    def tape_bytes(self) -> int:
        """Bytes of one kept tape: its stored leaves."""
        return sum(
            int(np.prod(self.shapes[k][0], dtype=np.int64)) * np.dtype(self.shapes[k][1]).itemsize
            for k in self.stored
        )


def _step_post(step: Callable, post: Callable) -> Callable:
    def sp(p: Any, s: Any, x: Any) -> tuple[Any, Any]:
        s1 = step(p, s, x)
        return s1, post(p, s1)

    return sp


def _dependent(jaxpr: Any, roots: set[Any]) -> set[Any]:
    """Variables of ``jaxpr`` that depend on ``roots`` (any equation input -> all outputs)."""
    dep = set(roots)
    for eqn in jaxpr.eqns:
        if any(not hasattr(v, "val") and v in dep for v in eqn.invars):
            dep.update(eqn.outvars)
    return dep


def tape_layout(step: Callable, post: Callable, params: Any, state: Any, x: Any) -> TapeLayout:
    """Trace one taped step (abstractly) and classify its ``jax.vjp`` residual leaves."""
    sp = _step_post(step, post)
    seen: dict[str, Any] = {}

    def probe(p: Any, s: Any, xi: Any) -> list:
        _, vjp = jax.vjp(sp, p, s, xi)
        leaves, treedef = jax.tree_util.tree_flatten(vjp)
        seen["treedef"] = treedef
        seen["input"] = [leaf is xi for leaf in leaves]
        return leaves

    closed = jax.make_jaxpr(probe)(params, state, x)
    jaxpr = closed.jaxpr
    n_p = len(jax.tree_util.tree_leaves(params))
    varying = _dependent(jaxpr, set(jaxpr.invars[n_p:]))
    kinds = []
    for k, out in enumerate(jaxpr.outvars):
        if seen["input"][k]:
            kinds.append(_INPUT)
        elif not hasattr(out, "val") and out in varying:
            kinds.append(_STORED)
        else:
            kinds.append(_INVARIANT)
    shapes = tuple((tuple(a.shape), a.dtype) for a in closed.out_avals)
    return TapeLayout(seen["treedef"], tuple(kinds), shapes)


def compiled_checkpoint(
    step: Callable, post: Callable, table: ActionTable, layout: TapeLayout
) -> Callable:
    """``loop(params, state0, inputs, counts) -> outputs`` running ``table``'s schedule.

    ``outputs`` stacks ``post(params, x_i)`` for i = 1..steps. Differentiable with
    ``jax.grad``/``jax.vjp`` with respect to params, state0 and inputs; the cotangent of
    ``counts`` (a float64 array of ``len(COUNTERS)`` zeros) is the measured counters.
    """
    sweeps = _Sweeps(step, post, table, layout)
    # Whether the inputs' cotangent is wanted: set when ``fwd`` is traced (``perturbed``);
    # without it the reverse sweep keeps no (steps, *input) cotangent buffer.
    wants = {"inputs": True}

    @jax.custom_vjp
    def loop(params, state0, inputs, counts):
        return sweeps.forward(params, state0, inputs)[0]

    def fwd(params, state0, inputs, counts):
        wants["inputs"] = bool(inputs.perturbed)
        p, s0, xs = (_values(t) for t in (params, state0, inputs))
        ys, res = sweeps.forward(p, s0, xs)
        return ys, (p, s0, xs, res)

    def bwd(saved, g):
        p, s0, xs, res = saved
        if isinstance(g, jax.custom_derivatives.SymbolicZero):
            g = jnp.zeros(g.shape, g.dtype)
        want_x = wants["inputs"]
        pbar, sbar, xsbar, counts = sweeps.reverse(p, s0, xs, res, g, want_x)
        return pbar, sbar, xsbar if want_x else None, counts

    loop.defvjp(fwd, bwd, symbolic_zeros=True)

    def run(params: Any, state0: Any, inputs: Any, counts: Any) -> Any:
        return loop(*jax.tree_util.tree_map(jnp.asarray, (params, state0, inputs, counts)))

    return run


def _put(buf: Any, value: Any, i: Any) -> Any:
    return jax.tree_util.tree_map(
        lambda b, v: lax.dynamic_update_index_in_dim(b, v, i, 0), buf, value
    )


def _get(buf: Any, i: Any) -> Any:
    return jax.tree_util.tree_map(lambda b: lax.dynamic_index_in_dim(b, i, 0, False), buf)


def _put_x(xsbar: Any, gx: Any, i: Any, want_x: bool) -> Any:
    """The inputs' cotangent with step ``i``'s written in (unchanged where not wanted)."""
    return lax.dynamic_update_index_in_dim(xsbar, gx, i, 0) if want_x else xsbar


class _Sweeps:
    """The traced sweeps of one table: :meth:`forward` (the first sweep, ending on FIRSTURN)
    and :meth:`reverse` (FIRSTURN's reverse, then the remaining rows), each one
    ``lax.fori_loop`` over rows whose parts are inner loops with the table's trip counts."""

    def __init__(self, step: Callable, post: Callable, table: ActionTable, layout: TapeLayout):
        self.step, self.post = step, post
        self.sp = _step_post(step, post)
        self.steps = table.steps
        self.first = table.first_rows
        self.n_slots = max(table.snapshot_slots, 1)
        self.n_tapes = table.tape_slots  # 0: the tape and reverse-run parts are left out
        self.layout = layout
        self.rows = np.asarray(table.rows, dtype=np.int32)
        self.tape_slot = np.asarray(table.tape_slot, dtype=np.int32)

    def invariants(self, p: Any, s: Any, xs: Any) -> list:
        _, vjp = jax.vjp(self.sp, p, s, xs[0])
        return jax.tree_util.tree_leaves(vjp)

    def record(self, p: Any, s: Any, xi: Any) -> tuple[Any, Any, list]:
        (s1, y), vjp = jax.vjp(self.sp, p, s, xi)
        leaves = jax.tree_util.tree_leaves(vjp)
        if len(leaves) != len(self.layout.kinds):  # pragma: no cover - the probe traced it
            raise RuntimeError("a taped step's residuals differ from the probe's")
        return s1, y, [leaves[k] for k in self.layout.stored]

    def rebuild(self, saved: list, xi: Any, inv: list) -> Any:
        it = iter(saved)
        leaves = [
            next(it) if kind == _STORED else xi if kind == _INPUT else inv[k]
            for k, kind in enumerate(self.layout.kinds)
        ]
        return jax.tree_util.tree_unflatten(self.layout.treedef, leaves)

    def tape_buffers(self) -> list:
        layout, n = self.layout, self.n_tapes
        shapes = [layout.shapes[k] for k in layout.stored] if n else []
        return [jnp.zeros((n, *shape), dtype) for shape, dtype in shapes]

    def tape_run(self, p: Any, xs: Any, tape_slot: Any, row: Any, carry: tuple) -> tuple:
        """A row's tape run: steps tape_start .. +tape_count taped, their stored residuals
        written into the tape buffers. ``carry`` is ``(s, tapes, ys, n)`` in the first sweep
        (the readouts written too) and ``(s, tapes, n)`` after it."""
        with_outputs = len(carry) == 4

        def tape(i, c):
            s, tapes, *ys, n = c
            s, y, saved = self.record(p, s, xs[i])
            k = tape_slot[i]
            tapes = [
                lax.dynamic_update_index_in_dim(b, v, k, 0)
                for b, v in zip(tapes, saved, strict=True)
            ]
            if with_outputs:
                return s, tapes, lax.dynamic_update_index_in_dim(ys[0], y, i, 0), n + _KEPT
            return s, tapes, n + _KEPT

        return lax.fori_loop(row[6], row[6] + row[7], tape, carry)

    def forward(self, p: Any, s0: Any, xs: Any) -> tuple[Any, tuple]:
        """The first sweep: rows 0 .. first-1 (snapshot, advance, tape), then FIRSTURN."""
        rows, tape_slot = jnp.asarray(self.rows), jnp.asarray(self.tape_slot)
        step, post, steps = self.step, self.post, self.steps
        zero_n = jnp.zeros(len(COUNTERS), jnp.int32)
        y_shape = jax.eval_shape(lambda: self.sp(p, s0, xs[0])[1])
        ys = jnp.zeros((steps, *y_shape.shape), y_shape.dtype)
        snaps = jax.tree_util.tree_map(lambda a: jnp.zeros((self.n_slots, *a.shape), a.dtype), s0)

        def row_body(r, carry):
            s, snaps, tapes, ys, n = carry
            row = rows[r]

            def shot(_, c):
                s, snaps = c
                return s, _put(snaps, s, row[3])

            s, snaps = lax.fori_loop(0, row[2], shot, (s, snaps))

            def advance(i, c):
                s, ys, n = c
                s = step(p, s, xs[i])
                ys = lax.dynamic_update_index_in_dim(ys, post(p, s), i, 0)
                return s, ys, n + _ADVANCED_POST

            s, ys, n = lax.fori_loop(row[4], row[5], advance, (s, ys, n))
            if self.n_tapes:
                s, tapes, ys, n = self.tape_run(p, xs, tape_slot, row, (s, tapes, ys, n))
            return s, snaps, tapes, ys, n

        carry = (s0, snaps, self.tape_buffers(), ys, zero_n)
        s, snaps, tapes, ys, n = lax.fori_loop(0, self.first, row_body, carry)
        (_, y), last = jax.vjp(self.sp, p, s, xs[steps - 1])  # FIRSTURN: tape the last step
        ys = lax.dynamic_update_index_in_dim(ys, y, steps - 1, 0)
        return ys, (snaps, tapes, last, n + _TURNED)

    def reverse(self, p: Any, s0: Any, xs: Any, res: tuple, g: Any, want_x: bool) -> tuple:
        """The reverse sweep: FIRSTURN's reverse, then rows first .. end; returns the
        cotangents of params, state0 and inputs and the counters (float64)."""
        rows, tape_slot = jnp.asarray(self.rows), jnp.asarray(self.tape_slot)
        snaps, tapes, last, counts = res
        inv = self.invariants(p, s0, xs)
        zero_s = jax.tree_util.tree_map(jnp.zeros_like, s0)
        steps = self.steps
        pbar, sbar, xbar = last((zero_s, g[steps - 1]))
        xsbar = jnp.zeros_like(xs) if want_x else jnp.zeros((1, *xs.shape[1:]), xs.dtype)
        xsbar = lax.dynamic_update_index_in_dim(xsbar, xbar, steps - 1 if want_x else 0, 0)
        parts = _ReverseParts(self, p, xs, g, tape_slot, inv, want_x)

        def row_body(r, carry):
            s, snaps, tapes, pbar, sbar, xsbar, n = carry
            row = rows[r]
            s = lax.fori_loop(0, row[0], lambda _, s: _get(snaps, row[1]), s)
            snaps = lax.fori_loop(0, row[2], lambda _, snaps: _put(snaps, s, row[3]), snaps)
            s, n = parts.advance(row, s, n)
            if self.n_tapes:
                s, tapes, n = self.tape_run(p, xs, tape_slot, row, (s, tapes, n))
            pbar, sbar, xsbar, n = parts.turn(row, s, (pbar, sbar, xsbar, n))
            if self.n_tapes:
                pbar, sbar, xsbar = parts.reverse_run(row, tapes, (pbar, sbar, xsbar))
            return s, snaps, tapes, pbar, sbar, xsbar, n

        carry = (zero_s, snaps, tapes, pbar, sbar, xsbar, counts)
        out = lax.fori_loop(self.first, rows.shape[0], row_body, carry)
        _, _, _, pbar, sbar, xsbar, counts = out
        return pbar, sbar, xsbar, counts.astype(jnp.float64)


class _ReverseParts:
    """The parts of a reverse-sweep row after restore and snapshot, traced for one call of
    :meth:`_Sweeps.reverse` (its params, inputs, output cotangent and invariants)."""

    def __init__(
        self, sweeps: _Sweeps, p: Any, xs: Any, g: Any, tape_slot: Any, inv: list, want_x: bool
    ) -> None:  # fmt: skip
        self.sweeps, self.p, self.xs, self.g = sweeps, p, xs, g
        self.tape_slot, self.inv, self.want_x = tape_slot, inv, want_x

    def advance(self, row: Any, s: Any, n: Any) -> tuple[Any, Any]:
        step, p, xs = self.sweeps.step, self.p, self.xs

        def advance(i, c):
            s, n = c
            return step(p, s, xs[i]), n + _ADVANCED

        return lax.fori_loop(row[4], row[5], advance, (s, n))

    def turn(self, row: Any, s: Any, carry: tuple) -> tuple:
        """A YOUTURN: tape step turn_step from ``s`` and reverse it at once (0 or 1 trips)."""
        p, xs, g, sp = self.p, self.xs, self.g, self.sweeps.sp

        def turn(_, c):
            pbar, sbar, xsbar, n = c
            i = row[9]
            _, vjp = jax.vjp(sp, p, s, xs[i])
            gp, gs, gx = vjp((sbar, g[i]))
            pbar = jax.tree_util.tree_map(jnp.add, pbar, gp)
            return pbar, gs, _put_x(xsbar, gx, i, self.want_x), n + _TURNED

        return lax.fori_loop(0, row[8], turn, carry)

    def reverse_run(self, row: Any, tapes: list, carry: tuple) -> tuple:
        """A row's reverse run: the kept tapes of steps reverse_start, reverse_start-1, ..."""
        xs, g, tape_slot, inv = self.xs, self.g, self.tape_slot, self.inv
        rebuild = self.sweeps.rebuild

        def reverse(j, c):
            pbar, sbar, xsbar = c
            i = row[10] - j
            k = tape_slot[i]
            saved = [lax.dynamic_index_in_dim(b, k, 0, False) for b in tapes]
            gp, gs, gx = rebuild(saved, xs[i], inv)((sbar, g[i]))
            pbar = jax.tree_util.tree_map(jnp.add, pbar, gp)
            return pbar, gs, _put_x(xsbar, gx, i, self.want_x)

        return lax.fori_loop(0, row[11], reverse, carry)


def _values(tree: Any) -> Any:
    """The arrays of a tree of ``CustomVJPPrimal`` wrappers (``symbolic_zeros`` fwd input)."""
    wrapped = jax.custom_derivatives.CustomVJPPrimal
    return jax.tree_util.tree_map(lambda w: w.value, tree, is_leaf=lambda w: isinstance(w, wrapped))
