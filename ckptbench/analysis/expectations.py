"""Where a cell's ``[expect]`` thresholds come from: one table, a sweep config (per
strategy), a mapping by strategy, a function of the case, or the sweep manifests among the
results (for the cells they list only)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ckptbench.results.manifests import expectations_from_manifests, manifest_keys
from ckptbench.results.schema import Case
from ckptbench.results.store import ManifestFiles
from ckptbench.sweep.config import Expect, SweepConfig

__all__ = ["ExpectSource", "expect_for", "manifest_expectations"]

ExpectSource = Expect | SweepConfig | Mapping[str, Expect] | Callable[[Case], Expect] | None


def expect_for(source: ExpectSource, case: Case) -> Expect | None:
    """The thresholds ``case`` is held to under ``source`` (None: none)."""
    if source is None:
        return None
    if isinstance(source, Expect):
        return source
    if isinstance(source, SweepConfig):
        return source.expect_for(case)
    if isinstance(source, Mapping):
        return source.get(case.strategy, source.get("*"))
    return source(case)


def manifest_expectations(
    results: Sequence[str | Path], manifests: ManifestFiles | None = None
) -> ExpectSource:
    """The ``[expect]`` recorded in the sweep manifests among ``results``, for the cells
    those manifests list only: a loose result file given beside a sweep folder is not held
    to that sweep's thresholds (None: no manifest records any). ``manifests``: each read
    once."""
    table = expectations_from_manifests(results, manifests)
    if table is None:
        return None
    keys = manifest_keys(results, manifests)
    return lambda case: expect_for(table, case) if case.key in keys else None
