"""Measure one case: fresh workers per (round, mode), each result checked
(``ckptbench.measure.gradcheck``), a result saved after every mode.

The runner never computes ratios (``analysis`` does) and never prints (``cli`` does); it
reports progress through a callback and saves the result file after every mode, atomically,
so a crash, a kill or a timeout later in the run loses nothing already measured.

Rounds (pyperf's and asv's habit): with ``case.rounds = N`` every mode is measured N times,
each time in a fresh worker (``ckptbench.measure.launch``), round k starting with mode k mod (number
of modes), so a slow minute on a shared machine does not land on one mode only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench.measure import noise
from ckptbench.measure import peaks as measure
from ckptbench.measure.follow import limit_below_start
from ckptbench.measure.gradcheck import (
    EPSILON,
    GRAD_EPS_PER_STEP,
    GRAD_TOLERANCE,
    GradFiles,
    check_earlier,
    checked,
    grad_tolerance,
)
from ckptbench.measure.launch import Interrupted, Progress, RunEvent, run_mode
from ckptbench.measure.recording import Recording, record_interruption, round_order
from ckptbench.measure.rounds import Precision, next_round
from ckptbench.measure.sources import CheckedSources, plugin_changed, record_worker, start_watch
from ckptbench.measure.tasks import measure_costs
from ckptbench.results.resultsize import TIMELINE_MOST, timeline_points
from ckptbench.results.schema import MODES, Case, Mode, ModeResult, RunResult, Status
from ckptbench.schedules import get_strategy
from ckptbench.workloads import plugin_provenance

__all__ = [
    "EPSILON",
    "GRAD_TOLERANCE",
    "Precision",
    "compile_package",
    "expected_oom",
    "grad_tolerance",
    "round_order",
    "run_case",
]


def compile_package() -> bool:
    """Make sure ckptbench's own modules have bytecode before any worker starts, so every
    worker loads them from ``.pyc`` however ckptbench was installed.

    Measured (issue 16): with ``PYTHONDONTWRITEBYTECODE`` set, a source checkout has no
    ``__pycache__`` and every worker compiled 13 ckptbench modules at start-up: +1.7 MiB
    RssAnon after the imports (21.4 vs 19.7 MiB), and exact peaks moved by 0.3-0.7 MiB
    (baseline +0.72, checkpointed +0.37, normal +0.33 MiB on lstm 300 x 16), so the
    checkpointed overhead differed by 0.35-0.45 MiB from an installed package's, which had
    its ``.pyc`` files. Reading existing bytecode is not affected by that variable, so
    writing it once here removes the difference. Returns False when it could not be
    written (a read-only tree): the result records it."""
    import compileall

    root = Path(ckptbench.__file__).parent
    try:
        return bool(compileall.compile_dir(str(root), quiet=2, workers=1))
    except OSError:
        return False


def run_case(
    case: Case,
    *,
    out_path: str | os.PathLike[str] | None = None,
    replace_out: bool = False,
    progress: Progress | None = None,
    modes: Sequence[Mode] = MODES,
    worker: Sequence[str] | None = None,
    costs: dict[str, Any] | None = None,
    retry_oom: bool = False,
    precision: Precision | None = None,
    saved_elsewhere: Callable[[str, str], None] | None = None,
    expect_oom: Sequence[str] = (),
    checked_sources: CheckedSources | None = None,
    plugin_dtypes: Mapping[str, str] | None = None,
) -> RunResult:
    """Measure ``case`` in ``case.rounds`` rounds of each mode (a fresh process each),
    saving after every mode.

    A mode stopped at the memory limit is not run again in later rounds (it would climb to
    the limit once more): the runner sends one ``skip`` progress event per skipped (round,
    mode) and records the round it first ran out of memory in the environment's
    ``skipped_after_oom``. ``retry_oom`` measures it in every round anyway.

    With ``precision``, rounds are added after ``case.rounds`` until the slowdown's 95%
    interval is within the target (:func:`ckptbench.measure.rounds.next_round`); the
    result's case then says how many rounds ran, and the environment's ``precision`` how
    the run stopped. The last save records the rounds run and why no more
    (``environment.finished``, :meth:`Recording.finish`); every earlier one says the run
    has not finished.

    The first save never replaces an existing ``out_path`` unless ``replace_out``; later
    saves replace only the file this run wrote. A save that fails at ``out_path`` (the file
    appeared meanwhile, the folder went away) goes beside it under a new name
    (:func:`ckptbench.results.schema.save_or_beside`), and so do the later saves: the
    returned result says where and why (``RunResult.saved_as``, a ``SavedAs``; None when it
    was saved at ``out_path``, or nowhere asked), and ``saved_elsewhere(path, why)``, when
    given, is told at the moment it happens (``run`` warns then, mid-run). On
    :class:`Interrupted` (or Ctrl-C) the partial mode is saved with status ``interrupted``
    and the exception is re-raised with the saved result attached as ``err.result`` (its
    ``saved_as`` likewise) and the file ``--force`` was replacing as ``err.kept_aside``.

    Strategy ``optimal`` plans with ``costs`` (a ``planner.Costs`` document); without them the
    step costs are first measured in a fresh worker (:func:`measure_costs`, which raises
    :class:`CostsError` when that fails). Before any mode is measured, a plan too large to
    compute or a budget no schedule fits is a ``PlanError`` (``planner.check_plannable``,
    ``planner.check_budget``): nothing is measured and no file is written.

    ``checked_sources``: the plug-in check's files and digests
    (``tasks.checked_plugin(...).sources``), where the watch of the plug-in's source files
    starts (:func:`ckptbench.measure.sources.start_watch`); without them the watch of the
    files it imports starts at the first worker's report. ``plugin_dtypes``: the check's
    ``output_dtype`` and ``loss_dtype`` (``tasks.checked_plugin(...).dtypes``), recorded
    in ``environment.plugin``.
    """
    if len(set(modes)) != len(modes):
        raise ValueError("modes must not repeat")
    if get_strategy(case.strategy).planned and Mode.CHECKPOINTED in modes:
        costs = _checked_plan(case, costs, worker)
    env = _environment(case)
    start_watch(env, checked_sources)
    if isinstance(env.get("plugin"), dict) and plugin_dtypes:  # what loss gets, the loss's
        env["plugin"].update({str(k): str(v) for k, v in plugin_dtypes.items()})
    if expect_oom:  # run --expect-oom: the gate reads it (a mode meant to exceed the limit)
        env["expect_oom"] = sorted(expect_oom)
    rec = Recording(case, env, out_path, replace_out, saved_elsewhere)
    most_rounds = max(case.rounds, precision.max_rounds if precision is not None else 0)
    how = _Measuring(modes, worker, progress, costs, retry_oom, timeline_points(most_rounds))
    with tempfile.TemporaryDirectory(prefix="ckptbench-") as tmp:
        try:
            k = 0
            # every mode over the limit and skipped from now on: another round measures nothing
            # a plug-in changed mid-run fails every later mode: no round beyond the planned
            while (
                len(rec.out_of_memory) < len(modes)
                and (k < case.rounds or "plugin_changed" not in rec.env)
                and next_round(precision, rec.results, k, case.rounds, rec.round_starts, rec.env)
            ):
                _run_round(rec, how, k, tmp)
                k += 1
            rec.finish(k, len(modes), precision is not None)  # how many rounds, why no more
            if rec.aside is not None and rec.where == rec.out:  # replaced, as --force asked
                with contextlib.suppress(OSError):
                    rec.aside.unlink()
        except (Interrupted, KeyboardInterrupt) as err:
            record_interruption(rec, err, modes)
            err.kept_aside = rec.aside  # type: ignore[attr-defined]  # what --force replaced
            err.result = rec.snapshot()  # type: ignore[attr-defined]
            raise
    return rec.snapshot()


def _checked_plan(case: Case, costs: dict[str, Any] | None, worker) -> dict[str, Any]:
    """The step costs a planned strategy plans with (measured in a fresh worker where not
    given), after checking that the plan can be computed and the budget fits (PlanError)."""
    from ckptbench.schedules.optimal import Costs, check_budget, check_plannable
    from ckptbench.workloads import BUILTIN_CHAINS

    stack = case.model in BUILTIN_CHAINS
    given = Costs.from_dict(costs) if costs is not None else None
    budget = case.budget_bytes or 0
    check_plannable(case.steps, given, budget_bytes=budget, per_step=stack)
    if costs is None:
        costs = measure_costs(case, worker=worker)["costs"]
        # per layer where measured so; a budget holding every tape needs no table
        check_plannable(case.steps, Costs.from_dict(costs), budget_bytes=budget)
    check_budget(Costs.from_dict(costs), case.steps, budget)
    return costs


def _environment(case: Case) -> dict[str, Any]:
    """The result's environment before any mode runs: the machine, the workers' settings,
    the plug-in's provenance and what a checkpointed gradient is checked against."""
    env = measure.environment()
    env["sample_interval_s"] = case.sample_interval_s
    env["thread_env_child"] = measure.pinned_thread_env(case.threads)
    env["plugin"] = plugin_provenance(case.model)
    env["bytecode_compiled"] = compile_package()
    env["machine_state"] = noise.machine_state().as_dict()
    env["executor"] = case.executor_ran  # how our schedules ran; None for a framework's own
    env["grad_tolerance"] = {  # what a checkpointed gradient was checked against
        "max_rel_err": grad_tolerance(case.dtype, case.steps),
        "dtype": case.dtype,
        "epsilon": EPSILON[case.dtype],
        "eps_per_step": GRAD_EPS_PER_STEP,
        "steps": case.steps,
    }
    return env


@dataclass(frozen=True)
class _Measuring:
    """How every mode of a run is measured: which modes, by which worker command, reporting
    to ``progress``, with the planner's step costs, and whether an out-of-memory mode runs
    again in later rounds."""

    modes: Sequence[Mode]
    worker: Sequence[str] | None
    progress: Progress | None
    costs: dict[str, Any] | None
    retry_oom: bool
    #: the samples each mode's RSS timeline keeps a round (``resultsize.timeline_points`` of
    #: the most rounds the run may measure), so the result file can be read back
    timeline_points: int = TIMELINE_MOST


def _run_round(rec: Recording, how: _Measuring, k: int, tmp: str) -> None:
    """Round ``k``: every mode in its rotated order, each in a fresh worker (skipping one
    out of memory, unless ``retry_oom``), the result saved after each."""
    case, env, progress = rec.case, rec.env, how.progress
    rec.ran = max(rec.ran, k + 1)
    rec.round_starts.append(time.monotonic())
    grads = {m: os.path.join(tmp, f"{m.value}-{k}.npy") for m in how.modes}
    order = round_order(how.modes, k)
    for i, mode in enumerate(order):
        if mode.value in rec.out_of_memory:
            if progress:
                progress(RunEvent("skip", mode, k, rec.ran))
            continue
        if progress:
            progress(RunEvent("start", mode, k, rec.ran))
        want_grad = mode in (Mode.NORMAL, Mode.CHECKPOINTED)
        result, reported = ModeResult(mode, Status.FAILED, round=k), None
        if (changed := _plugin_changed(rec, k, mode, "before it started")) is None:
            result, reported = run_mode(
                case,
                mode,
                grads[mode] if want_grad else None,
                worker=how.worker,
                round_index=k,
                progress=progress,
                costs=how.costs,
            )  # a file changed while the worker ran may or may not be the code it loaded
            changed = _plugin_changed(rec, k, mode, "while it ran")
            if len(result.timeline) > how.timeline_points:  # many rounds: fewer samples each
                thin = measure.thin_timeline(result.timeline, how.timeline_points)
                result = replace(result, timeline=tuple(thin))
        if changed is not None and result.status in (Status.OK, Status.FAILED):
            result = replace(result, status=Status.FAILED, error=changed)
        if not rec.results and (below := limit_below_start(case, result)) is not None:
            raise below  # before the first save: nothing written, nothing moved aside
        record_worker(env, reported, f"round {k + 1} {mode.value}")  # numpy, new imports
        files = GradFiles()  # normal's gradient: read once for both checks below
        rec.results.append(checked(case, k, mode, result, how.modes, grads, files))
        if mode is Mode.NORMAL:  # checkpointed ran first this round: verify it now
            check_earlier(case, rec.results, k, grads, files)
        del files  # not held while the next worker runs
        if result.status is Status.OUT_OF_MEMORY and not how.retry_oom:
            rec.out_of_memory[mode.value] = k + 1
            if k + 1 < case.rounds:
                env["skipped_after_oom"] = dict(rec.out_of_memory)
        later = [m for m in order[i + 1 :] if m.value not in rec.out_of_memory]  # skipped: not
        rec.save(unfinished=(k, later[0]) if later else (k + 1, None))  # the next to measure
        if progress:
            progress(RunEvent("done", mode, k, rec.ran, result=rec.results[-1]))


def _plugin_changed(rec: Recording, k: int, mode: Mode, when: str) -> str | None:
    """Why ``mode`` of round ``k`` cannot be pooled with the run's other modes: the
    plug-in's file, or a source file it imports, changed since the run first saw it
    (:func:`ckptbench.measure.sources.plugin_changed`); None while nothing changed."""
    return plugin_changed(rec.env, rec.case.model, k, mode.value, when)


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
