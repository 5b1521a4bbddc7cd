"""The peers: ``torch.utils.checkpoint`` over equal segments, measured beside Revolve, and
the peers people use for stacks of layers (layer chains).

This is the library's own recomputation (Chen et al., "Training deep nets with sublinear
memory cost", 2016; the sqrt(n) strategy of ``checkpoint_sequential``): the chain is cut
into ``segments`` near-equal segments, each run through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` with its defaults otherwise.
The forward keeps only each segment's input state; the backward reruns every segment once
with graph recording. One gradient evaluates ``step`` exactly ``2 * steps`` times and keeps
``segments`` states plus one segment's graph (about ``steps / segments`` steps of tape).

On a layer chain (``x_{i+1} = layer(i, params[i], x_i)``; each returns ``loop(params, x0)
-> x_L``, every layer's parameters closed over, so torch differentiates them too):

* :func:`sequential_chain` — ``torch.utils.checkpoint.checkpoint_sequential`` over
  ``segments`` segments of ``L // segments`` layers, the remaining layers in a last segment
  that runs without checkpointing (torch's own cut: "the last chunk has to be
  non-volatile"); non-reentrant, its defaults otherwise;
* :func:`every_layer_chain` — ``checkpoint(layer)`` around every layer (the common per-block
  wrapper): one saved input per layer, every layer rerun once in the backward;
* :func:`selective_chain` — the same with PyTorch's selective activation checkpointing
  (``create_selective_checkpoint_contexts``): the outputs of the ops in :data:`SAVED_OPS`
  (matrix products and convolutions) are kept, everything else is recomputed.

They have no step counters (``stats`` is ``None``); the worker counts layer calls.

The first non-reentrant call imports ``torch._dynamo`` (about 800 modules, 70 MiB here);
:mod:`ckptbench.backends.torch.framework` imports it in every mode so footprints compare.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.checkpoint

__all__ = [
    "SAVED_OPS",
    "ChainPeerLoop",
    "SegmentCheckpointLoop",
    "every_layer_chain",
    "selective_chain",
    "sequential_chain",
    "torch_checkpoint",
]

#: What selective activation checkpointing keeps (``torch-selective``): the outputs of
#: matrix products and convolutions, as they reach the dispatcher (``@`` and ``einsum``
#: arrive as ``mm`` and ``bmm``).
SAVED_OPS = tuple(
    getattr(torch.ops.aten, name).default
    for name in ("mm", "addmm", "bmm", "baddbmm", "convolution")
)


class SegmentCheckpointLoop:
    """``loop(params, state0, inputs)`` -> stacked ``post`` outputs via torch's checkpoint.

    ``state0`` is a tensor or a tuple of tensors; ``params`` reach the step through the
    closure (the non-reentrant checkpoint differentiates closed-over tensors too). ``stats``
    is ``None``: the library keeps no counters; count ``step`` calls to see its 2l.
    """

    def __init__(
        self,
        step: Callable[[Any, Any, Any], Any],
        post: Callable[[Any, Any], Any],
        steps: int,
        segments: int,
    ) -> None:
        if not callable(step) or not callable(post):
            raise ValueError("step and post must be callables")
        for name, value in (("steps", steps), ("segments", segments)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.step = step
        self.post = post
        self.steps = steps
        self.segments = min(segments, steps)
        self.stats = None

    def __repr__(self) -> str:
        return f"SegmentCheckpointLoop(steps={self.steps}, segments={self.segments})"

    def bounds(self) -> list[int]:
        """Segment boundaries 0 = b_0 < b_1 < ... < b_k = steps (near-equal lengths)."""
        k = self.segments
        return [i * self.steps // k for i in range(k + 1)]

    def __call__(self, params: Any, state0: Any, inputs: torch.Tensor) -> torch.Tensor:
        if not isinstance(inputs, torch.Tensor) or inputs.dim() == 0:
            raise ValueError("inputs must be a tensor whose leading axis is the step axis")
        if inputs.shape[0] != self.steps:
            raise ValueError(
                f"inputs has leading axis {inputs.shape[0]}, expected steps={self.steps}"
            )
        is_tuple = isinstance(state0, tuple | list)
        state = tuple(state0) if is_tuple else (state0,)
        step, post = self.step, self.post

        def segment(xs: torch.Tensor, *leaves: torch.Tensor) -> tuple[torch.Tensor, ...]:
            s: Any = tuple(leaves) if is_tuple else leaves[0]
            ys = []
            for j in range(xs.shape[0]):
                s = step(params, s, xs[j])
                ys.append(post(params, s))
            new = tuple(s) if is_tuple else (s,)
            return (torch.stack(ys), *new)

        outs = []
        b = self.bounds()
        for a, z in itertools.pairwise(b):
            ys, *state = torch.utils.checkpoint.checkpoint(
                segment, inputs[a:z], *state, use_reentrant=False
            )
            outs.append(ys)
        return torch.cat(outs)


def torch_checkpoint(
    step: Callable[[Any, Any, Any], Any],
    post: Callable[[Any, Any], Any],
    steps: int,
    segments: int,
) -> SegmentCheckpointLoop:
    """``torch.utils.checkpoint`` (non-reentrant) over ``segments`` equal segments.

    Example::

        loop = torch_checkpoint(lstm.step, lstm.post, steps=1000, segments=31)
        loss = lstm.loss(loop(params, (h0, c0), xs))     # 2000 evaluations per gradient
    """
    return SegmentCheckpointLoop(step, post, steps, segments)


class ChainPeerLoop:
    """``loop(params, x0) -> x_L`` of a layer chain through one of torch's own
    checkpointing tools (``run(fns, x0)``, ``fns[i]`` layer ``i`` with its parameters)."""

    def __init__(self, layer: Callable, layers: int, run: Callable, what: str) -> None:
        if not callable(layer):
            raise ValueError("layer must be a callable")
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ValueError(f"layers must be a positive integer, got {layers!r}")
        self.layer, self.layers, self.run, self.what = layer, layers, run, what
        self.stats = None

    def __repr__(self) -> str:
        return f"ChainPeerLoop({self.what}, layers={self.layers})"

    def __call__(self, params: Any, x0: torch.Tensor) -> torch.Tensor:
        if len(params) != self.layers:
            raise ValueError(f"params has {len(params)} layers, expected {self.layers}")
        fns = [functools.partial(self.layer, i, params[i]) for i in range(self.layers)]
        return self.run(fns, x0)


def sequential_chain(layer: Callable, layers: int, segments: int) -> ChainPeerLoop:
    """``checkpoint_sequential`` over ``segments`` segments of the chain (see above)."""
    if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
        raise ValueError(f"segments must be a positive integer, got {segments!r}")
    k = min(segments, layers)

    def run(fns: list, x0: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint_sequential(fns, k, x0, use_reentrant=False)

    return ChainPeerLoop(layer, layers, run, f"checkpoint_sequential, {k} segment{'s' * (k != 1)}")


def _per_layer(fns: list, x0: torch.Tensor, **kw: Any) -> torch.Tensor:
    x = x0
    for fn in fns:
        x = torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, **kw)
    return x


def every_layer_chain(layer: Callable, layers: int, segments: int = 0) -> ChainPeerLoop:
    """``checkpoint(layer)`` around every layer (``segments`` unused: one per layer)."""
    return ChainPeerLoop(layer, layers, _per_layer, "checkpoint per layer")


def selective_chain(layer: Callable, layers: int, segments: int = 0) -> ChainPeerLoop:
    """Selective activation checkpointing around every layer, :data:`SAVED_OPS` kept."""
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    context = functools.partial(create_selective_checkpoint_contexts, list(SAVED_OPS))
    run = functools.partial(_per_layer, context_fn=context)
    return ChainPeerLoop(layer, layers, run, "selective checkpointing per layer")
