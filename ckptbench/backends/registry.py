"""The backend registry: which frameworks compute gradients, and how the worker reaches them.

A backend is one folder, ``ckptbench/backends/<name>/``, whose ``__init__`` imports no
framework and declares one :class:`BackendSpec` as ``SPEC``: a name, the devices it runs on
(and their other names), the packages it needs (``available()`` gives the reason when one
cannot be imported), whether it runs ckptbench's action streams, and the module that
implements it, imported only when a case runs on it (the worker of an autograd case never
imports torch). The registry finds the folders itself (:func:`discover`, asv's plug-in
folder with a lazy import); a backend from elsewhere (a test's toy) calls :func:`register`.
The implementing module's ``BACKEND`` is a :class:`Backend`: it builds the three modes of a
case (``build_gradient``) and measures the step costs the planner needs on its own framework
(``measure_costs``).

Most backends give the generic path, :class:`ckptbench.backends.modes.FrameworkBackend`:
the three modes written once over a few framework operations, and our schedules run by
:mod:`ckptbench.engine` through the framework's binding. A backend that compiles the whole
action stream itself (JAX) gives its own ``build_gradient`` instead; both pass
``tests/test_contract.py``. Adding a backend: one folder (see docs/architecture.md,
"Backends").
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from ckptbench.backends.contract import Built, CaseView
from ckptbench.backends.spec import Backend, BackendSpec, BackendUnavailableError
from ckptbench.schedules import strategy_names

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "Backend",
    "BackendSpec",
    "BackendUnavailableError",
    "backend_names",
    "build",
    "check_strategy",
    "device_aliases",
    "device_problem",
    "discover",
    "get_backend",
    "measure_costs",
    "register",
    "resolve_device",
    "spec",
    "strategies",
]

#: The backend a case runs on unless it names one.
DEFAULT_BACKEND = "autograd"


#: Every registered backend by name, in registration order.
BACKENDS: dict[str, BackendSpec] = {}


def register(entry: BackendSpec) -> BackendSpec:
    """Add ``entry`` to :data:`BACKENDS` (a name registers once)."""
    if entry.name in BACKENDS and BACKENDS[entry.name] != entry:
        raise ValueError(f"backend {entry.name!r} is already registered")
    BACKENDS[entry.name] = entry
    return entry


def backend_names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def spec(name: str) -> BackendSpec:
    """The registered backend ``name``; a one-line ``ValueError`` for an unknown one."""
    try:
        return BACKENDS[name]
    except KeyError:
        names = ", ".join(BACKENDS)
        raise ValueError(f"unknown backend {name!r} (choose from {names})") from None


def strategies(name: str) -> tuple[str, ...]:
    """The strategies backend ``name`` runs: ours where it runs action streams, and the
    peers declared for it (``StrategySpec.runs_on``)."""
    return tuple(strategy_names(spec(name)))


def check_strategy(name: str, strategy: str) -> None:
    """One-line ``ValueError`` where backend ``name`` cannot run ``strategy`` (the worker's
    last word; the CLI refuses the case before that)."""
    available = strategies(name)
    if strategy not in available:
        raise ValueError(
            f"strategy {strategy!r} is not available on the {name} backend "
            f"(choose from {', '.join(available)})"
        )


def get_backend(name: str) -> Backend:
    """The loaded backend ``name`` (imports its framework)."""
    return spec(name).load()


def build(case: CaseView, mode: Any, costs: dict[str, Any] | None = None) -> Built:
    """``case`` in ``mode`` on the case's backend: what the worker measures."""
    return get_backend(case.backend).build_gradient(case, mode, costs)


def measure_costs(case: CaseView) -> dict[str, Any]:
    """The step costs of ``case``'s workload, measured on the case's backend."""
    return get_backend(case.backend).measure_costs(case)


def device_problem(case: CaseView) -> str | None:
    """Why the case's backend cannot compute on its ``device`` here (None when it can).

    Imports the framework: the worker's ``device`` task asks it, never ckptbench's process.
    """
    return get_backend(case.backend).device_problem(case)


def discover() -> tuple[BackendSpec, ...]:
    """Register the ``SPEC`` of every folder under ``ckptbench/backends/`` (no framework is
    imported: a backend's ``__init__`` only declares its spec)."""
    import ckptbench.backends as package

    found = []
    for info in sorted(
        pkgutil.iter_modules(package.__path__), key=lambda i: (i.name != DEFAULT_BACKEND, i.name)
    ):
        if not info.ispkg:
            continue
        entry = getattr(importlib.import_module(f"{package.__name__}.{info.name}"), "SPEC", None)
        if isinstance(entry, BackendSpec):
            found.append(register(entry))
    return tuple(found)


def device_aliases() -> dict[str, str]:
    """Every registered backend's other names of a device (``gpu`` -> ``cuda``)."""
    return {alias: device for entry in BACKENDS.values() for alias, device in entry.device_aliases}


def resolve_device(device: str) -> str:
    """``device`` under the name the backends use (``gpu`` -> ``cuda``)."""
    return device_aliases().get(device, device)


discover()
