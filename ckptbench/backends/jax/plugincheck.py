"""JAX: the plug-in check's JAX side (:mod:`ckptbench.workloads.check`, run only in a
disposable worker: it executes the plug-in)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ckptbench.workloads import Sizes
from ckptbench.workloads.chain import check_chain_init, is_chain
from ckptbench.workloads.check import PluginCheck

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = ["JaxCheck"]


class JaxCheck(PluginCheck):
    """How the plug-in check loads a JAX plug-in, stacks its outputs and differentiates."""

    name = "jax"

    def load(self, case: Case) -> tuple[Any, Any, Any, Any, Any]:
        from ckptbench.backends.jax import pin_threads, require_jax

        pin_threads(getattr(case, "threads", None))
        require_jax()  # float64 on, as in every mode
        from ckptbench.backends.jax.workloads import load_jax_workload

        wl = load_jax_workload(case.model, Sizes(**case.sizes()), case.dtype)  # as a mode
        self.user = getattr(wl, "workload", wl)
        rng = np.random.default_rng(case.seed)
        if is_chain(wl):
            return (self.user, wl, *check_chain_init(wl.init(case.steps, rng), case.steps), None)
        params, state0, inputs = wl.init(case.steps, rng)
        return (self.user, wl, params, state0, inputs)

    def nonfinite(self, leaf: Any) -> tuple[int, int, Any] | None:
        import jax
        import jax.numpy as jnp

        if not isinstance(leaf, jax.Array):
            return super().nonfinite(leaf)
        if not jnp.issubdtype(leaf.dtype, jnp.inexact):  # counted on its device
            return 0, int(leaf.size), None
        ok = jnp.isfinite(leaf).ravel()
        bad = int(leaf.size) - int(jnp.count_nonzero(ok))
        return bad, int(leaf.size), leaf.ravel()[jnp.argmin(ok)].item() if bad else None

    def stack(self, ys: list[Any]) -> Any:
        import jax.numpy as jnp

        return jnp.stack(ys)

    def value_and_grad(self, f: Callable[[Any], Any], params: Any) -> tuple[Any, Any]:
        import jax

        return jax.jit(jax.value_and_grad(f))(params)
