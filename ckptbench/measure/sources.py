"""The plug-in's source files, watched while a run measures (the parent's side; nothing here
imports the plug-in).

The runner hashes the plug-in's file (``environment.plugin``, from
:func:`ckptbench.workloads.plugin_provenance`) before and after every mode, and with it the
user's own modules the plug-in imports (a helper beside it, another module of its package),
recorded with their SHA-256 in ``environment.plugin.imports`` ({path relative to the current
folder: SHA-256, or null where unreadable}). The watch starts at the plug-in check: its
worker imports the plug-in and everything it loads, and reports those files with the
SHA-256 it read right after the check (:class:`CheckedSources`), so a file edited after the
check, before or during the first mode, fails that mode. Every ok worker reports the user's
files it loaded (``worker.user_files``); one no earlier report listed (a module imported in
one mode only) is watched from that report on, hashed here. ``environment.plugin.
watched_since`` says where each file's watch started: ``check``, ``start`` (the run's
start, for the plug-in's file where the check reported no digest of it) or ``round K
MODE`` (the first report that listed it). A mode measured after a watched file changed is
failed. A sweep checks each plug-in once (per backend, and per dtype where the backend
casts: :func:`plugin_key`) and gives every cell of it the check's files; a Dask worker gets
them relative to the submitting folder (:meth:`CheckedSources.for_workers`) and watches
those it has (:meth:`CheckedSources.found_here`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ckptbench.results.schema import Case

__all__ = [
    "MAX_HASHED_BYTES",
    "CheckedSources",
    "PluginKey",
    "file_digest",
    "plugin_changed",
    "plugin_key",
    "record_worker",
    "start_watch",
]


#: A file larger than this is not hashed (no source a user edits; its digest is null).
MAX_HASHED_BYTES = 64 * 2**20


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of a file's content (``workloads.source_sha256``, as the plug-in's own
    file is hashed); None when it cannot be read or is larger than ``MAX_HASHED_BYTES``."""
    from ckptbench.workloads import source_sha256  # reads the file, never imports it

    return source_sha256(path, MAX_HASHED_BYTES)


def _relative(path: str) -> str:
    """``path`` relative to the current folder (never this machine's absolute path, as the
    plug-in's own ``path``), or as given where no relative path exists."""
    try:
        return os.path.relpath(path, Path.cwd())
    except ValueError:  # another drive
        return path


@dataclass(frozen=True)
class CheckedSources:
    """The user's source files the plug-in check's worker loaded, with the SHA-256 that
    worker read right after the check (``files``: (absolute path, SHA-256 or None), sorted,
    the plug-in's own file among them), and how many it loaded in all (``total``: it
    reports at most ``worker.MAX_USER_FILES``)."""

    files: tuple[tuple[str, str | None], ...]
    total: int

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> CheckedSources | None:
        """From the check's report (``user_sha256``, ``user_files_total``); None when it has
        none (a worker that does not report them)."""
        digests = report.get("user_sha256")
        if not isinstance(digests, dict):
            return None
        files = tuple(sorted((str(p), d if isinstance(d, str) else None)
                             for p, d in digests.items()))  # fmt: skip
        total = report.get("user_files_total")
        return cls(files, total if isinstance(total, int) else len(files))

    def digest_of(self, path: str | os.PathLike[str]) -> str | None:
        """The SHA-256 the check read of the file ``path`` (None: not among its files, or
        unreadable then)."""
        real = os.path.realpath(path)
        return next((d for f, d in self.files if os.path.realpath(f) == real), None)

    def for_workers(self) -> CheckedSources:
        """These files as a Dask worker looks for them: a file under the current folder by
        its path relative to it (resolved from each worker's own folder, as a relative
        plug-in path is), any other by its absolute path."""
        here = Path.cwd().resolve()
        files = []
        for path, digest in self.files:
            resolved = Path(path).resolve()
            inside = resolved.is_relative_to(here)
            files.append((str(resolved.relative_to(here)) if inside else path, digest))
        return CheckedSources(tuple(files), self.total)

    def found_here(self) -> tuple[CheckedSources, tuple[str, ...]]:
        """On a Dask worker: the files (of :meth:`for_workers`) this machine has, by their
        absolute path here, watched from the check's digests (one that differs fails the
        first mode, as in ``run``), and those it does not have (as sent): their watch can
        start only at a report of this worker's, which the cell says."""
        found, missing = [], []
        for path, digest in self.files:
            if os.path.isfile(path):
                found.append((os.path.abspath(path), digest))
            else:
                missing.append(path)
        return CheckedSources(tuple(found), self.total - len(missing)), tuple(missing)


#: Which plug-in check a sweep's cell shares: (model, backend, dtype or None).
PluginKey = tuple[str, str, str | None]


def plugin_key(case: Case) -> PluginKey:
    """Which plug-in check a sweep's cell shares: one per plug-in and backend, and per
    dtype where the backend casts a plug-in's arrays to it (torch, JAX: what the check
    finds, the dtypes of the loss and what it gets, follows the dtype asked). Where a
    plug-in keeps its own dtype (autograd) the dtype asked changes nothing the check sees,
    and the check itself sets the cell's (``tasks.checked_plugins``): None."""
    from ckptbench.backends.registry import spec

    own = spec(case.backend).plugins_own_dtype
    return case.model.strip(), case.backend, None if own else case.dtype


def start_watch(env: dict[str, Any], checked: CheckedSources | None) -> None:
    """Start the watch of a plug-in run (``env["plugin"]``) from the plug-in check's files
    and digests: the imported ones as ``imports``, and the plug-in's own file's digest as
    its ``sha256`` when the check read one (a file edited between the check and now then
    fails the first mode). Without ``checked`` the watch of imports starts at the first
    report (:func:`record_worker`)."""
    plugin = env.get("plugin")
    if not isinstance(plugin, dict):
        return
    path = plugin.get("path")
    if isinstance(path, str) and plugin.get("sha256"):
        plugin["watched_since"] = {path: "start"}
    if checked is None:
        return
    own = os.path.realpath(path) if isinstance(path, str) else None
    digest = next((d for f, d in checked.files if os.path.realpath(f) == own), None)
    if digest and plugin.get("sha256"):
        plugin["sha256"] = digest  # what the check loaded: the run measures that code
        plugin["watched_since"][path] = "check"
    files = {f: d for f, d in checked.files if os.path.realpath(f) != own}
    _watch(plugin, files, checked.total - len(checked.files), "check")


def record_worker(env: dict[str, Any], reported: dict[str, Any] | None, since: str) -> None:
    """Keep what an ok worker reported of its process (``follow.worker_environment``): the
    first ``numpy`` description, and for a plug-in the source files besides the plug-in's
    own that no earlier report (nor the check) listed, with their SHA-256 (computed here,
    reading the files), watched from then on (``since``: which report, ``round K MODE``)."""
    if not reported:
        return
    if reported.get("numpy") and "numpy" not in env:
        env["numpy"] = reported["numpy"]
    plugin, files = env.get("plugin"), reported.get("user_files")
    if not isinstance(plugin, dict) or files is None:
        return
    own = plugin.get("path")
    own = os.path.realpath(own) if isinstance(own, str) else None
    watched = plugin.get("imports") or {}
    new = [f for f in files if os.path.realpath(f) != own and _relative(f) not in watched]
    left_out = int(reported.get("user_files_total") or 0) - len(files)
    _watch(plugin, {f: file_digest(f) for f in new}, left_out, since)


def _watch(plugin: dict[str, Any], files: dict[str, str | None], left_out: int, since: str):
    """Add ``files`` ({path: SHA-256}) to the plug-in's watched ``imports``, noting
    ``since`` for each, and ``left_out`` files not watched (a bounded report's rest)."""
    imports = dict(plugin.get("imports") or {})
    watched_since = plugin.setdefault("watched_since", {})
    for path, digest in files.items():
        imports[_relative(path)] = digest
        watched_since.setdefault(_relative(path), since)
    if files or "imports" not in plugin:
        plugin["imports"] = dict(sorted(imports.items()))
    if left_out > plugin.get("imports_not_watched", 0):  # these were not watched
        plugin["imports_not_watched"] = left_out


def plugin_changed(env: dict[str, Any], model: str, k: int, mode: str, when: str) -> str | None:
    """Why mode ``mode`` of round ``k`` cannot be pooled with the run's other modes: the
    plug-in's file no longer has the SHA-256 its watch started with (``env["plugin"]``), or a
    source file it imports (``env["plugin"]["imports"]``) no longer has the one recorded when
    its watch started (``watched_since``: the check, the run's start or a worker's report),
    so this mode measured, or would measure, other code. The first change is recorded in
    ``env["plugin_changed"]``; None while nothing changed."""
    from ckptbench.workloads import plugin_provenance  # reads the file, never imports it

    plugin = env.get("plugin") or {}
    since = plugin.get("watched_since") or {}
    was = plugin.get("sha256")
    if was:
        now = (plugin_provenance(model) or {}).get("sha256")
        if now != was:
            env.setdefault("plugin_changed", {"round": k + 1, "mode": mode, "sha256": now})
            return (
                f"the plug-in's file {plugin.get('path', '')} changed {when} (SHA-256 "
                f"{was[:12]} {_at(since.get(plugin.get('path'), 'start'))}, {_short(now)} "
                "now): this mode's code is not the code the run measured before, so it is not "
                "pooled with it; rerun"
            )
    for path, was in (plugin.get("imports") or {}).items():
        now = file_digest(path)
        if now == was:
            continue
        env.setdefault(
            "plugin_changed", {"round": k + 1, "mode": mode, "sha256": now, "file": path}
        )
        return (
            f"the file {path} the plug-in imports changed {when} (SHA-256 {_short(was)} "
            f"{_at(since.get(path))}, {_short(now)} now): this mode's code is not the code "
            "the run measured before, so it is not pooled with it; rerun"
        )
    return None


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "unreadable"


def _at(since: str | None) -> str:
    """When a watched file's first digest was read, in words (``watched_since``)."""
    if since == "check":
        return "at the plug-in check"
    if since == "start" or since is None:
        return "at the start"
    return f"when the {since} worker reported it"
