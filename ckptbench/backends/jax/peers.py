"""JAX's own checkpointing, measured beside our schedules as strategies of the JAX backend.

* ``jax-checkpoint`` — the chain cut into ``segments`` near-equal segments, an outer
  ``lax.scan`` over segments whose body is a ``jax.checkpoint``-ed inner ``lax.scan`` of the
  steps (default policy: nothing inside a segment is saved; Chen et al., "Training deep nets
  with sublinear memory cost", 2016). The forward keeps each segment's input state; the
  backward recomputes one segment at a time. With ``l = q*k + r`` there are ``r`` segments
  of ``q + 1`` steps and ``k - r`` of ``q`` (two outer scans), as a JAX user would write.
* ``equinox`` — equinox's checkpointed while loop
  (``eqx.internal.while_loop(..., kind="checkpointed", checkpoints=k)``): online binomial
  checkpointing (Stumm & Walther, "New algorithms for optimal online checkpointing", 2010;
  Wang, Moin & Iaccarino, 2009), outputs written through its ``buffers``.

Both return ``loop(params, state0, inputs) -> outputs`` (``post`` of every state x_1..x_l).

On a layer chain (``x_{i+1} = layer(i, params[i], x_i)``), ``loop(params, x0) -> x_L`` with
``jax.checkpoint`` around every layer, as a JAX user writes it for a stack of blocks:

* ``jax-every-layer`` (:func:`every_layer_chain`) — policy ``nothing_saveable`` (what
  ``jax.checkpoint`` does without a policy): each layer's input is kept, the layer is
  recomputed in the backward;
* ``jax-dots-saveable`` (:func:`dots_saveable_chain`) — ``dots_saveable``: the outputs of
  the layer's matrix products (``dot_general``) are kept too, the rest recomputed.

They are the factories the peers' specs name (:mod:`ckptbench.schedules.peers`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

__all__ = [
    "dots_saveable_chain",
    "equinox_checkpoint",
    "every_layer_chain",
    "per_layer_chain",
    "scan_checkpoint",
]


def _segment(step: Callable, post: Callable, p: Any) -> Callable:
    def seg(s: Any, xs: Any) -> tuple[Any, Any]:
        def body(s: Any, x: Any) -> tuple[Any, Any]:
            s = step(p, s, x)
            return s, post(p, s)

        return lax.scan(body, s, xs)

    return jax.checkpoint(seg)


def scan_checkpoint(step: Callable, post: Callable, steps: int, segments: int) -> Callable:
    """``jax.checkpoint`` over ``segments`` near-equal ``lax.scan`` segments (see above)."""
    k = max(1, min(segments, steps))
    q, r = divmod(steps, k)

    def loop(p: Any, s0: Any, xs: Any) -> Any:
        seg = _segment(step, post, p)
        s, outs = s0, []
        for count, length, start in ((r, q + 1, 0), (k - r, q, r * (q + 1))):
            if count == 0 or length == 0:
                continue
            part = xs[start : start + count * length].reshape(count, length, *xs.shape[1:])
            s, ys = lax.scan(seg, s, part)
            outs.append(ys.reshape(count * length, *ys.shape[2:]))
        return outs[0] if len(outs) == 1 else jnp.concatenate(outs)

    return loop


def equinox_checkpoint(step: Callable, post: Callable, steps: int, checkpoints: int) -> Callable:
    """equinox's checkpointed while loop with ``checkpoints`` checkpoints (see above)."""
    try:
        import equinox as eqx
    except ImportError as err:
        why = " ".join(str(err).split()) or type(err).__name__
        raise ValueError(
            f"--strategy equinox needs equinox ({why}); pip install 'ckptbench[equinox]'"
        ) from None

    def loop(p: Any, s0: Any, xs: Any) -> Any:
        y_shape = jax.eval_shape(lambda: post(p, step(p, s0, xs[0])))
        ys0 = jnp.zeros((steps, *y_shape.shape), y_shape.dtype)

        def cond(c: Any) -> Any:
            return c[0] < steps

        def body(c: Any) -> Any:
            i, s, ys = c
            s = step(p, s, xs[i])
            return i + 1, s, ys.at[i].set(post(p, s))

        _, _, ys = eqx.internal.while_loop(
            cond,
            body,
            (jnp.int32(0), s0, ys0),
            max_steps=steps,
            buffers=lambda c: c[2],
            kind="checkpointed",
            checkpoints=max(1, min(checkpoints, steps)),
        )
        return ys

    return loop


def per_layer_chain(layer: Callable, layers: int, policy: Callable | None) -> Callable:
    """``loop(params, x0) -> x_L`` with ``jax.checkpoint(..., policy=policy)`` around every
    layer (``policy`` one of ``jax.checkpoint_policies``)."""
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ValueError(f"layers must be a positive integer, got {layers!r}")
    wrapped = [jax.checkpoint(functools.partial(layer, i), policy=policy) for i in range(layers)]

    def loop(params: Any, x0: Any) -> Any:
        if len(params) != layers:
            raise ValueError(f"params has {len(params)} layers, expected {layers}")
        x = x0
        for fn, p in zip(wrapped, params, strict=True):
            x = fn(p, x)
        return x

    return loop


def every_layer_chain(layer: Callable, layers: int, segments: int = 0) -> Callable:
    """``jax.checkpoint`` around every layer, nothing saved (``segments`` unused)."""
    return per_layer_chain(layer, layers, jax.checkpoint_policies.nothing_saveable)


def dots_saveable_chain(layer: Callable, layers: int, segments: int = 0) -> Callable:
    """``jax.checkpoint`` around every layer with ``dots_saveable`` (``segments`` unused)."""
    return per_layer_chain(layer, layers, jax.checkpoint_policies.dots_saveable)
