"""The frameworks' own checkpointing, measured beside ours: strategies that are not our
action streams, so they have no step counts of ours and no replay.

* ``torch-checkpoint`` — ``torch.utils.checkpoint`` over ``--snaps`` equal segments
  (non-reentrant; Chen et al., "Training deep nets with sublinear memory cost", 2016);
* ``jax-checkpoint`` — ``jax.checkpoint`` (remat) over ``--snaps`` equal segments of a
  ``lax.scan``;
* ``equinox`` — equinox's checkpointed while loop with ``--snaps`` checkpoints (online
  binomial checkpointing; Stumm & Walther, "New algorithms for optimal online
  checkpointing", SISC 32(2), 2010).

The peers people use for stacks of layers (layer chains, docs/layers.md):

* ``checkpoint-sequential`` — ``torch.utils.checkpoint.checkpoint_sequential`` over
  ``--snaps`` segments of layers (non-reentrant; the last segment runs uncheckpointed);
* ``torch-every-layer`` — ``torch.utils.checkpoint.checkpoint`` around every layer (the
  common per-block wrapper; non-reentrant);
* ``torch-selective`` — PyTorch's selective activation checkpointing around every layer
  (``create_selective_checkpoint_contexts``): the outputs of matrix products and
  convolutions are saved, everything else is recomputed;
* ``jax-every-layer`` — ``jax.checkpoint`` around every layer (its default policy,
  ``nothing_saveable``: only each layer's input is kept);
* ``jax-dots-saveable`` — the same with ``jax.checkpoint_policies.dots_saveable``.

The recomputation floor (``results.summary``) prices a peer's evaluations where the worker
counts them whole: torch's peers run each step (or layer) as a Python call the worker
counts, forward and recomputation alike, so ``torch-checkpoint``, ``checkpoint-sequential``
and ``torch-every-layer`` get one. ``no_floor`` says why the others get none: the JAX peers
recompute inside XLA's compiled gradient, where nothing is counted, and ``torch-selective``
reruns a layer's call but recomputes only the operations it does not save, so its calls
are not whole evaluations.

Each peer is declared here once: its backend, and the factories ``"module:function"`` that
backend resolves: ``factory(step, post, steps, snaps) -> loop`` for a recurrence,
``chain_factory(layer, layers, snaps) -> loop`` for a layer chain. A peer without one is
refused on that kind of workload in one line. The per-layer peers have no knob: they are
set by segments of one layer each (``uses_snaps=False``: ``--snaps`` is recorded as the
number of layers). Pure: no arrays, no I/O.
"""

from __future__ import annotations

from ckptbench.schedules.strategy import Setting, StrategySpec

__all__ = [
    "CHECKPOINT_SEQUENTIAL",
    "EQUINOX",
    "JAX_CHECKPOINT",
    "JAX_DOTS_SAVEABLE",
    "JAX_EVERY_LAYER",
    "STACK_PEERS",
    "TORCH_CHECKPOINT",
    "TORCH_EVERY_LAYER",
    "TORCH_SELECTIVE",
]

#: Why a JAX peer has no recomputation floor.
_JAX_UNCOUNTED = (
    "its recomputations run inside JAX's compiled gradient, where no evaluation is counted"
)

#: torch.utils.checkpoint over equal segments.
TORCH_CHECKPOINT = StrategySpec(
    name="torch-checkpoint",
    label="torch.utils.checkpoint",
    marker="v",
    setting=Setting.SEGMENTS,
    help="torch.utils.checkpoint over --snaps equal segments (the peer)",
    backend="torch",
    factory="ckptbench.backends.torch.peers:torch_checkpoint",
)

#: jax.checkpoint over equal segments of a scan.
JAX_CHECKPOINT = StrategySpec(
    name="jax-checkpoint",
    label="jax.checkpoint",
    marker="P",
    setting=Setting.SEGMENTS,
    help="jax.checkpoint over --snaps equal scan segments (the peer)",
    backend="jax",
    factory="ckptbench.backends.jax.peers:scan_checkpoint",
    no_floor=_JAX_UNCOUNTED,
)

#: equinox's checkpointed while loop.
EQUINOX = StrategySpec(
    name="equinox",
    label="equinox checkpointed loop",
    marker="X",
    setting=Setting.CHECKPOINTS,
    help="equinox's checkpointed while loop with --snaps checkpoints (the peer)",
    backend="jax",
    factory="ckptbench.backends.jax.peers:equinox_checkpoint",
    requires=("equinox",),
    no_floor=_JAX_UNCOUNTED,
)


def _sequential_note(layers: int, segments: int) -> str | None:
    """``checkpoint_sequential`` checkpoints all its segments but the last: with one
    segment it checkpoints nothing, which a case set so is told."""
    if segments > 1:
        return None
    return (
        "checkpoint-sequential with 1 segment checkpoints nothing: torch runs the last "
        "segment without checkpointing, and here it is every layer, so the checkpointed mode "
        "is the plain gradient (with --snaps k, k - 1 segments are checkpointed)"
    )


#: torch.utils.checkpoint.checkpoint_sequential over segments of layers.
CHECKPOINT_SEQUENTIAL = StrategySpec(
    name="checkpoint-sequential",
    label="checkpoint_sequential",
    marker="<",
    setting=Setting.SEGMENTS,
    help="torch.utils.checkpoint.checkpoint_sequential over --snaps segments of layers",
    backend="torch",
    chain_factory="ckptbench.backends.torch.peers:sequential_chain",
    note=_sequential_note,
)

#: torch.utils.checkpoint around every layer.
TORCH_EVERY_LAYER = StrategySpec(
    name="torch-every-layer",
    label="checkpoint per layer",
    marker=">",
    setting=Setting.SEGMENTS,
    help="torch.utils.checkpoint around every layer of a chain (--snaps unused)",
    uses_snaps=False,
    backend="torch",
    chain_factory="ckptbench.backends.torch.peers:every_layer_chain",
)

#: PyTorch's selective activation checkpointing around every layer.
TORCH_SELECTIVE = StrategySpec(
    name="torch-selective",
    label="selective AC (matmuls saved)",
    marker="h",
    setting=Setting.SEGMENTS,
    help="selective activation checkpointing per layer: matmul/conv outputs saved",
    uses_snaps=False,
    backend="torch",
    chain_factory="ckptbench.backends.torch.peers:selective_chain",
    no_floor="it recomputes only the operations it does not save (matrix products and "
    "convolutions are kept), not whole layers: its layer calls are not whole evaluations",
)

#: jax.checkpoint around every layer (nothing_saveable, its default).
JAX_EVERY_LAYER = StrategySpec(
    name="jax-every-layer",
    label="jax.checkpoint per layer",
    marker="p",
    setting=Setting.SEGMENTS,
    help="jax.checkpoint around every layer of a chain, nothing saved (--snaps unused)",
    uses_snaps=False,
    backend="jax",
    chain_factory="ckptbench.backends.jax.peers:every_layer_chain",
    no_floor=_JAX_UNCOUNTED,
)

#: jax.checkpoint around every layer with dots_saveable.
JAX_DOTS_SAVEABLE = StrategySpec(
    name="jax-dots-saveable",
    label="jax.checkpoint per layer, dots_saveable",
    marker="*",
    setting=Setting.SEGMENTS,
    help="jax.checkpoint per layer with policy dots_saveable (matmul outputs saved)",
    uses_snaps=False,
    backend="jax",
    chain_factory="ckptbench.backends.jax.peers:dots_saveable_chain",
    no_floor=_JAX_UNCOUNTED,
)

#: The peers for layer chains, in registration order.
STACK_PEERS = (
    CHECKPOINT_SEQUENTIAL,
    TORCH_EVERY_LAYER,
    TORCH_SELECTIVE,
    JAX_EVERY_LAYER,
    JAX_DOTS_SAVEABLE,
)
