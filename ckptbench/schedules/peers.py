"""The frameworks' own checkpointing, measured beside ours: strategies that are not our
action streams, so they have no step counts of ours and no replay.

* ``torch-checkpoint`` — ``torch.utils.checkpoint`` over ``--snaps`` equal segments
  (non-reentrant; Chen et al., "Training deep nets with sublinear memory cost", 2016);
* ``jax-checkpoint`` — ``jax.checkpoint`` (remat) over ``--snaps`` equal segments of a
  ``lax.scan``;
* ``equinox`` — equinox's checkpointed while loop with ``--snaps`` checkpoints (online
  binomial checkpointing; Stumm & Walther, "New algorithms for optimal online
  checkpointing", SISC 32(2), 2010).

Each peer is declared here once: its backend, and the factory ``"module:function"`` that
backend resolves (``factory(step, post, steps, snaps) -> loop``). Pure: no arrays, no I/O.
"""

from __future__ import annotations

from ckptbench.schedules.strategy import Setting, StrategySpec

__all__ = ["EQUINOX", "JAX_CHECKPOINT", "TORCH_CHECKPOINT"]

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
)
