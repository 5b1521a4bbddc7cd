"""How many bytes one kept tape holds on torch, counted from what autograd saves.

The planner (:mod:`schedules.optimal.planner`) needs the bytes a kept tape (TAPE .. REVERSE) adds
to memory. On torch these are counted exactly rather than inferred from a peak: one step
and its readout are taped as the executor tapes them (:class:`TorchStepOps.tape
<ckptbench.backends.torch.binding.TorchStepOps>`: detached state leaves, the shared
detached parameter leaves) under ``torch.autograd.graph.saved_tensors_hooks``, and the
tape's bytes are the distinct storages it keeps alive:

* every tensor autograd saves for the backward of that step (the pack hook sees each);
* the step's input state x_i and its readout y_i, which the executor's tape holds;

minus the storages that are alive anyway: the parameters and the inputs (held by the
caller for the whole gradient) and the new state x_{i+1} (the next state: a snapshot or the
next tape pays for it). Each storage counts once, by its data pointer, at its full size.

A layer of a chain (:func:`layer_tape_nbytes`) is counted the same way, as the chain's
executor tapes it (:class:`ckptbench.backends.torch.chain.TorchChainOps`): the saved
tensors and the layer's input x_i, less the parameters and the output x_{i+1}.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from ckptbench.backends.torch.trees import flatten_tree

__all__ = ["layer_tape_nbytes", "tape_nbytes"]


def _storage(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


@contextlib.contextmanager
def _recording(params: Any) -> Iterator[tuple[Any, list, list[torch.Tensor]]]:
    """Graph recording with every tensor autograd saves appended to a list: yields detached
    parameter leaves (their ``requires_grad`` kept) as a tree, the leaves, and the list."""
    pleaves, prebuild = flatten_tree(params, "params")
    tape_params = prebuild([p.detach().requires_grad_(p.requires_grad) for p in pleaves])
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield tape_params, pleaves, saved


def tape_nbytes(step, post, params: Any, state: Any, x: torch.Tensor) -> int:
    """Bytes one kept tape of ``step`` (with ``post``) holds at ``state`` and input ``x``."""
    sleaves, srebuild = flatten_tree(state, "state")
    with _recording(params) as (tape_params, pleaves, saved):
        leaves = [t.detach().requires_grad_() for t in sleaves]
        new = step(tape_params, srebuild(leaves), x.detach())
        y = post(tape_params, new)
    alive = {_storage(t)[0] for t in (*pleaves, x)}
    alive |= {_storage(t)[0] for t in flatten_tree(new, "state")[0]}
    held = {ptr: n for ptr, n in map(_storage, (*saved, *leaves, y)) if ptr not in alive}
    return sum(held.values())


def layer_tape_nbytes(layer, i: int, params: Any, x: torch.Tensor) -> int:
    """Bytes one kept tape of layer ``i`` of a chain holds at input ``x`` (its ``params``
    the layer's own tree)."""
    with _recording(params) as (tape_params, pleaves, saved):
        leaf = x.detach().requires_grad_()
        new = layer(i, tape_params, leaf)
    alive = {_storage(t)[0] for t in (*pleaves, new)}
    held = {ptr: n for ptr, n in map(_storage, (*saved, leaf)) if ptr not in alive}
    return sum(held.values())
