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
    steps = table.steps
    sp = _step_post(step, post)
    rows_np = table.rows
    first = table.first_rows
    n_slots = max(table.snapshot_slots, 1)
    n_tapes = table.tape_slots  # 0: the tape and reverse-run parts are left out of the body
    stored = layout.stored
    treedef, kinds = layout.treedef, layout.kinds

    def invariants(p: Any, s: Any, xs: Any) -> list:
        _, vjp = jax.vjp(sp, p, s, xs[0])
        return jax.tree_util.tree_leaves(vjp)

    def record(p: Any, s: Any, xi: Any) -> tuple[Any, Any, list]:
        (s1, y), vjp = jax.vjp(sp, p, s, xi)
        leaves = jax.tree_util.tree_leaves(vjp)
        if len(leaves) != len(kinds):  # pragma: no cover - the probe traced the same step
            raise RuntimeError("a taped step's residuals differ from the probe's")
        return s1, y, [leaves[k] for k in stored]

    def rebuild(saved: list, xi: Any, inv: list) -> Any:
        it = iter(saved)
        leaves = [
            next(it) if kind == _STORED else xi if kind == _INPUT else inv[k]
            for k, kind in enumerate(kinds)
        ]
        return jax.tree_util.tree_unflatten(treedef, leaves)

    def put(buf: Any, value: Any, i: Any) -> Any:
        return jax.tree_util.tree_map(
            lambda b, v: lax.dynamic_update_index_in_dim(b, v, i, 0), buf, value
        )

    def get(buf: Any, i: Any) -> Any:
        return jax.tree_util.tree_map(lambda b: lax.dynamic_index_in_dim(b, i, 0, False), buf)

    def tape_buffers() -> list:
        shapes = [layout.shapes[k] for k in stored] if n_tapes else []
        return [jnp.zeros((n_tapes, *shape), dtype) for shape, dtype in shapes]

    def forward_rows(p, s0, xs, rows, tape_slot):
        """The first sweep: rows 0 .. first-1 (snapshot, advance, tape), then FIRSTURN."""
        zero_n = jnp.zeros(len(COUNTERS), jnp.int32)
        y_shape = jax.eval_shape(lambda: sp(p, s0, xs[0])[1])
        ys = jnp.zeros((steps, *y_shape.shape), y_shape.dtype)
        snaps = jax.tree_util.tree_map(lambda a: jnp.zeros((n_slots, *a.shape), a.dtype), s0)
        tapes = tape_buffers()

        def row_body(r, carry):
            s, snaps, tapes, ys, n = carry
            row = rows[r]

            def shot(_, c):
                s, snaps = c
                return s, put(snaps, s, row[3])

            s, snaps = lax.fori_loop(0, row[2], shot, (s, snaps))

            def advance(i, c):
                s, ys, n = c
                s = step(p, s, xs[i])
                ys = lax.dynamic_update_index_in_dim(ys, post(p, s), i, 0)
                return s, ys, n + _ADVANCED_POST

            s, ys, n = lax.fori_loop(row[4], row[5], advance, (s, ys, n))

            def tape(i, c):
                s, tapes, ys, n = c
                s, y, saved = record(p, s, xs[i])
                k = tape_slot[i]
                tapes = [
                    lax.dynamic_update_index_in_dim(b, v, k, 0)
                    for b, v in zip(tapes, saved, strict=True)
                ]
                return s, tapes, lax.dynamic_update_index_in_dim(ys, y, i, 0), n + _KEPT

            if n_tapes:
                s, tapes, ys, n = lax.fori_loop(row[6], row[6] + row[7], tape, (s, tapes, ys, n))
            return s, snaps, tapes, ys, n

        s, snaps, tapes, ys, n = lax.fori_loop(0, first, row_body, (s0, snaps, tapes, ys, zero_n))
        (_, y), last = jax.vjp(sp, p, s, xs[steps - 1])  # FIRSTURN: tape the last step
        ys = lax.dynamic_update_index_in_dim(ys, y, steps - 1, 0)
        return ys, (snaps, tapes, last, n + _TURNED)

    def reverse_rows(p, s0, xs, rows, tape_slot, res, g, want_x):
        """The reverse sweep: FIRSTURN's reverse, then rows first .. end."""
        snaps, tapes, last, counts = res
        inv = invariants(p, s0, xs)
        zero_s = jax.tree_util.tree_map(jnp.zeros_like, s0)
        pbar, sbar, xbar = last((zero_s, g[steps - 1]))
        xsbar = jnp.zeros_like(xs) if want_x else jnp.zeros((1, *xs.shape[1:]), xs.dtype)
        xsbar = lax.dynamic_update_index_in_dim(xsbar, xbar, steps - 1 if want_x else 0, 0)

        def put_x(xsbar, gx, i):
            return lax.dynamic_update_index_in_dim(xsbar, gx, i, 0) if want_x else xsbar

        add = jax.tree_util.tree_map

        def row_body(r, carry):
            s, snaps, tapes, pbar, sbar, xsbar, n = carry
            row = rows[r]

            def restore(_, s):
                return get(snaps, row[1])

            s = lax.fori_loop(0, row[0], restore, s)

            def shot(_, snaps):
                return put(snaps, s, row[3])

            snaps = lax.fori_loop(0, row[2], shot, snaps)

            def advance(i, c):
                s, n = c
                return step(p, s, xs[i]), n + _ADVANCED

            s, n = lax.fori_loop(row[4], row[5], advance, (s, n))

            def tape(i, c):
                s, tapes, n = c
                s, _, saved = record(p, s, xs[i])
                k = tape_slot[i]
                tapes = [
                    lax.dynamic_update_index_in_dim(b, v, k, 0)
                    for b, v in zip(tapes, saved, strict=True)
                ]
                return s, tapes, n + _KEPT

            if n_tapes:
                s, tapes, n = lax.fori_loop(row[6], row[6] + row[7], tape, (s, tapes, n))

            def turn(_, c):
                pbar, sbar, xsbar, n = c
                i = row[9]
                _, vjp = jax.vjp(sp, p, s, xs[i])
                gp, gs, gx = vjp((sbar, g[i]))
                return add(jnp.add, pbar, gp), gs, put_x(xsbar, gx, i), n + _TURNED

            pbar, sbar, xsbar, n = lax.fori_loop(0, row[8], turn, (pbar, sbar, xsbar, n))

            def reverse(j, c):
                pbar, sbar, xsbar = c
                i = row[10] - j
                k = tape_slot[i]
                saved = [lax.dynamic_index_in_dim(b, k, 0, False) for b in tapes]
                gp, gs, gx = rebuild(saved, xs[i], inv)((sbar, g[i]))
                return add(jnp.add, pbar, gp), gs, put_x(xsbar, gx, i)

            if n_tapes:
                pbar, sbar, xsbar = lax.fori_loop(0, row[11], reverse, (pbar, sbar, xsbar))
            return s, snaps, tapes, pbar, sbar, xsbar, n

        carry = (zero_s, snaps, tapes, pbar, sbar, xsbar, counts)
        out = lax.fori_loop(first, rows.shape[0], row_body, carry)
        _, _, _, pbar, sbar, xsbar, counts = out
        counts = counts.astype(jnp.float64)
        return pbar, sbar, xsbar, counts

    rows_c = np.asarray(rows_np, dtype=np.int32)
    slot_c = np.asarray(table.tape_slot, dtype=np.int32)
    # Whether the inputs' cotangent is wanted: set when ``fwd`` is traced (``perturbed``);
    # without it the reverse sweep keeps no (steps, *input) cotangent buffer.
    wants = {"inputs": True}

    @jax.custom_vjp
    def loop(params, state0, inputs, counts):
        return forward_rows(params, state0, inputs, jnp.asarray(rows_c), jnp.asarray(slot_c))[0]

    def fwd(params, state0, inputs, counts):
        wants["inputs"] = bool(inputs.perturbed)
        p, s0, xs = (_values(t) for t in (params, state0, inputs))
        ys, res = forward_rows(p, s0, xs, jnp.asarray(rows_c), jnp.asarray(slot_c))
        return ys, (p, s0, xs, res)

    def bwd(saved, g):
        p, s0, xs, res = saved
        if isinstance(g, jax.custom_derivatives.SymbolicZero):
            g = jnp.zeros(g.shape, g.dtype)
        want_x = wants["inputs"]
        pbar, sbar, xsbar, counts = reverse_rows(
            p, s0, xs, jnp.asarray(rows_c), jnp.asarray(slot_c), res, g, want_x
        )
        return pbar, sbar, xsbar if want_x else None, counts

    loop.defvjp(fwd, bwd, symbolic_zeros=True)

    def run(params: Any, state0: Any, inputs: Any, counts: Any) -> Any:
        return loop(*jax.tree_util.tree_map(jnp.asarray, (params, state0, inputs, counts)))

    return run


def _values(tree: Any) -> Any:
    """The arrays of a tree of ``CustomVJPPrimal`` wrappers (``symbolic_zeros`` fwd input)."""
    wrapped = jax.custom_derivatives.CustomVJPPrimal
    return jax.tree_util.tree_map(lambda w: w.value, tree, is_leaf=lambda w: isinstance(w, wrapped))
