"""The backend registry: which frameworks compute gradients, and how the worker reaches them.

A registered backend is a :class:`BackendSpec`: a name, the devices it runs on, the
packages it needs (``available()`` gives the reason when one cannot be imported) and the
module that implements it, imported only when a case runs on it (the worker of an autograd
case never imports torch). That module's ``BACKEND`` is a :class:`Backend`: it builds the
three modes of a case (``build_gradient``) and measures the step costs the planner needs on
its own framework (``measure_costs``).

Most backends give the generic path, :class:`ckptbench.backends.modes.FrameworkBackend`:
the three modes written once over a few framework operations, and our schedules run by
:mod:`ckptbench.engine` through the framework's binding. A backend that compiles the whole
action stream itself (JAX) gives its own ``build_gradient`` instead; both pass
``tests/test_contract.py``. Adding a backend: one :func:`register` call here (or from the
backend's package) and the module named in it (see docs/architecture.md, "Backends").
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Protocol

from ckptbench.backends.contract import Built
from ckptbench.schedules import strategy_names

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendSpec",
    "BackendUnavailableError",
    "backend_names",
    "build",
    "device_problem",
    "get_backend",
    "measure_costs",
    "register",
    "spec",
    "strategies",
]


class BackendUnavailableError(ImportError, ValueError):
    """A backend was asked for that cannot run here (one line, saying why and how to fix).

    An ``ImportError`` (what callers catch around a backend's import) and a ``ValueError``
    (the project's bad-input convention) at once.
    """


class Backend(Protocol):
    """What a backend module's ``BACKEND`` provides to the worker."""

    name: str

    def build_gradient(self, case: Any, mode: Any, costs: dict[str, Any] | None = None) -> Built:
        """The worker's view of ``case`` in ``mode`` (``costs``: strategy optimal's plan
        costs, a ``planner.Costs`` document)."""

    def measure_costs(self, case: Any) -> dict[str, Any]:
        """The planner's step costs measured on this framework (``StepCostReport.as_dict``)."""

    def device_problem(self, case: Any) -> str | None:
        """Why this framework cannot compute on ``case.device`` here (None when it can)."""


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend (cheap to import: no framework is loaded)."""

    name: str
    module: str  # imported lazily; defines BACKEND
    requires: tuple[str, ...] = ()  # top-level packages that must be importable
    devices: tuple[str, ...] = ("cpu",)
    install_hint: str = ""
    runs_streams: bool = True  # runs our action streams (every strategy that is ours)

    def available(self) -> str | None:
        """``None`` when this backend can run here, else the reason (one line)."""
        for package in self.requires:
            if importlib.util.find_spec(package) is None:
                hint = f"; {self.install_hint}" if self.install_hint else ""
                return f"--backend {self.name} needs {package}, which is not installed{hint}"
        return None

    def load(self) -> Backend:
        """Import the backend's module and return its ``BACKEND``."""
        reason = self.available()
        if reason is not None:
            raise BackendUnavailableError(reason)
        return importlib.import_module(self.module).BACKEND


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


def get_backend(name: str) -> Backend:
    """The loaded backend ``name`` (imports its framework)."""
    return spec(name).load()


def build(case: Any, mode: Any, costs: dict[str, Any] | None = None) -> Built:
    """``case`` in ``mode`` on the case's backend: what the worker measures."""
    return get_backend(case.backend).build_gradient(case, mode, costs)


def measure_costs(case: Any) -> dict[str, Any]:
    """The step costs of ``case``'s workload, measured on the case's backend."""
    return get_backend(case.backend).measure_costs(case)


def device_problem(case: Any) -> str | None:
    """Why the case's backend cannot compute on its ``device`` here (None when it can).

    Imports the framework: the worker's ``device`` task asks it, never ckptbench's process.
    """
    return get_backend(case.backend).device_problem(case)


register(
    BackendSpec(
        name="autograd", module="ckptbench.backends.autograd.framework", requires=("autograd",)
    )
)
register(
    BackendSpec(
        name="torch",
        module="ckptbench.backends.torch.framework",
        requires=("torch",),
        devices=("cpu", "cuda"),
        install_hint="pip install 'ckptbench[torch]'",
    )
)
register(
    BackendSpec(
        name="jax",
        module="ckptbench.backends.jax.modes",
        requires=("jax",),
        devices=("cpu", "cuda"),
        install_hint="pip install 'ckptbench[jax]'",
    )
)
