"""The contract between the worker and a backend (autograd, torch).

A backend turns a (case, mode) into :class:`Built`: the parameters, a function computing
the loss and its gradient, a step-call counter and the executor's counters. The worker
measures it; it knows nothing else about the backend (see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Built"]


@dataclass(frozen=True)
class Built:
    """What a backend gives the worker for one (case, mode)."""

    params: Any
    gradient: Callable[[Any], tuple[float, Any]]  # params -> (loss, gradient tree)
    calls: list[int]  # step-call counter, reset before every iteration
    counters: Callable[[], dict[str, Any]]  # executor counters after the last iteration
    flatten: Callable[[Any], Any]  # gradient tree -> 1-D float64 numpy array
    phases: Callable[[], dict[str, float]] = dict  # executor phase times of the last call
    plan: Callable[[], dict[str, Any]] = dict  # the plan an ``optimal`` executor ran, if any
    device_meter: Any = None  # CUDA: ``measure()`` context giving the device's peak bytes
