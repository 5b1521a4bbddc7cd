"""The JAX backend: the same workloads and modes, our schedules compiled into XLA.

Importing this package does not import JAX; its submodules do. Every entry point a user
reaches (``modes.build_gradient``) first calls :func:`require_jax`, so a missing JAX is one
line (:class:`JaxMissingError`, a ``ValueError``) that ``cli`` turns into exit status 2.
Install with the optional extra: ``pip install 'ckptbench[jax]'``.

One thread: XLA's CPU thread pool is sized from the CPUs the process may run on, and its
flags alone do not make it single-threaded. :func:`pin_threads` therefore pins the process
to one CPU it is allowed (``os.sched_setaffinity``, where available) *before* JAX is
imported, when a case asks for one thread. :func:`require_jax` also enables float64
(``jax_enable_x64``), which the workloads need.

Submodules:

* ``table`` — action streams as int32 rows of one template (pure, no JAX);
* ``binding`` — ``compiled_checkpoint``: the table run by ``lax.fori_loop`` under
  ``jax.custom_vjp`` (Griewank & Walther, Algorithm 799: Revolve, 2000);
* ``peers`` — ``jax.checkpoint`` over equal scan segments and equinox's checkpointed loop;
* ``workloads`` — ``JaxRNN``, ``JaxLSTM`` and plug-ins with ``jax.numpy``;
* ``modes`` — ``build_gradient(case, mode, costs)``, the JAX twin of the worker's;
* ``dispatch`` — ``engine_checkpoint``: the engine drives the stream, each step's pieces
  compiled once (``--executor engine``; any state shapes);
* ``costs`` — the step costs the planner plans with, measured with JAX;
* ``layercosts`` — a layer chain's per-layer costs, on the chain executor's pieces;
* ``device`` — device-memory peaks for ``--device gpu``.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ckptbench.backends.require import MissingPackageError, require
from ckptbench.backends.spec import BackendSpec
from ckptbench.measure.costwork import CostsWork

__all__ = ["INSTALL_HINT", "SPEC", "JaxMissingError", "pin_threads", "require_jax"]

#: What to run when JAX is missing.
INSTALL_HINT = "pip install 'ckptbench[jax]'"

#: The JAX backend: CPU and NVIDIA GPUs (``--device gpu`` is CUDA).
SPEC = BackendSpec(
    name="jax",
    module="ckptbench.backends.jax.modes",
    requires=("jax",),
    plugin_check="ckptbench.backends.jax.plugincheck:JaxCheck",
    distributions=("jax", "jaxlib", "equinox"),
    devices=("cpu", "cuda"),
    device_aliases=(("gpu", "cuda"),),
    dtypes=("float64", "float32", "bfloat16"),
    executors=("engine", "compiled"),
    device_executors=(("cpu", "compiled"),),
    chain_executors=("engine",),
    install_hint=INSTALL_HINT,
    # costs.measure_jax_costs: each scan and gradient compiled, run once, then timed 3 times
    costs_work=CostsWork(
        samples=3, warmups=1, whole_chain=True, counts_tapes=True, unknown="JAX's compilations"
    ),
    untraced="JAX dispatches its compiled pieces asynchronously (and the compiled executor "
    "runs the schedule inside XLA), so a host clock and RSS read at each action would not "
    "be that action's",
)


class JaxMissingError(MissingPackageError):
    """The JAX backend was asked for but JAX cannot be imported (a one-line message)."""


def pin_threads(threads: int | None) -> int | None:
    """Pin this process to one allowed CPU when ``threads == 1`` and JAX is not yet imported.

    Returns the CPU pinned to, or ``None`` when nothing was done (more threads, no
    ``sched_setaffinity``, or JAX already imported: pinning then no longer sizes XLA's pool).
    """
    if threads != 1 or "jax" in sys.modules or not hasattr(os, "sched_setaffinity"):
        return None
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return cpu


def require_jax() -> Any:
    """Return the ``jax`` module (float64 enabled), or raise :class:`JaxMissingError`."""
    jax = require("jax", "--backend jax", INSTALL_HINT, shown="JAX", error=JaxMissingError)
    jax.config.update("jax_enable_x64", True)
    return jax
