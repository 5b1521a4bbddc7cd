"""Measure one case: fresh workers per (round, mode), verification, a result saved after
every mode.

The runner never computes ratios (``analysis`` does) and never prints (``cli`` does); it
reports progress through a callback and saves the result file after every mode, atomically,
so a crash, a kill or a timeout later in the run loses nothing already measured.

Rounds (pyperf's and asv's habit): with ``case.rounds = N`` every mode is measured N times,
each time in a fresh worker (``ckptbench.launch``), round k starting with mode k mod (number
of modes), so a slow minute on a shared machine does not land on one mode only.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import ckptbench
from ckptbench import measure, noise
from ckptbench.analysis.summary import pool_by_mode, summarize
from ckptbench.launch import Interrupted, Progress, RunEvent, run_mode, stop_reason
from ckptbench.results import (
    MODES,
    Case,
    Mode,
    ModeResult,
    RunResult,
    Status,
    save_result,
)
from ckptbench.schedules import get_strategy
from ckptbench.tasks import measure_costs
from ckptbench.workloads import plugin_provenance

__all__ = ["GRAD_TOLERANCE", "expected_oom", "round_order", "run_case"]

#: Checkpointed gradients must match the plain gradient to this max relative error.
GRAD_TOLERANCE = 1e-8


def _grad_error(normal_path: str, ckpt_path: str) -> float | None:
    import numpy as np

    try:
        a, b = np.load(ckpt_path), np.load(normal_path)
    except OSError:
        return None
    if a.shape != b.shape:
        return float("inf")
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def _verify(case: Case, result: ModeResult, grad_err: float | None) -> ModeResult:
    """Fail a checkpointed result whose gradient or step count is wrong (the count a
    strategy plans: its closed form, a replay of its stream, or the recorded plan's)."""
    result = replace(result, grad_max_rel_err=grad_err)
    if grad_err is not None and not grad_err <= GRAD_TOLERANCE:
        return replace(
            result,
            status=Status.FAILED,
            error=f"gradient differs from the plain gradient: max rel err {grad_err:.3g} "
            f"> {GRAD_TOLERANCE:g}",
        )
    counts = get_strategy(case.strategy).step_counts(case.steps, case.snaps, result.plan)
    got = result.counters.get("step_calls")
    if counts is not None and got is not None and got != sum(counts):
        return replace(
            result,
            status=Status.FAILED,
            error=f"step evaluations {got} != planned {sum(counts)} "
            f"({counts[0]} advances + {counts[1]} taped)",
        )
    return result


def round_order(modes: Sequence[Mode], round_index: int) -> tuple[Mode, ...]:
    """Round k measures the modes rotated by k: every mode goes first equally often."""
    k = round_index % len(modes) if modes else 0
    return tuple(modes[k:]) + tuple(modes[:k])


def run_case(
    case: Case,
    *,
    out_path: str | os.PathLike[str] | None = None,
    replace_out: bool = False,
    progress: Progress | None = None,
    modes: Sequence[Mode] = MODES,
    worker: Sequence[str] | None = None,
    costs: dict[str, Any] | None = None,
) -> RunResult:
    """Measure ``case`` in ``case.rounds`` rounds of each mode (a fresh process each),
    saving after every mode.

    The first save never replaces an existing ``out_path`` unless ``replace_out``; later
    saves replace only the file this run wrote. On :class:`Interrupted` (or Ctrl-C) the
    partial mode is saved with status ``interrupted`` and the exception is re-raised with the
    saved result attached as ``err.result``.

    Strategy ``optimal`` plans with ``costs`` (a ``planner.Costs`` document); without them the
    step costs are first measured in a fresh worker (:func:`measure_costs`, which raises
    :class:`CostsError` when that fails). Before any mode is measured, a plan too large to
    compute or a budget no schedule fits is a ``PlanError`` (``planner.check_plannable``,
    ``planner.check_budget``): nothing is measured and no file is written.
    """
    if len(set(modes)) != len(modes):
        raise ValueError("modes must not repeat")
    if case.strategy == "optimal" and Mode.CHECKPOINTED in modes:
        from ckptbench.planner import Costs, check_budget, check_plannable

        check_plannable(case.steps, Costs.from_dict(costs) if costs is not None else None)
        if costs is None:
            costs = measure_costs(case, worker=worker)["costs"]
        check_budget(Costs.from_dict(costs), case.steps, case.budget_bytes or 0)
    env = measure.environment()
    env["sample_interval_s"] = case.sample_interval_s
    env["thread_env_child"] = measure.pinned_thread_env(case.threads)
    env["plugin"] = plugin_provenance(case.model)
    env["machine_state"] = noise.machine_state().as_dict()
    host = socket.gethostname()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    results: list[ModeResult] = []
    saved = [False]

    def snapshot() -> RunResult:
        busy: dict[str, float] = {}
        for r in results:
            if r.other_busy_cores is not None:
                busy[r.mode.value] = max(busy.get(r.mode.value, 0.0), r.other_busy_cores)
        return RunResult(
            case=case,
            modes=tuple(results),
            environment=env,
            summary=summarize(case, pool_by_mode(results), results, busy),
            created=created,
            host=host,
            tool_version=ckptbench.__version__,
        )

    def save() -> None:
        if out_path is not None:
            save_result(snapshot(), out_path, replace=saved[0] or replace_out)
            saved[0] = True

    with tempfile.TemporaryDirectory(prefix="ckptbench-") as tmp:
        try:
            for k in range(case.rounds):
                grads = {m: os.path.join(tmp, f"{m.value}-{k}.npy") for m in modes}
                for mode in round_order(modes, k):
                    if progress:
                        progress(RunEvent("start", mode, k, case.rounds))
                    want_grad = mode in (Mode.NORMAL, Mode.CHECKPOINTED)
                    result, numpy_env = run_mode(
                        case,
                        mode,
                        grads[mode] if want_grad else None,
                        worker=worker,
                        round_index=k,
                        progress=progress,
                        costs=costs,
                    )
                    if numpy_env and "numpy" not in env:
                        env["numpy"] = numpy_env
                    results.append(_checked(case, k, mode, result, modes, grads))
                    save()
                    if progress:
                        progress(RunEvent("done", mode, k, case.rounds, result=results[-1]))
        except (Interrupted, KeyboardInterrupt) as err:
            partial = getattr(err, "partial", None)
            order = [(k, m) for k in range(case.rounds) for m in round_order(modes, k)]
            if partial is None and results and len(results) < len(order):
                k, mode = order[len(results)]  # stopped between modes: say so in the file
                why = f"stopped by {stop_reason(err)} before this mode started"
                partial = ModeResult(mode=mode, status=Status.INTERRUPTED, error=why, round=k,
                                     iterations_planned=case.repeats)  # fmt: skip
            if partial is not None:
                results.append(partial)
            if results:  # nothing measured yet: no file (a result needs a mode)
                save()
            err.result = snapshot()  # type: ignore[attr-defined]
            raise
    return snapshot()


def _checked(
    case: Case,
    round_index: int,
    mode: Mode,
    result: ModeResult,
    modes: Sequence[Mode],
    grads: dict[Mode, str],
) -> ModeResult:
    """Verify a checkpointed result against this round's normal gradient, once both exist."""
    if mode is not Mode.CHECKPOINTED or not result.ok:
        return result
    err = None
    if Mode.NORMAL in modes and os.path.exists(grads[Mode.NORMAL]):
        err = _grad_error(grads[Mode.NORMAL], grads[mode])
    return _verify(case, result, err)


def expected_oom(result: RunResult, expect_oom: Sequence[str]) -> tuple[list[str], list[str]]:
    """``run --expect-oom``: (modes that ran out of memory as expected, expected modes that
    did not). The command exits 0 only when every expected mode hit the limit and every
    other mode is ok."""
    hit, unmet = [], []
    for name in expect_oom:
        m = result.mode(Mode(name))
        if m is not None and m.status is Status.OUT_OF_MEMORY:
            hit.append(name)
        else:
            unmet.append(name)
    return hit, unmet
