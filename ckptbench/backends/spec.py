"""What a backend declares: :class:`BackendSpec` (cheap: no framework is imported) and the
:class:`Backend` its implementing module provides. A backend folder's ``__init__`` imports
this module only, so declaring a backend never loads the registry or a framework."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Protocol

from ckptbench.backends.contract import Built, CaseView
from ckptbench.backends.require import MissingPackageError, not_installed_message
from ckptbench.measure.costwork import CostsWork

__all__ = ["Backend", "BackendSpec", "BackendUnavailableError"]


class BackendUnavailableError(MissingPackageError):
    """A backend was asked for that cannot run here (one line, saying why and how to fix).

    An ``ImportError`` (what callers catch around a backend's import) and a ``ValueError``
    (the project's bad-input convention) at once.
    """


class Backend(Protocol):
    """What a backend module's ``BACKEND`` provides to the worker."""

    name: str

    def build_gradient(
        self, case: CaseView, mode: Any, costs: dict[str, Any] | None = None
    ) -> Built:
        """The worker's view of ``case`` in ``mode`` (``costs``: strategy optimal's plan
        costs, a ``planner.Costs`` document)."""

    def measure_costs(self, case: CaseView) -> dict[str, Any]:
        """The planner's step costs measured on this framework (``StepCostReport.as_dict``)."""

    def device_problem(self, case: CaseView) -> str | None:
        """Why this framework cannot compute on ``case.device`` here (None when it can)."""


@dataclass(frozen=True)
class BackendSpec:
    """One registered backend (cheap to import: no framework is loaded)."""

    name: str
    module: str  # imported lazily; defines BACKEND
    requires: tuple[str, ...] = ()  # top-level packages that must be importable
    #: its side of the plug-in check, ``module:Class`` (a ``workloads.check.PluginCheck``)
    plugin_check: str = ""
    #: the distributions whose versions its results record (numpy's and autograd's always are)
    distributions: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    install_hint: str = ""
    #: other names of a device, e.g. (("gpu", "cuda"),): JAX calls an NVIDIA GPU "gpu"
    device_aliases: tuple[tuple[str, str], ...] = ()
    #: runs every action stream of ckptbench.schedules (our strategies), not only its peers
    runs_streams: bool = True
    #: floating-point types it computes in (``--dtype``)
    dtypes: tuple[str, ...] = ("float64",)
    #: a plug-in's arrays keep their own dtype, which the plug-in check records as the
    #: case's (autograd: nothing casts them); False: ``--dtype`` casts ``init``'s arrays and
    #: the check refuses a plug-in whose own code leaves it (``measure.tasks``)
    plugins_own_dtype: bool = False
    #: how it runs our schedules (``--executor``); the first is the default
    executors: tuple[str, ...] = ("engine",)
    #: a device's own default executor, e.g. (("cpu", "compiled"),)
    device_executors: tuple[tuple[str, str], ...] = ()
    #: the executors that hold a layer chain's changing state shapes (empty: every one)
    chain_executors: tuple[str, ...] = ()
    #: (executor, device, note): what ``run`` tells a user who runs that executor there
    executor_notes: tuple[tuple[str, str, str], ...] = ()
    #: the executors whose first sweep records its advances on the framework's graph (torch's
    #: one-call): ``run``'s "where the time goes" calls them advances, not recomputation
    recording_executors: tuple[str, ...] = ()
    #: why ``run --trace`` cannot record it action by action (empty: it can)
    untraced: str = ""
    #: every worker first runs a miniature of the case in all three modes, so the library
    #: code each mode maps in on first use is resident in every mode before the measured
    #: iterations (``ckptbench.measure.priming``; torch: libtorch's pages, MiBs per mode)
    primes_modes: bool = False
    #: about how long a worker takes to start on the CPU (interpreter, framework import), s;
    #: for estimates only (``sweep.progress.estimated_seconds``)
    worker_start_s: float = 3.0
    #: how its step-cost measurement runs (samples, warm-ups, tapes counted or sloped), so
    #: that an estimate counts it before it runs (``measure.costwork``)
    costs_work: CostsWork = field(default_factory=CostsWork)

    def default_executor(self, device: str) -> str:
        """The executor a case on ``device`` runs without ``--executor``."""
        return dict(self.device_executors).get(device, self.executors[0])

    def executor_note(self, executor: str, device: str) -> str | None:
        """What to tell a user who runs ``executor`` on ``device`` (None: nothing)."""
        return next((n for e, d, n in self.executor_notes if (e, d) == (executor, device)), None)

    def available(self) -> str | None:
        """``None`` when this backend can run here, else the reason (one line)."""
        for package in self.requires:
            if importlib.util.find_spec(package) is None:
                return not_installed_message(f"--backend {self.name}", package, self.install_hint)
        return None

    def load(self) -> Backend:
        """Import the backend's module and return its ``BACKEND``."""
        reason = self.available()
        if reason is not None:
            raise BackendUnavailableError(reason)
        return importlib.import_module(self.module).BACKEND
