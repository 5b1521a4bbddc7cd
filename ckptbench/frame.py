"""Results as pandas DataFrames: the analysis layer of the reading side.

:func:`read_results` (also ``ckptbench.read_results``) loads result files or sweep folders
into one tidy DataFrame, **one row per result file and mode**: every field of the case,
``executor_used`` (the executor of ours that ran: the backend's default where the case
named none; NA for a framework's own checkpointing), ``key``, ``host``, ``created``,
``run`` (the file's position in the input), ``source`` (the file it was read from), the
mode's status, its exact peak (median over iterations), sampled peak and overhead over the
baseline (bytes; NA where it is within its noise, ``overhead_below_noise``; a mode stopped
at the memory limit has NA and the lower bounds ``peak_above_bytes`` and
``overhead_above_bytes``: the limit, and the limit less the baseline's peak), its interval
(both modes' iteration spreads and a rerun's 95% interval, :mod:`ckptbench.analysis.memnoise`:
``overhead_low_bytes``, ``overhead_high_bytes``,
``overhead_noise_bytes``: half its width) and the range of its iteration peaks
(``peak_low_bytes``, ``peak_high_bytes``), its iteration time statistics (median,
quartiles, range; seconds; NA, as its peak, for a mode not ok in every round), its count
of iterations, its step evaluations, the bytes its schedule stored at most
(``stored_peak_bytes``; checkpointed mode of our schedules), the resident memory its
compiled program holds and its compile time (``program_rss_bytes``, ``compile_time_s``;
JAX), its device peak and overhead on a GPU (``peak_device_bytes``,
``device_overhead_bytes``; NA on a CPU), and the cell's slowdown and memory savings with
their 95% intervals and its device memory savings (the same on the rows of one file),
and ``rounds_missing``: the modes the file lacks in rounds its case plans with no stop
recorded ('normal: 1 of 2 planned rounds (round 2 missing)'; NA where none is missing),
``interruption`` ('interrupted in round 3' where a stop cut the run) and ``saved_mid_run``
(the file was saved mid-run by a run that never finished: killed, or still measuring).
Every figure is the result's typed summary (``RunResult.summary``, computed from the raw
samples by :func:`ckptbench.results.summary.compute`; docs/architecture.md, "Noise and
rounds"), as ``compare`` reads it. Several files of one
cell (reruns) are several runs: group by ``key`` and ``host`` to pool them.

:func:`cells_frame` pivots the tidy frame to one row per result file (the table of
``compare``, and its CSV); :func:`invocations_frame` pools the cells measured by several
files on one host (``compare``'s "Invocations of one cell"). pandas is imported here and
in ``render`` only, never by the measuring side (worker, launch, runner, gate, backends,
executors).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any

from ckptbench.results.schema import MODES, Case, RunResult, stop_status
from ckptbench.results.store import load_results
from ckptbench.results.summary import CellSummary

__all__ = [
    "CASE_COLUMNS",
    "cells_frame",
    "invocations_frame",
    "read_results",
    "results_frame",
    "tidy_records",
]

#: Every field of a case, in declaration order: the first columns of the tidy frame.
CASE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Case))

_INT = ("_bytes", "iterations", "evaluations", "forward_steps", "rounds", "run")


def _cell(s: CellSummary, result: RunResult) -> dict[str, Any]:
    return {
        "slowdown": s.slowdown.value,
        "slowdown_low": s.slowdown.low,
        "slowdown_high": s.slowdown.high,
        "memory_savings": s.memory_savings.value,
        "memory_savings_low": s.memory_savings.low,
        "memory_savings_high": s.memory_savings.high,
        "memory_savings_bound": s.memory_savings_bound,
        "rounds": s.rounds,
        "rounds_complete": s.rounds_complete,
        "time_unstable": bool(s.time_unstable),
        "interrupted_round": s.interrupted_round,
        "interruption": result.interruption,
        "saved_mid_run": result.saved_mid_run,
        "rounds_missing": "; ".join(x.text for x in s.rounds_missing) or None,
        "cell_evaluations": s.step_evaluations,
        "cell_evaluations_optimal": s.step_evaluations_optimal,
        "forward_steps": s.forward_steps,
        "forward_steps_optimal": s.forward_steps_optimal,
        "grad_max_rel_err": s.grad_max_rel_err,
        "device_memory_savings": s.device_memory_savings,
        "floor_time_s": s.floor_time_s,
        "floor_basis": s.floor_basis,
        "vs_floor": s.vs_floor,
        "vs_floor_low": s.floor_ratio.low if s.floor_ratio else None,
        "vs_floor_high": s.floor_ratio.high if s.floor_ratio else None,
    }


def _memory_noise(f: Any) -> dict[str, Any]:
    """A mode's overhead (NA where it is within its noise: never a negative figure), the
    interval both modes' iteration spreads allow, its noise, and the mode's peak range
    (:mod:`ckptbench.analysis.memnoise`)."""
    iv, pr = f.overhead_interval, f.peak_range
    noisy = bool(iv is not None and iv.below_noise)
    return {
        "overhead_bytes": None if noisy else f.overhead_bytes,
        "overhead_low_bytes": None if iv is None else round(iv.low),
        "overhead_high_bytes": None if iv is None else round(iv.high),
        "overhead_noise_bytes": None if iv is None else round(iv.noise),
        "overhead_below_noise": None if iv is None else noisy,
        "peak_low_bytes": None if pr is None else pr.low,
        "peak_high_bytes": None if pr is None else pr.high,
    }


def tidy_records(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The tidy rows (plain dicts, no pandas): one per result file and mode it holds."""
    rows = []
    for run, r in enumerate(results):
        s = r.summary
        case = {name: getattr(r.case, name) for name in CASE_COLUMNS}
        case["executor_used"] = r.case.executor_ran
        cell = _cell(s, r)
        for mode in MODES:
            m, f = r.mode(mode), s.mode(mode)
            if m is None:
                continue
            times = f.time  # none for a mode not ok in every round, as its peak
            rows.append(
                {
                    **case,
                    "key": r.case.key,
                    "host": r.host,
                    "created": r.created,
                    "run": run,
                    "source": r.source or None,
                    "mode": mode.value,
                    "status": m.status.value,
                    "peak_rss_bytes": f.peak_rss_bytes,
                    "sampled_peak_rss_bytes": m.sampled_peak_rss_bytes,
                    **_memory_noise(f),
                    "peak_above_bytes": f.peak_above_bytes,
                    "overhead_above_bytes": f.overhead_above_bytes,
                    "peak_device_bytes": f.peak_device_bytes,
                    "device_overhead_bytes": f.device_overhead_bytes,
                    "time_median_s": times.median if times else None,
                    "time_q1_s": times.q1 if times else None,
                    "time_q3_s": times.q3 if times else None,
                    "time_min_s": times.min if times else None,
                    "time_max_s": times.max if times else None,
                    "iterations": len(m.iterations),
                    "evaluations": f.counters.step_calls,
                    "stored_peak_bytes": f.counters.peak_stored_bytes,
                    "program_rss_bytes": f.counters.program_rss_bytes,
                    "compile_time_s": f.counters.compile_time_s,
                    **cell,
                }
            )
    return rows


def results_frame(results: Sequence[RunResult]) -> Any:
    """The tidy ``pandas.DataFrame`` of ``results`` (see the module doc); byte and count
    columns are nullable integers, missing numbers are NA."""
    import pandas as pd

    df = pd.DataFrame(tidy_records(results))
    if "overhead_below_noise" in df.columns:
        df["overhead_below_noise"] = df["overhead_below_noise"].astype("boolean")
    for col in df.columns:
        if col.endswith(_INT) or col in (
            "cell_evaluations_optimal",
            "rounds_complete",
            "interrupted_round",
        ):
            df[col] = df[col].astype("Int64")
    return df


def read_results(path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> Any:
    """Result files, sweep folders or manifests as one tidy DataFrame (module doc). Raises
    ``ckptbench.results.store.StoreError`` (a ``ValueError``) with one line on a bad input."""
    paths = [path] if isinstance(path, str | os.PathLike) else list(path)
    return results_frame(load_results(paths))


def cells_frame(results: Sequence[RunResult]) -> Any:
    """One row per result file (``compare``'s table and CSV), pivoted from the tidy frame:
    the case columns, the baseline's peak, normal and checkpointed overhead (with its
    interval, or its lower bound ``_overhead_above_bytes`` where the mode was stopped at the
    memory limit) and median time, and the cell's figures with their 95% intervals
    (``_low``/``_high``), whether its time figures are unstable (the warnings' ``*``), its
    backend and device (device overhead and savings: GPU cells only). ``status`` is 'ok' or
    the modes that were not, after where a run was stopped or never finished (figures of the
    complete rounds, ``rounds_complete`` of ``rounds``: ``_cell_status``); ``source``."""
    import pandas as pd

    tidy = results_frame(results)
    first = tidy.groupby("run", sort=True).first()
    peaks, over, low, high, time, device_over, calls = (
        tidy.pivot(index="run", columns="mode", values=v)
        for v in ("peak_rss_bytes", "overhead_bytes", "peak_low_bytes", "peak_high_bytes",
                  "time_median_s", "device_overhead_bytes", "evaluations")
    )  # fmt: skip
    noise = {
        k: tidy.pivot(index="run", columns="mode", values=f"overhead_{k}")
        for k in ("low_bytes", "high_bytes", "noise_bytes", "below_noise", "above_bytes")
    }
    status = _cell_status(tidy, first)

    def col(table: Any, mode: str) -> Any:
        return table[mode] if mode in table.columns else pd.Series(pd.NA, index=first.index)

    out = pd.DataFrame(
        {
            "key": first["key"],
            "host": first["host"],
            "backend": first["backend"],
            "device": first["device"],
            "model": first["model"],
            "steps": first["steps"],
            "snaps": first["snaps"],
            "strategy": first["strategy"],
            "hidden": first["hidden"],
            "batch": first["batch"],
            "budget_bytes": first["budget_bytes"],
            "dtype": first["dtype"],
            "executor": first["executor_used"],
            "baseline_peak_bytes": col(peaks, "baseline"),
            "baseline_peak_spread_bytes": col(high, "baseline") - col(low, "baseline"),
            "normal_overhead_bytes": col(over, "normal"),
            "checkpointed_overhead_bytes": col(over, "checkpointed"),
            **{
                f"{mode}_overhead_{k}": col(table, mode)
                for mode in ("normal", "checkpointed")
                for k, table in noise.items()
            },
            "normal_time_s": col(time, "normal"),
            "checkpointed_time_s": col(time, "checkpointed"),
            **{k: first[k] for k in ("floor_time_s", "floor_basis")},
            **{  # each ratio with its 95% interval
                f"{name}{end}": first[f"{name}{end}"]
                for name in ("slowdown", "vs_floor", "memory_savings")
                for end in ("", "_low", "_high")
            },
            "time_unstable": first["time_unstable"],
            "rounds": first["rounds"],  # started
            "rounds_complete": first["rounds_complete"],  # the figures' rounds, when stopped
            "checkpointed_device_overhead_bytes": col(device_over, "checkpointed"),
            "device_memory_savings": first["device_memory_savings"],
            "forward_steps": first["forward_steps"],
            "forward_steps_optimal": first["forward_steps_optimal"],
            # a peer's step calls where the framework's loop lets them be counted (torch),
            # as run's table shows them; our schedules' advances + taped steps otherwise
            "evaluations": first["cell_evaluations"].fillna(col(calls, "checkpointed")),
            "evaluations_optimal": first["cell_evaluations_optimal"],
            "grad_max_rel_err": first["grad_max_rel_err"],
            "status": status.reindex(first.index).fillna("ok"),
            "source": first["source"],  # what tells invocations of one cell apart
        }
    )
    for c in out.columns:
        if c.endswith("_bytes") or c.startswith(("evaluations", "forward_steps")):
            out[c] = out[c].astype("Int64")
        elif c.endswith("_below_noise"):
            out[c] = out[c].astype("boolean")
    return out.reset_index(drop=True)


def _cell_status(tidy: Any, first: Any) -> Any:
    """Per run, the modes that were not ok (``mode: status``, comma-separated), after
    'interrupted ... (K complete rounds)' where ckptbench was stopped, or 'never finished (K
    complete rounds)' for a file saved mid-run (as the warning and ``check`` say it); runs
    with neither are missing (``cells_frame`` fills them with 'ok')."""
    import pandas as pd

    bad = tidy[tidy["status"] != "ok"].groupby("run", sort=True)
    status = pd.Series(
        {
            run: ", ".join(f"{m}: {st}" for m, st in zip(g["mode"], g["status"], strict=True))
            for run, g in bad
        },
        dtype=object,
    )
    for run, row in first.iterrows():  # an interruption is a note, its complete rounds count
        if row["interruption"] is not None and not pd.isna(row["interruption"]):
            note = stop_status(
                row["interruption"], bool(row["saved_mid_run"]), row["rounds_complete"]
            )
            status[run] = f"{note}; {status[run]}" if run in status.index else note
        if isinstance(lost := row["rounds_missing"], str):  # no stop recorded: said too
            status[run] = f"{status[run]}; {lost}" if run in status.index else lost
    return status


#: The figures :func:`invocations_frame` pools (each with ``_low``/``_high`` columns).
_POOLED = ("slowdown", "memory_savings")


def complete(result: RunResult) -> bool:
    """Whether ``result`` holds every mode, each measured ok (not partial, not failed)."""
    return all((m := result.mode(mode)) is not None and m.ok for mode in MODES)


def invocations_frame(results: Sequence[RunResult]) -> Any:
    """One row per cell measured by two or more result files on one host: each figure
    pooled over the invocations by a random-effects model
    (:func:`ckptbench.analysis.pooling.pooled_estimate`), with its interval, the
    between-invocation spread ``tau`` (relative) and the range of the invocations' own
    estimates. A figure fewer than two invocations measured (a partial, failed or
    interrupted run beside another) is NA; ``partial`` counts the invocations without
    every mode measured ok, ``<figure>_runs`` those that measured the figure and
    ``<figure>_bare`` those that measured it without an interval (one iteration a side, or
    no spread: left out of the pool); ``versions`` lists the ckptbench versions when they
    differ and ``plans`` counts the plans a planned cell's invocations ran
    (``analysis.pairing.plans_differ``). Empty when no cell was measured twice."""
    import pandas as pd

    from ckptbench.analysis.intervals import Estimate, IntervalError
    from ckptbench.analysis.pairing import codes_differ, plans_differ
    from ckptbench.analysis.pooling import pooled_estimate

    # only the files of repeated cells are summarized again (compare's table did them all)
    count = Counter((r.case.key, r.host) for r in results)
    repeated = [i for i, r in enumerate(results) if count[(r.case.key, r.host)] > 1]
    if not repeated:
        return pd.DataFrame()
    per_run = results_frame([results[i] for i in repeated]).groupby("run", sort=True).first()
    rows = []
    for (key, host), runs in per_run.groupby(["key", "host"], sort=False, dropna=False):
        files = [results[repeated[int(i)]] for i in runs.index]
        versions = sorted({r.tool_version or "unknown" for r in files})
        row: dict[str, Any] = {"key": key, "host": host, "invocations": len(runs),
                               "partial": sum(not complete(r) for r in files),
                               "versions": ", ".join(versions) if len(versions) > 1 else "",
                               "plans": plans_differ(files), "codes": codes_differ(files),
                               "first_run": repeated[int(runs.index[0])]}  # fmt: skip
        for name in _POOLED:
            cols = runs[[name, f"{name}_low", f"{name}_high", "rounds"]].dropna()
            bare = int(runs[name].notna().sum()) - len(cols)  # a figure without an interval
            row.update({name: None, f"{name}_low": None, f"{name}_high": None,
                        f"{name}_tau": None, f"{name}_min": None, f"{name}_max": None,
                        f"{name}_runs": len(cols), f"{name}_bare": bare})  # fmt: skip
            try:
                pooled = pooled_estimate(
                    [
                        Estimate(float(v), float(lo), float(hi), "", int(r), 0)
                        for v, lo, hi, r in cols.itertuples(index=False)
                    ]
                )
            except IntervalError:
                continue
            est = pooled.estimate
            row.update({name: est.value, f"{name}_low": est.low, f"{name}_high": est.high,
                        f"{name}_tau": pooled.tau, f"{name}_min": float(cols[name].min()),
                        f"{name}_max": float(cols[name].max())})  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)
