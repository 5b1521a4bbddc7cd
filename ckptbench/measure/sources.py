"""The plug-in's source files, watched while a run measures (the parent's side; nothing here
imports the plug-in).

The runner hashes the plug-in's file (``environment.plugin``, from
:func:`ckptbench.workloads.plugin_provenance`) before and after every mode. The user's own
modules the plug-in imports (a helper beside it, another module of its package) are known
only once a worker has loaded them: every ok worker reports the source files of the user's
code it loaded (``worker.user_files``), and the first report's files are recorded with
their SHA-256 in ``environment.plugin.imports`` ({path relative to the current folder:
SHA-256, or null where unreadable}). From then on they are hashed with the plug-in's file;
a mode measured after one changed is failed, as after an edit of the plug-in itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["MAX_HASHED_BYTES", "file_digest", "plugin_changed", "record_worker"]

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


def record_worker(env: dict[str, Any], reported: dict[str, Any] | None) -> None:
    """Keep what an ok worker reported of its process (``follow.worker_environment``): the
    first ``numpy`` description, and for a plug-in the first report's source files besides
    the plug-in's own, with their SHA-256 (computed here, reading the files)."""
    if not reported:
        return
    if reported.get("numpy") and "numpy" not in env:
        env["numpy"] = reported["numpy"]
    plugin, files = env.get("plugin"), reported.get("user_files")
    if not isinstance(plugin, dict) or "imports" in plugin or files is None:
        return
    own = plugin.get("path")
    own = os.path.realpath(own) if isinstance(own, str) else None
    imports = {_relative(f): file_digest(f) for f in files if os.path.realpath(f) != own}
    plugin["imports"] = dict(sorted(imports.items()))
    left_out = int(reported.get("user_files_total") or 0) - len(files)
    if left_out > 0:  # the worker reports a bounded list: these were not watched
        plugin["imports_not_watched"] = left_out


def plugin_changed(env: dict[str, Any], model: str, k: int, mode: str, when: str) -> str | None:
    """Why mode ``mode`` of round ``k`` cannot be pooled with the run's other modes: the
    plug-in's file no longer has the SHA-256 the run started with (``env["plugin"]``), or a
    source file it imports (``env["plugin"]["imports"]``) no longer has the one recorded when
    a worker first loaded it, so this mode measured, or would measure, other code. The first
    change is recorded in ``env["plugin_changed"]``; None while nothing changed."""
    from ckptbench.workloads import plugin_provenance  # reads the file, never imports it

    plugin = env.get("plugin") or {}
    was = plugin.get("sha256")
    if was:
        now = (plugin_provenance(model) or {}).get("sha256")
        if now != was:
            env.setdefault("plugin_changed", {"round": k + 1, "mode": mode, "sha256": now})
            return (
                f"the plug-in's file {plugin.get('path', '')} changed {when} (SHA-256 "
                f"{was[:12]} at the start, {_short(now)} now): this mode's code is not the "
                "code the run measured before, so it is not pooled with it; rerun"
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
            f"when a worker first loaded it, {_short(now)} now): this mode's code is not "
            "the code the run measured before, so it is not pooled with it; rerun"
        )
    return None


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "unreadable"
