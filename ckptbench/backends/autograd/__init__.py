"""The autograd backend: the built-in workloads and every strategy of ours, run with autograd.

* ``framework`` — autograd's operations for the modes written once in
  :mod:`ckptbench.backends.modes`, and ``BACKEND``;
* ``binding`` — ``binomial_checkpoint``: any action stream of :mod:`ckptbench.schedules` as
  one autograd primitive over :mod:`ckptbench.engine` (Griewank & Walther, Algorithm 799:
  Revolve, 2000).
"""

from __future__ import annotations

from ckptbench.backends.spec import BackendSpec

__all__ = ["SPEC"]

#: The default backend: numpy with autograd (the project's own dependencies).
SPEC = BackendSpec(
    name="autograd",
    module="ckptbench.backends.autograd.framework",
    requires=("autograd",),
    plugin_check="ckptbench.backends.autograd.plugincheck:AutogradCheck",
    plugins_own_dtype=True,  # a float32 plug-in computes in float32: --dtype casts nothing
    worker_start_s=0.5,  # numpy and autograd: 0.4 s measured on the 2-core VM, 2026-11-28
)
