"""Side tasks in a disposable worker: the plug-in check, the device probe, the step costs and
the line profile.

Each runs in a fresh ``python -P -m measure.worker`` started by :func:`launch.start_worker`,
so it has what a measured mode has (docs/architecture.md, "The worker"): the job on stdin, the
report on a private pipe (a plug-in that prints, even JSON, cannot forge or blank it), the
parent-death signal and watchdog, a process group of its own that is stopped whole when the
task ends, a time limit, and stop signals held back while it starts. ckptbench never imports a
plug-in in its own process: a plug-in that exits, hangs, prints or forks at import can end or
hang only the disposable worker. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ckptbench.backends.require import MissingPackageError
from ckptbench.measure import senders
from ckptbench.measure.launch import raise_deferred, read_tail, start_worker, stop_worker
from ckptbench.measure.sources import CheckedSources, PluginKey, plugin_key
from ckptbench.results.chains import chain_executor
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules import get_strategy
from ckptbench.workloads import BUILTIN_WORKLOADS
from ckptbench.workloads.registry import model_text, name_problem

__all__ = [
    "CostsError",
    "PluginChecked",
    "PluginError",
    "PluginWarning",
    "TaskError",
    "check_plugin",
    "check_plugins",
    "checked_plugin",
    "checked_plugins",
    "measure_costs",
    "probe_device",
    "profile_lines",
    "run_task",
]

#: After its result, a task's worker gets this long to exit before its group is stopped.
EXIT_GRACE_S = 2.0


class TaskError(RuntimeError):
    """A side task failed; the message is one line saying why."""


class CostsError(TaskError):
    """The step costs could not be measured (the worker failed; the message says why)."""


class PluginError(ValueError):
    """The plug-in cannot be loaded (bad input: the CLI exits 2)."""


class PluginWarning(str):
    """A note of the plug-in check saying the run is recorded in another dtype than the
    one asked (:func:`_its_dtype`): printed as a warning, and under ``-q`` too, as a costs
    file's (``cli.costs_file.shown_notes``)."""


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def run_task(
    case: Case,
    fields: dict[str, Any],
    *,
    worker: Sequence[str] | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """Run one task job (``fields`` beside the case) in a disposable worker; its report.

    ``timeout_s`` bounds the start-up (until ``ready`` or the result) and, again, the work
    after ``ready``. :class:`TaskError` when the worker reports a failure, exits without a
    result or runs out of time. ``Interrupted``/``KeyboardInterrupt`` stop it and propagate.
    """
    signalled = senders.count()
    with tempfile.TemporaryFile() as err_file:
        proc, channel = start_worker(case, {"mode": Mode.BASELINE.value, **fields}, worker,
                                     subprocess.DEVNULL, err_file)  # fmt: skip
        report: dict[str, Any] | None = None
        reported_at = 0.0
        deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        timed_out = False
        try:
            raise_deferred()
            while True:
                raise_deferred()  # or a stop requested for this thread
                events = channel.read(0.05)
                if proc.poll() is not None:
                    events += channel.drain()
                for event in events:
                    if event.get("event") == "ready" and timeout_s is not None:
                        deadline = time.perf_counter() + timeout_s
                    elif event.get("event") == "result" and report is None:
                        report, reported_at = event, time.perf_counter()
                if proc.poll() is not None:
                    break
                if report is not None:
                    if time.perf_counter() - reported_at > EXIT_GRACE_S:
                        break
                elif deadline is not None and time.perf_counter() > deadline:
                    timed_out = True
                    break
        finally:
            stop_worker(proc)
            channel.close()
        tail = _last_line(read_tail(err_file))
    if sent := senders.since(signalled):  # a plug-in tried to stop ckptbench: not the user
        raise TaskError(senders.describe(sent))
    if timed_out:
        raise TaskError(f"the worker did not finish within {timeout_s:g} s and was stopped")
    if report is None:
        why = f"; last stderr line: {tail}" if tail else ""
        raise TaskError(f"the worker exited with status {proc.returncode} without a result{why}")
    if not report.get("ok"):
        raise TaskError(str(report.get("error") or tail or "the worker reported a failure"))
    return report


@dataclasses.dataclass(frozen=True)
class PluginChecked:
    """What :func:`checked_plugin` found: the case with the plug-in's sizes, the check's
    notes, and the bytes of the state each step starts from as the plug-in makes them
    (None: a built-in, whose sizes ckptbench knows, or a state whose leaves do not say);
    ``sources``: the user's files the check loaded, with their SHA-256, where ``run_case``
    starts its watch (None: a built-in); ``dtypes``: the floating dtypes of what ``loss``
    gets (``output_dtype``: post's outputs, a chain's last layer's) and of the loss itself
    (``loss_dtype``), which may differ from the steps' (``case.dtype``; a loss in float32
    under bfloat16 is common practice), recorded in ``environment.plugin``."""

    case: Case
    notes: tuple[str, ...] = ()
    state_bytes: tuple[int, ...] | None = None
    sources: CheckedSources | None = None
    dtypes: dict[str, str] = dataclasses.field(default_factory=dict)

    def run_options(self, sources: CheckedSources | None = None) -> dict[str, Any]:
        """What ``run_case`` takes of this check for a case of its plug-in, as ``run``
        passes it: where the watch of its files starts (``checked_sources``; ``sources``
        in place of the check's own: those a Dask worker found) and the dtypes to record
        (``plugin_dtypes``); only those the check has."""
        sources = self.sources if sources is None else sources
        options: dict[str, Any] = {} if sources is None else {"checked_sources": sources}
        return options | ({"plugin_dtypes": dict(self.dtypes)} if self.dtypes else {})

    def for_workers(self) -> PluginChecked:
        """This check as a Dask worker gets it: its files relative to the submitting folder
        (``CheckedSources.for_workers``)."""
        if self.sources is None:
            return self
        return dataclasses.replace(self, sources=self.sources.for_workers())


def check_plugin(
    case: Case,
    *,
    given_sizes: Iterable[str] | None = None,
    worker: Sequence[str] | None = None,
    costs: dict[str, Any] | None = None,
) -> tuple[Case, tuple[str, ...]]:
    """Run the case's plug-in workload once in a disposable worker, on the case's backend:
    ``init``, one ``step``, ``post``, ``loss`` and their gradient
    (:mod:`ckptbench.workloads.check`). Built-ins need nothing.

    ``given_sizes``: the size options the user set (None: all); the others take the plug-in
    factory's own defaults. Returns the case with those sizes and the check's notes (frozen
    parameters, ...). :class:`PluginError` with one line if the plug-in cannot be measured
    (it says what and, for the plug-in's own code, where) or the worker fails within the
    case's timeout; a ``PlanError`` when the check found a layer chain too long for a
    planned strategy to plan from per-layer costs (``costs``: the ones given instead, which
    say for themselves), before any of them is measured.
    """
    checked = checked_plugin(case, given_sizes=given_sizes, worker=worker, costs=costs)
    return checked.case, checked.notes


def checked_plugin(
    case: Case,
    *,
    given_sizes: Iterable[str] | None = None,
    worker: Sequence[str] | None = None,
    costs: dict[str, Any] | None = None,
) -> PluginChecked:
    """:func:`check_plugin`, with the plug-in's real state bytes per step beside (what a
    ``--costs`` file is checked against: ``cli.costs_file.costs_note``)."""
    if case.model.strip() in BUILTIN_WORKLOADS:
        return PluginChecked(case)
    report = _plugin_report(case, given_sizes, worker)
    sizes = report.get("sizes")
    if isinstance(sizes, dict) and sizes != case.sizes():
        try:
            case = dataclasses.replace(case, **{k: int(v) for k, v in sizes.items()
                                                if k in case.sizes()})  # fmt: skip
        except (TypeError, ValueError) as err:
            raise PluginError(f"--model {model_text(case.model)}: {err}") from None
    return _outcome(case, report, costs)


def _outcome(
    case: Case, report: dict[str, Any], costs: dict[str, Any] | None = None
) -> PluginChecked:
    """What a check's ``report`` makes of ``case`` (its sizes already the check's): its
    dtype, the kind of model, the notes, state bytes, files and loss dtypes."""
    case, said = _its_dtype(case, report)
    dtypes, loss_said = _loss_dtypes(case, report)
    notes = tuple(str(n) for n in report.get("notes") or ()) + said + loss_said
    states = report.get("state_bytes")
    known = isinstance(states, list) and all(type(n) is int and n >= 0 for n in states)
    states = tuple(states) if known and len(states) == case.steps else None
    sources = CheckedSources.from_report(report)
    return PluginChecked(_for_its_kind(case, report, costs), notes, states, sources, dtypes)


def _loss_dtypes(case: Case, report: dict[str, Any]) -> tuple[dict[str, str], tuple[str, ...]]:
    """The check's ``output_dtype`` and ``loss_dtype`` (each a floating dtype's name, where
    it found one), and a note where they are not the steps' dtype: recorded, never refused
    (a loss in float32 under bfloat16 steps is common practice)."""
    dtypes = {k: report[k] for k in ("output_dtype", "loss_dtype")
              if isinstance(report.get(k), str) and report[k].isprintable()}  # fmt: skip
    other = {k: v for k, v in dtypes.items() if v != case.dtype}
    if not other:
        return dtypes, ()
    what = {"output_dtype": "the outputs loss gets", "loss_dtype": "the loss"}
    if len(set(other.values())) == 1:  # both, in one dtype
        said = f"{' and '.join(what[k] for k in other)} in {next(iter(other.values()))}"
    else:
        said = " and ".join(f"{what[k]} in {v}" for k, v in other.items())
    keys = ", ".join(f"environment.plugin.{k}" for k in other)
    return dtypes, (f"--model {model_text(case.model)} computes {said}, its steps in {case.dtype}: "
                    f"recorded as {keys}; the case's dtype is the steps'",)  # fmt: skip


def check_plugins(
    cases: Iterable[Case], *, worker: Sequence[str] | None = None
) -> tuple[Case, ...]:
    """A sweep's cases with each plug-in checked as :func:`check_plugin` does, once per
    plug-in and backend, every size as given; each case of a plug-in then follows the rules
    of the kind of model the check found (a chain's executor, a peer for that kind, a plan
    it can compute), as a built-in's case does when its config is read.
    :class:`PluginError` (or ``PlanError``) with one line."""
    return checked_plugins(cases, worker=worker)[0]


def checked_plugins(
    cases: Iterable[Case], *, worker: Sequence[str] | None = None
) -> tuple[tuple[Case, ...], dict[PluginKey, PluginChecked]]:
    """:func:`check_plugins`, with each check's outcome beside, by ``sources.plugin_key``
    (one check per plug-in and backend, and per dtype where the backend casts to it): its
    notes, each once, for all its cells (a sweep says them once, before it measures), and
    what every cell of it gives ``run_case`` (:meth:`PluginChecked.run_options`: the files
    its watch starts from, the dtypes of the loss and what it gets, recorded as ``run``
    records them). Its ``case`` is the first cell checked, its ``state_bytes`` that cell's."""
    reports: dict[PluginKey, dict[str, Any]] = {}
    checks: dict[PluginKey, PluginChecked] = {}
    out = []
    for case in cases:
        if case.model.strip() in BUILTIN_WORKLOADS:
            out.append(case)
            continue
        key = plugin_key(case)
        if key not in reports:
            reports[key] = _plugin_report(case, None, worker)
        one = _outcome(case, reports[key])
        out.append(one.case)
        first = checks.setdefault(key, one)
        new = tuple(n for n in one.notes if n not in first.notes)  # another dtype asked
        checks[key] = dataclasses.replace(first, notes=first.notes + new) if new else first
    return tuple(out), checks


def _its_dtype(case: Case, report: dict[str, Any]) -> tuple[Case, tuple[str, ...]]:
    """``case`` in the floating dtype its plug-in computes in, by the check's ``dtypes``
    (each dtype with where it was first seen), and what to say of it.

    On a backend whose plug-ins keep their own dtype (autograd) the case records it, and
    so its gradient tolerance (float16's too: ``results.schema.DTYPE_EPSILON``): the least
    precise of those ckptbench knows where they mix (said in a note), a note where it is not
    the dtype the case had (a :class:`PluginWarning`, shown under ``-q``), PluginError where
    another one than float64 (the default) was asked. Elsewhere ``--dtype`` cast ``init``'s
    arrays: a parameter or state in another dtype is PluginError (its results would be
    labelled with a dtype they were not measured in)."""
    from ckptbench.backends.registry import spec
    from ckptbench.results.schema import DTYPE_EPSILON

    found = report.get("dtypes")
    found = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    if not found or set(found) == {case.dtype}:
        return case, ()
    m, asked = model_text(case.model), case.dtype

    def said(dtype: str) -> str:
        where = found[dtype]
        return f"{where} {'are' if where.endswith('params') else 'is'} {dtype}"

    if not spec(case.backend).plugins_own_dtype:
        other = next(d for d in found if d != asked)
        raise PluginError(f"--model {m}: {said(other)}, not the --dtype {asked} asked: "
                          f"ckptbench casts init's arrays to --dtype, and the plug-in's own "
                          f"arrays must keep to it (make them in x.dtype)")  # fmt: skip
    known = sorted(
        (d for d in found if d in DTYPE_EPSILON), key=DTYPE_EPSILON.__getitem__, reverse=True
    )  # least precise first
    dtype = known[0] if known else next(iter(found))
    if asked not in ("float64", dtype):
        raise PluginError(f"--model {m}: {said(dtype)}, not the --dtype {asked} asked: on "
                          f"--backend {case.backend} a plug-in's arrays keep their own dtype "
                          "(--dtype casts on torch and jax)")  # fmt: skip
    if not known:  # float8, say: no gradient tolerance is known for it
        return case, (PluginWarning(f"--model {m} computes in {', '.join(found)}, which "
                                    "ckptbench has no gradient tolerance for: recorded as "
                                    f"{asked}"),)  # fmt: skip
    if len(found) > 1:
        mix = " and ".join(f"{d} ({w})" for d, w in found.items())
        note = f"--model {m} mixes {mix}: recorded as {dtype}, the least precise ckptbench knows"
    elif dtype != asked:
        note = (f"--model {m} is recorded as {dtype}, its arrays' own dtype (on --backend "
                f"{case.backend} nothing casts a plug-in's arrays)")  # fmt: skip
    else:
        return case, ()
    said_as = PluginWarning if dtype != asked else str  # -q shows another dtype than asked
    return dataclasses.replace(case, dtype=dtype), (said_as(note),)


def _plugin_report(
    case: Case, given_sizes: Iterable[str] | None, worker: Sequence[str] | None
) -> dict[str, Any]:
    """The plug-in check's report from a disposable worker; PluginError if it found a
    problem or the worker failed."""
    if (why := name_problem(case.model)) is not None:  # a typo needs no worker to say so
        raise PluginError(f"--model: {why}")
    fields: dict[str, Any] = {"task": "check"}
    if given_sizes is not None:
        fields["given_sizes"] = sorted(given_sizes)
    try:
        report = run_task(case, fields, worker=worker, timeout_s=case.timeout_s)
    except TaskError as err:
        raise PluginError(f"--model {model_text(case.model)}: loading it in a fresh worker "
                          f"failed: {err}") from None  # fmt: skip
    problem = report.get("problem")
    if problem:  # a problem loading it names the part of the spec it is about: said once
        said = "" if report.get("loading") else f" {model_text(case.model)}"
        raise PluginError(f"--model{said}: {problem}")
    return report


def _for_its_kind(case: Case, report: dict[str, Any], costs: dict[str, Any] | None = None) -> Case:
    """``case`` under the rules of the kind of model the check found: a chain of layers an
    executor that holds its shapes; either kind a strategy for it (PluginError if not); a
    planned strategy on a chain a plan small enough to compute from per-layer costs, as a
    built-in stack's (``planner.check_plannable``; ``costs``, when given, say their kind)."""
    chain = report.get("chain") is True
    try:
        case = chain_executor(case, chain=chain)
    except ValueError as err:
        raise PluginError(str(err)) from None
    if chain and get_strategy(case.strategy).planned:
        from ckptbench.schedules.optimal import Costs, check_plannable

        given = Costs.from_dict(costs) if costs is not None else None
        check_plannable(case.steps, given, budget_bytes=case.budget_bytes, per_step=True)
    return case


def probe_device(case: Case, *, worker: Sequence[str] | None = None) -> str | None:
    """Why the case's backend cannot compute on its device here (None when it can), asked
    of a disposable worker: ckptbench's own process never imports torch or JAX. A
    framework that is not installed, or raises on import, is a ``MissingPackageError``
    (a ``ValueError``: one line, with the install command)."""
    try:
        report = run_task(case, {"task": "device"}, worker=worker, timeout_s=case.timeout_s)
    except TaskError as err:
        return f"cannot ask {case.backend} about {case.device}: {err}"
    if report.get("missing"):
        raise MissingPackageError(str(report["missing"]))
    problem = report.get("problem")
    return None if problem is None else str(problem)


def measure_costs(case: Case, *, worker: Sequence[str] | None = None) -> dict[str, Any]:
    """Measure the step costs of ``case`` (``ckptbench.measure.stepcosts``) in a fresh worker.

    Returns the worker's cost report (``report["costs"]`` is a ``planner.Costs`` document).
    """
    fields = {"task": "costs", "mode": Mode.CHECKPOINTED.value}
    try:
        report = run_task(case, fields, worker=worker, timeout_s=case.timeout_s)
    except TaskError as err:
        raise CostsError(f"measuring the step costs failed: {err}") from None
    return dict(report["costs_report"])


def profile_lines(
    case: Case, job: dict[str, Any], *, worker: Sequence[str] | None = None
) -> dict[str, Any]:
    """Profile one gradient line by line (``ckptbench.measure.lineprofile``) in a fresh worker."""
    report = run_task(case, {"task": "profile", "profile": job}, worker=worker,
                      timeout_s=case.timeout_s)  # fmt: skip
    return {k: v for k, v in report.items() if k != "event"}
