"""Backends: the contract between the worker and a framework, and the registry of them.

* :mod:`ckptbench.backends.contract` — :class:`Built` (what a backend gives the worker for
  one case and mode), the executors' counters (:class:`CheckpointStats`) and the plain loop
  every backend's baseline and normal modes run;
* :mod:`ckptbench.backends.registry` — the :class:`Backend` protocol and the registry
  (autograd, torch; a new framework registers one more entry);
* :mod:`ckptbench.backends.modes` — the three modes written once over a backend's
  framework operations.

Importing this package imports no framework (see docs/architecture.md, "Backends").
"""

from __future__ import annotations

from ckptbench.backends.contract import (
    Built,
    CheckpointStats,
    ExecutorCounters,
    counting,
    loop_counters,
    loop_phases,
    unrolled_outputs,
)

__all__ = [
    "Built",
    "CheckpointStats",
    "ExecutorCounters",
    "counting",
    "loop_counters",
    "loop_phases",
    "unrolled_outputs",
]
