"""``build_gradient(case, mode, costs)`` for ``--backend jax``: the worker's contract in JAX.

This module imports no JAX itself: :func:`build_gradient` first pins the process to one CPU
when the case asks for one thread (:func:`ckptbench.backends.jax.pin_threads`; XLA sizes its
thread pool when JAX is imported, so this must come first), then imports JAX
(:func:`ckptbench.backends.jax.require_jax`, float64 on) and builds the gradient in
:mod:`ckptbench.backends.jax.gradients`. See that module for the modes and what is compiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ckptbench.backends import Built
from ckptbench.backends.jax import pin_threads, require_jax

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["BACKEND", "build_gradient", "measure_costs"]


def build_gradient(case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Built:
    """The worker's view of ``case`` in ``mode`` on the JAX backend, compiled before return."""
    pin_threads(getattr(case, "threads", None))
    require_jax()
    from ckptbench.backends.jax.gradients import make_built

    return make_built(case, mode, costs)


def measure_costs(case: Case) -> dict[str, Any]:
    """The planner's step costs of ``case`` measured on JAX (a ``costs_report`` document)."""
    pin_threads(getattr(case, "threads", None))
    require_jax()
    from ckptbench.backends.jax.costs import measure_jax_costs

    return measure_jax_costs(case)


class _JaxBackend:
    """The registry's view of this module (``ckptbench.backends.registry.Backend``): JAX
    compiles the whole action stream itself, so it gives its own ``build_gradient``."""

    name = "jax"

    def build_gradient(self, case: Case, mode: Any, costs: dict[str, Any] | None = None) -> Built:
        return build_gradient(case, mode, costs)

    def measure_costs(self, case: Case) -> dict[str, Any]:
        return measure_costs(case)

    def device_problem(self, case: Case) -> str | None:
        device = case.device
        require_jax()  # on the CPU too: a JAX that raises on import is said before measuring
        if device == "cpu":
            return None
        from ckptbench.backends.jax.device import resolve_device

        try:
            resolve_device(device)
        except ValueError:
            import jax

            return f"jax {jax.__version__} sees no GPU here (needs a GPU build and a visible GPU)"
        return None


#: What the backend registry loads for ``--backend jax``.
BACKEND = _JaxBackend()
