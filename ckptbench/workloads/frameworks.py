"""Which framework a plug-in computes with: the backend whose arrays a value holds, the
frameworks its module imports, and the one line that names the ``--backend`` to use.

The plug-in check (:mod:`ckptbench.workloads.check`) and each backend's side of it read
these to tell a plug-in written for another framework which backend runs it. Only ever
run in the disposable worker, so it imports numpy and nothing heavier: a framework is
looked up in ``sys.modules``, never imported.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np

__all__ = [
    "ARRAYS",
    "WRITTEN_WITH",
    "framework_of",
    "frameworks_imported",
    "frameworks_in",
    "leaves",
    "wrong_backend",
]

#: What each backend's arrays are called in messages.
ARRAYS = {"torch": "torch tensors", "jax": "JAX arrays", "autograd": "numpy arrays"}
#: Backends whose arrays a step can return by accident (numpy ops on another framework's
#: arrays): what such a plug-in is written with.
WRITTEN_WITH = {"autograd": "numpy or autograd.numpy"}


def framework_of(x: Any) -> str | None:
    """The backend whose arrays ``x`` is ("torch", "jax", "autograd" for numpy), or None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor | torch.nn.Module):
        return "torch"
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        return "jax"
    eqx = sys.modules.get("equinox")
    if eqx is not None and isinstance(x, eqx.Module):
        return "jax"
    if isinstance(x, np.ndarray | np.generic) or type(x).__module__.startswith("autograd"):
        return "autograd"
    return None


def leaves(tree: Any) -> list[Any]:
    """The leaves of a nest of dicts, tuples and lists, in order (a leaf is anything else)."""
    if isinstance(tree, dict):
        return [leaf for k in tree for leaf in leaves(tree[k])]
    if isinstance(tree, tuple | list):
        return [leaf for v in tree for leaf in leaves(v)]
    return [tree]


def frameworks_in(tree: Any) -> set[str]:
    """The backends whose arrays ``tree``'s leaves are (:func:`framework_of`)."""
    return {f for f in map(framework_of, leaves(tree)) if f is not None}


def frameworks_imported(workload: Any) -> set[str]:
    """Frameworks the plug-in's module imports (its globals), as backend names."""
    found: set[str] = set()
    spaces = []
    for name in ("step", "init", "post"):
        g = getattr(getattr(getattr(workload, name, None), "__func__", None), "__globals__", None)
        if isinstance(g, dict):
            spaces.append(g)
    module = sys.modules.get(type(workload).__module__)
    if module is not None:
        spaces.append(vars(module))
    tops = {"torch": "torch", "jax": "jax", "equinox": "jax", "autograd": "autograd"}
    for space in spaces:
        for value in list(space.values()):
            mod = value if isinstance(value, types.ModuleType) else None
            name = mod.__name__ if mod is not None else getattr(value, "__module__", None)
            if isinstance(name, str) and name.split(".")[0] in tops:
                found.add(tops[name.split(".")[0]])
    return found


def wrong_backend(found: str, backend: str) -> str:
    """The one line for a plug-in that returns ``found``'s arrays: the ``--backend`` to use."""
    what = {"torch": "torch tensors", "jax": "JAX arrays", "autograd": "numpy arrays"}[found]
    return f"this plug-in returns {what}: use --backend {found}"
