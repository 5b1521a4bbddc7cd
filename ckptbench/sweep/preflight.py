"""What a sweep finds in its output folder before it measures anything: the manifest of
another sweep (refused), temp files a kill left behind, the manifest a resumed sweep
continues, and which cells are kept, measured or in conflict (see
:mod:`ckptbench.sweep.run`'s module docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ckptbench.results.kinds import RESULT, document_kind
from ckptbench.results.modes import missing_rounds
from ckptbench.results.schema import MODES, SETTINGS_FIELDS, Case, RunResult
from ckptbench.results.store import (
    MANIFEST_NAME,
    MAX_RESULT_BYTES,
    ManifestFiles,
    StoreError,
    cell_path,
    load_result,
    manifest_cells,
    read_manifest,
)
from ckptbench.sweep.cells import CellOutcome, CellState
from ckptbench.sweep.config import SweepConfig
from ckptbench.sweep.saving import first_error

__all__ = [
    "SweepError",
    "check_manifest",
    "plan_cells",
    "previous_manifest",
    "remeasure_reason",
    "remove_stale_temp_files",
    "unlisted_other_json",
    "unlisted_results",
]


class SweepError(ValueError):
    """The sweep cannot start (existing results without --resume, no Dask workers, ...)."""


def _settings_diff(saved: Case, wanted: Case) -> str:
    diffs = [
        f"{name} {getattr(saved, name)!r} vs {getattr(wanted, name)!r}"
        for name in SETTINGS_FIELDS
        if getattr(saved, name) != getattr(wanted, name)
    ]
    if saved.key != wanted.key:
        diffs.insert(0, f"case {saved.key} vs {wanted.key}")
    return ", ".join(diffs)


def _code_diff(saved: RunResult, case: Case) -> str:
    """Where a plug-in's source changed since its cell was measured (its SHA-256; the file is
    read, never imported here): the cell's name is the same, the model is not."""
    then = (saved.environment or {}).get("plugin")
    if ":" not in case.model or not isinstance(then, dict) or not then.get("sha256"):
        return ""
    from ckptbench.workloads import plugin_provenance  # imports autograd: plug-in cells only

    now = plugin_provenance(case.model) or {}
    if now.get("sha256") in (None, then["sha256"]):
        return ""
    return f"plug-in source {then['sha256'][:12]} vs {now['sha256'][:12]} now"


def remeasure_reason(result: RunResult, retry_failed: bool = False) -> str | None:
    """Why ``--resume`` measures a cell whose file reads back again (its file moved aside,
    kept, and said: :func:`ckptbench.sweep.saving.set_aside`), or None to keep it. The
    runner measures every mode and saves after each, saying in the file until its last
    save that the run has not finished: a mode missing, a stop (a signal cut a mode, or a
    file saved mid-run and never finished: killed outright), or rounds missing that the file
    gives no reason for (``results.modes.missing_rounds``: one its run says it measured, a
    record lost) is an incomplete cell; with ``retry_failed``, a mode not ok too."""
    absent = [m.value for m in MODES if m not in {r.mode for r in result.modes}]
    lost = missing_rounds(result.modes, result.case.rounds, result.environment)
    if absent:
        return f"incomplete: no {', '.join(absent)}"
    if result.stop_text is not None:
        return result.stop_text
    if lost:
        return f"incomplete: {'; '.join(x.text for x in lost)}"
    if retry_failed and not result.ok:
        return f"failed: {first_error(result)}"
    return None


def remove_stale_temp_files(out_dir: Path, names: Iterable[str]) -> None:
    """write_atomic's temp files (".NAME.*.tmp") left by a kill mid-write: never results."""
    for name in names:
        for tmp in out_dir.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)


def check_manifest(out_dir: Path, name: str) -> None:
    path = out_dir / MANIFEST_NAME
    if not path.exists():
        return
    try:
        data = read_manifest(path)
    except StoreError as err:  # it names the file and what is wrong with it
        raise SweepError(f"{err}; move it away or use another --out") from None
    if data is None:
        raise SweepError(
            f"{path}: is not a sweep manifest (a result?); move it away or use another --out"
        )
    config = data.get("config")
    other = config.get("name") if isinstance(config, dict) else None
    if other != name:
        raise SweepError(
            f"{out_dir} holds sweep {other!r}, not {name!r}: use another --out for this config"
        )


def previous_manifest(out_dir: Path) -> dict[str, Any]:
    """The manifest a resumed sweep finds in ``out_dir`` ({} when none)."""
    try:
        return read_manifest(out_dir / MANIFEST_NAME) or {}
    except StoreError:
        return {}


def plan_cells(
    config: SweepConfig, out_dir: Path, resume: bool, retry_failed: bool
) -> tuple[list[CellOutcome], list[int]]:
    """Initial outcome of every cell and the indexes of the cells to measure."""
    before = {
        c.get("key"): c
        for c in previous_manifest(out_dir).get("cells") or ()
        if isinstance(c, dict)
    }
    cells: list[CellOutcome] = []
    to_run: list[int] = []
    existing: list[Path] = []
    for index, case in enumerate(config.cases):
        path = cell_path(out_dir, case)
        # a cell measured (again) keeps the tries an earlier manifest recorded for it
        earlier = CellOutcome(case, path, CellState.PENDING).with_record(before.get(case.key))
        pending = CellOutcome(case, path, CellState.PENDING, attempts=earlier.attempts)
        if not path.exists():
            was = before.get(case.key) or {}
            if resume and was.get("state") == CellState.INVALID.value:  # the same cell: no plan
                why = str(was.get("error"))
                cells.append(CellOutcome(case, path, CellState.INVALID, error=why))
                continue
            cells.append(pending)
            to_run.append(index)
            continue
        if not resume:
            existing.append(path)
            cells.append(pending)
            continue
        try:
            saved = load_result(path)
        except ValueError as err:
            cells.append(CellOutcome(case, path, CellState.CONFLICT, error=str(err)))
            continue
        diff = _settings_diff(saved.case, case) or _code_diff(saved, case)
        if diff:
            msg = f"{path}: measured with other settings ({diff}); delete it to re-measure"
            cells.append(CellOutcome(case, path, CellState.CONFLICT, error=msg))
        elif (why := remeasure_reason(saved, retry_failed)) is not None:
            cells.append(replace(pending, remeasure_reason=why))
            to_run.append(index)
        else:
            kept = CellOutcome(case, path, CellState.KEPT, ok=saved.ok, host=saved.host)
            cells.append(kept.with_record(before.get(case.key)))
    if existing:
        raise SweepError(
            f"{out_dir} already holds {len(existing)} result(s) of this sweep (e.g. "
            f"{existing[0].name}): pass --resume to keep them and measure the rest, "
            "or use another --out"
        )
    return cells, to_run


def unlisted_results(
    paths: Iterable[str | Path], manifests: ManifestFiles | None = None
) -> list[Path]:
    """Result files in the sweep folders among ``paths`` that their manifest does not list
    (a cell of an earlier, larger config; a file copied in): a folder is read as its
    manifest's cells, so these are left out of every table, and the reader says so.
    ``manifests``: each read once."""
    return [f for f, result in _unlisted_json(paths, manifests) if result]


def unlisted_other_json(
    paths: Iterable[str | Path], manifests: ManifestFiles | None = None
) -> list[Path]:
    """The ``*.json`` files in the sweep folders among ``paths`` that are no ckptbench
    result (a costs file ``plan --save-costs`` wrote there, a JSON report): never read as
    cells, and named by the readers as what they are, not as results to pass by name."""
    return [f for f, result in _unlisted_json(paths, manifests) if not result]


def _unlisted_json(
    paths: Iterable[str | Path], manifests: ManifestFiles | None = None
) -> list[tuple[Path, bool]]:
    """Each ``*.json`` of the sweep folders among ``paths`` that is neither the manifest nor
    a cell it lists, and whether it is a result (``kinds.document_kind``: by its content,
    a result cut short too)."""
    out: list[tuple[Path, bool]] = []
    for raw in paths:
        folder = Path(raw)
        listed = (manifest_cells(folder / MANIFEST_NAME, manifests=manifests)
                  if folder.is_dir() else None)  # fmt: skip
        if listed is None:
            continue
        known = {f.name for f, _ in listed}
        for f in sorted(folder.glob("*.json")):
            if f.name not in {*known, MANIFEST_NAME}:
                out.append((f, document_kind(f, MAX_RESULT_BYTES) == RESULT))
    return out
