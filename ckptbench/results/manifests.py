"""What the sweep manifests among some results say about them: which cells they list
(:func:`manifest_keys`) and the ``[expect]`` thresholds recorded with them
(:func:`expectations_from_manifests`). Reads manifests through ``results.store``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ckptbench.results.store import (
    MANIFEST_NAME,
    ManifestFiles,
    StoreError,
    manifest_cells,
    read_manifest,
)
from ckptbench.sweep.config import Expect

__all__ = ["expectations_from_manifests", "manifest_keys"]


def manifest_keys(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None = None
) -> frozenset[str]:
    """The cell keys the sweep manifests among ``paths`` (a folder or its ``sweep.json``)
    list: the cells their recorded ``[expect]`` applies to (a loose file given beside a
    sweep folder is not one of them). ``manifests``: each read once."""
    keys: set[str] = set()
    for raw in paths:
        p = Path(raw)
        manifest = p / MANIFEST_NAME if p.is_dir() else p
        if manifest.name == MANIFEST_NAME and manifest.exists():
            keys.update(key for _, key in manifest_cells(manifest, manifests=manifests) or ())
    return frozenset(keys)


def expectations_from_manifests(
    paths: Iterable[str | os.PathLike[str]], manifests: ManifestFiles | None = None
) -> dict[str, Expect] | None:
    """The ``[expect]`` tables recorded in the sweep manifests among ``paths`` (a folder or
    its ``sweep.json``), as {strategy or "*": Expect}; None when there is none.
    ``manifests``: each read once."""
    found: dict[str, Expect] | None = None
    for raw in paths:
        p = Path(raw)
        manifest = p / MANIFEST_NAME if p.is_dir() else p
        if manifest.name != MANIFEST_NAME or not manifest.exists():
            continue
        data = read_manifest(manifest) if manifests is None else manifests.read(manifest)
        try:
            if data is None:
                raise KeyError("kind")
            cfg = data["config"]
            table = {"*": Expect(**cfg.get("expect", {}))}
            for strategy, values in cfg.get("expect_by_strategy", {}).items():
                table[strategy] = Expect(**values)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            raise StoreError(f"{manifest}: unreadable sweep manifest ({err})") from None
        if found is not None and found != table:
            raise StoreError(f"{manifest}: expectations differ from another sweep's; pass --config")
        found = table
    if found is not None and all(e.empty for e in found.values()):
        return None
    return found
