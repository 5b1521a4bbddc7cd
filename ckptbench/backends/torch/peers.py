"""The peer: ``torch.utils.checkpoint`` over equal segments, measured beside Revolve.

This is the library's own recomputation (Chen et al., "Training deep nets with sublinear
memory cost", 2016; the sqrt(n) strategy of ``checkpoint_sequential``): the chain is cut
into ``segments`` near-equal segments, each run through
``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` with its defaults otherwise.
The forward keeps only each segment's input state; the backward reruns every segment once
with graph recording. One gradient evaluates ``step`` exactly ``2 * steps`` times and keeps
``segments`` states plus one segment's graph (about ``steps / segments`` steps of tape).

The first non-reentrant call imports ``torch._dynamo`` (about 800 modules, 70 MiB here);
:mod:`ckptbench.backends.torch.framework` imports it in every mode so footprints compare.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.checkpoint

__all__ = ["SegmentCheckpointLoop", "torch_checkpoint"]


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
