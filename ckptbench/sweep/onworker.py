"""What a Dask sweep runs on a worker (``sweep.dask`` sends it; docs/cluster.md).

:func:`remote_cell` measures one cell there and returns its JSON document; before it
measures, it checks that the worker reads the plug-in's file and the files the plug-in
check loaded (:class:`~ckptbench.measure.sources.CheckedSources`) as the check read them
here: a relative path resolves from each worker's own folder, so a worker's copy may be
another file than the one checked, and a cell measured from it would record the check's
digests for other code. :func:`stop_cells` stops a sweep's cells there (``Client.run``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ckptbench.measure.launch import Interrupted, request_stop, stop_reason
from ckptbench.measure.sources import CheckedSources, file_digest
from ckptbench.results.schema import Case, RunResult, result_to_dict

if TYPE_CHECKING:
    from ckptbench.measure.tasks import PluginChecked

__all__ = ["plugin_digest", "remote_cell", "stop_cells"]

RunCell = Callable[..., RunResult]

_CELLS: dict[str, set[int]] = {}  # sweep token -> threads measuring its cells here
_STOPPED: dict[str, int] = {}  # sweep token -> the signal its submitter got

#: Where a worker's copy that differs leaves the user (a relative path resolves from each
#: worker's folder).
_WHERE = (
    "not measured (a relative path resolves from each worker's folder; start the workers "
    "there, or give an installed module)"
)


def remote_cell(
    run_cell: RunCell | None, case_data: dict[str, Any], token: str = "",
    plugin_sha256: str | None = None, checked: PluginChecked | None = None,
    plugin_at_check: bool = False,
) -> dict:  # fmt: skip
    """Runs on a Dask worker: measure one cell, return its JSON document (same schema) and
    the worker's address; a stop (:func:`stop_cells`) returns the part measured so far.
    A plug-in cell first checks that the worker reads the plug-in with ``plugin_sha256``
    (the check's digest where ``plugin_at_check``, else the submitting machine's) and each
    file the check loaded (``checked``, what the plug-in check found, as ``for_workers``
    sends it) with the check's digest: one that differs is the cell's error, nothing
    measured. It gets what ``run`` gets of the check: its watch of those files starts at
    the check, and it records the dtypes of the loss and of what it gets
    (``PluginChecked.run_options``); the files this worker does not have are returned as
    ``not_found`` (the cell's note)."""
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):  # pragma: no cover - always on a worker here
        address = ""
    case = Case.from_dict(case_data)
    if plugin_sha256 is not None:
        same_plugin(case.model, plugin_sha256, address, plugin_at_check)
    given: dict[str, Any] = {}
    missing: tuple[str, ...] = ()
    if checked is not None:
        found = None
        if checked.sources is not None:
            same_sources(checked.sources, address)
            found, missing = checked.sources.found_here()
        given = checked.run_options(found)
    thread = threading.get_ident()
    _CELLS.setdefault(token, set()).add(thread)
    try:
        if token in _STOPPED:
            raise Interrupted(_STOPPED[token])
        if run_cell is None:
            from ckptbench.measure.runner import run_case as run_cell
        result = run_cell(case, out_path=None, progress=None, **given)
    except (Interrupted, KeyboardInterrupt) as err:
        partial = getattr(err, "result", None)
        doc = None
        if isinstance(partial, RunResult) and partial.modes:
            doc = result_to_dict(_with_host(partial))
        return {"result": doc, "worker": address, "interrupted": stop_reason(err),
                "not_found": list(missing)}  # fmt: skip
    finally:
        _CELLS.get(token, set()).discard(thread)
        request_stop(thread, None)
    return {"result": result_to_dict(_with_host(result)), "worker": address,
            "not_found": list(missing)}  # fmt: skip


def plugin_digest(case: Case, checked: CheckedSources | None = None) -> tuple[str | None, bool]:
    """The SHA-256 a worker's copy of a plug-in cell's file must have, and whether it is the
    plug-in check's (``checked``, when it lists the file) or the file's as the submitting
    machine reads it now. None: a built-in, or a file it cannot find (the worker's own
    check then decides)."""
    if ":" not in case.model:
        return None, False
    from ckptbench.workloads import plugin_provenance, plugin_source_file

    own = plugin_source_file(case.model)
    if own is not None and checked is not None:
        digest = checked.digest_of(own)
        if digest is not None:
            return digest, True
    return (plugin_provenance(case.model) or {}).get("sha256"), False


def same_plugin(model: str, expected: str, worker: str, at_check: bool = False) -> None:
    """On the worker: RuntimeError (the cell's error, reported, nothing measured) unless its
    plug-in source has the SHA-256 ``expected`` (the check's where ``at_check``)."""
    from ckptbench.workloads import plugin_provenance

    here = plugin_provenance(model) or {}
    got = here.get("sha256")
    if got == expected:
        return
    if at_check:
        there = got[:12] if got else "none: it cannot find or read it"
        raise RuntimeError(
            f"the plug-in's file {here.get('path', model)} differs on Dask worker "
            f"{worker or '?'} from the file the plug-in check read here (SHA-256 "
            f"{expected[:12]} at the check, {there} there): {_WHERE}"
        )
    seen = f"reads {here.get('path', model)} with SHA-256 {got[:12]}" if got else (
        "cannot find or read it")  # fmt: skip
    raise RuntimeError(f"worker {worker or '?'} {seen}, the submitting machine {expected[:12]}: "
                       f"{_WHERE}")  # fmt: skip


def same_sources(checked: CheckedSources, worker: str) -> None:
    """On the worker: RuntimeError (nothing measured) when its copy of a file the plug-in
    check loaded (as sent) has another SHA-256 than the check read; a file it does not have
    is no error here (``found_here`` names it)."""
    import os

    for path, digest in checked.files:
        if digest is None or not os.path.isfile(path):
            continue
        there = file_digest(path)
        if there != digest:
            raise RuntimeError(
                f"{path} differs on Dask worker {worker or '?'} from the file the plug-in "
                f"check read here (SHA-256 {digest[:12]} at the check, "
                f"{there[:12] if there else 'unreadable'} there): {_WHERE}"
            )


def _with_host(result: RunResult) -> RunResult:
    return result if result.host else replace(result, host=socket.gethostname())


def stop_cells(token: str, signum: int) -> int:
    """Runs on each worker (``Client.run``): stop every cell of sweep ``token`` there, now
    and when one starts later; how many were running."""
    _STOPPED[token] = signum
    threads = list(_CELLS.get(token, ()))
    for thread in threads:
        request_stop(thread, signum)
    return len(threads)
