"""Result schema (frozen dataclasses), validation of cases, and atomic JSON IO.

Every ratio ckptbench prints can be recomputed from the raw per-iteration samples stored here.
This module never prints; errors are ``ValueError`` with one-line messages.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import socket
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ckptbench.backends.registry import BACKENDS, DEFAULT_BACKEND
from ckptbench.backends.registry import spec as backend_spec
from ckptbench.results.files import shown_value, writable_text
from ckptbench.results.modes import (
    MODES,
    UNFINISHED,
    Mode,
    Status,
    complete_rounds,
    pool_rounds,
    recorded_stop,
)
from ckptbench.results.units import MAX_BYTES
from ckptbench.schedules import Setting, get_strategy

if TYPE_CHECKING:
    from ckptbench.results.summary import CellSummary

__all__ = [
    "MAX_ROUNDS",
    "MODES",
    "SAVED_MID_RUN",
    "SAVED_MID_RUN_WHY",
    "SCHEMA_VERSION",
    "UNFINISHED",
    "Case",
    "CaseError",
    "Iteration",
    "Mode",
    "ModeResult",
    "RunResult",
    "SavedAs",
    "Status",
    "TargetError",
    "being_written",
    "check_count",
    "check_target",
    "complete_rounds_text",
    "kept_beside",
    "move_aside",
    "move_over_nothing",
    "names_beside",
    "pool_rounds",
    "result_from_dict",
    "result_to_dict",
    "save_or_beside",
    "save_result",
    "stop_status",
    "unsupported_version",
    "version_problem",
    "write_atomic",
    "writer_lock",
]

#: What compare and check say of such a file (``RunResult.saved_mid_run``).
SAVED_MID_RUN = "saved mid-run and never finished (killed outright, or still running)"


def complete_rounds_text(n: int) -> str:
    """'1 complete round', '3 complete rounds', 'no complete round'."""
    return "no complete round" if n == 0 else f"{n} complete round{'s' if n != 1 else ''}"


#: Why a file saved mid-run never finished, said after its status (``check``).
SAVED_MID_RUN_WHY = "saved mid-run: killed outright, or still running"


def stop_status(interruption: str, saved_mid_run: bool, rounds_complete: int) -> str:
    """A stopped run's status, as compare's table and check's line say it: 'interrupted in
    round 3 (2 complete rounds)', or for a file saved mid-run (no stop signal recorded)
    'never finished (1 complete round)'."""
    head = "never finished" if saved_mid_run else interruption
    return f"{head} ({complete_rounds_text(rounds_complete)})"


SCHEMA_VERSION = 3  # 3: backend/device/budget/rounds, hashed keys, rounds; 2: Case.output


class CaseError(ValueError):
    """A case (command-line options or a config cell) is invalid."""


#: Case fields that change how a cell is measured but are not part of ``Case.key``.
SETTINGS_FIELDS = ("warmup", "repeats", "rounds", "sample_interval_s", "trace")
#: Case fields that only limit a measurement (not part of the key either).
LIMIT_FIELDS = ("timeout_s", "memory_limit_bytes")
MAX_INT = 2**63 - 1  #: the largest integer a case field holds
#: The longest chain a case measures: Revolve's optimal evaluation count of a longer one (one
#: snapshot: about l**2 / 2) is beyond a 64-bit integer, which every reader of a result holds
#: counts in (compare failed on a result of 10**15 steps that check passed).
MAX_STEPS = 2**31
#: How a case says it (the steps of a result file, --steps, a config's: one bound).
_STEPS_TOP = (
    MAX_STEPS,
    f"at most 2**31 ({MAX_STEPS:,}; the evaluation counts of a longer chain exceed a 64-bit "
    "integer)",
)
#: The most BLAS/OpenMP threads a worker is given (--threads): more is a typo, not a machine.
MAX_THREADS = 1024
#: The most rounds a case runs, and iterations per round (``warmup``, ``repeats``), and
#: ``run --max-rounds``: a count past it is a typo, never a measurement (pyperf runs 20
#: processes of 3 values, asv 2 rounds, hyperfine 10 runs by default; ``run`` stops adding
#: rounds at 30 or 4 minutes; 10 000 rounds of a fresh worker per mode take hours at best).
#: 2**63 - 1 rounds were taken, and a sweep's dry run estimated 3847042856094246 h.
MAX_ROUNDS = 10_000
_COUNT_TOP = (MAX_ROUNDS, f"at most {MAX_ROUNDS:,} (more is a typo, not a measurement)")

#: ``--dtype``: the floating-point types some registered backend computes in (float64:
#: the default, and what a result without the field was measured in), from the registry.
DTYPES: tuple[str, ...] = tuple(dict.fromkeys(d for b in BACKENDS.values() for d in b.dtypes))
#: Bytes of one element of each dtype ckptbench records (float16: an autograd plug-in's own).
DTYPE_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
#: Machine epsilon of each of them (the spacing of floats just above 1: 2**-fraction bits),
#: what the gradient check's tolerance is derived from (``measure.gradcheck.grad_tolerance``).
DTYPE_EPSILON: dict[str, float] = {
    "float64": 2.0**-52, "float32": 2.0**-23, "bfloat16": 2.0**-7, "float16": 2.0**-10,
}  # fmt: skip
#: How a case's key names each dtype but the default float64.
_DTYPE_TAGS = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
#: ``--executor``: how our schedules run (JAX's compiled: one XLA program running the action
#: table; engine: the shared interpreter, on JAX dispatching compiled step pieces, on torch
#: a backward call per taped step; torch's one-call: the interpreter inside one backward
#: pass of autograd, resumed from saved-tensor hooks); every registered backend's, sorted.
EXECUTORS: tuple[str, ...] = tuple(sorted({e for b in BACKENDS.values() for e in b.executors}))


def default_executor(backend: str, device: str) -> str:
    """The executor a case runs without ``--executor``: JAX's compiled table on the CPU
    (where it measured fastest), the engine everywhere else (GPUs; torch and autograd
    always run the engine)."""
    entry = BACKENDS.get(backend)
    return entry.default_executor(device) if entry is not None else "engine"


def snaps_ignored(strategy: str) -> bool:  # store-all, budget: cases record snaps = steps
    return not get_strategy(strategy).uses_snaps


def _pos_int(name: str, value: Any, minimum: int = 1, top: tuple[int, str] | None = None) -> int:
    """An integer from ``minimum`` to ``top`` (the largest and how it is said; the default:
    below 2**63, which every reader takes back)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{name} must be an integer, got {value!r}")
    most, said = top or (MAX_INT, "< 2**63")
    if not minimum <= value <= most:
        raise CaseError(f"{name} must be >= {minimum} and {said}, got {str(value)[:40]}")
    return value


def check_count(name: str, value: Any, minimum: int = 1) -> int:
    """A count of rounds or of iterations per round from ``minimum`` to :data:`MAX_ROUNDS`
    (CaseError otherwise): the one bound of ``--rounds``, ``--repeats``, ``--warmup`` and
    ``--max-rounds``, of a config's ``rounds``, ``repeats`` and ``warmup``, and of a result
    file's."""
    return _pos_int(name, value, minimum, _COUNT_TOP)


def _bytes_int(name: str, value: Any) -> int:
    """A positive byte count below :data:`~ckptbench.results.units.MAX_BYTES` (2**62, what
    a size option takes, and what a result is read with)."""
    _pos_int(name, value)
    if value >= MAX_BYTES:
        raise CaseError(f"{name} must be below 2**62 bytes (4 EiB), got {str(value)[:40]}")
    return value


def _pos_float(name: str, value: Any, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e300:
        raise CaseError(f"{name} must be a positive, finite number, got {str(value)[:40]}")
    return float(value)


@dataclass(frozen=True)
class Case:
    """One measured configuration: a model, its sizes and the checkpointing parameters.

    ``snaps`` counts every snapshot slot including the one holding x_0 (the Revolve
    convention).
    """

    model: str = "lstm"
    steps: int = 1000
    snaps: int = 31
    strategy: str = "revolve"
    backend: str = DEFAULT_BACKEND
    device: str = "cpu"
    budget_bytes: int | None = None  # byte budget of strategy "optimal"
    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 1  # readout size per step (a scalar prediction per step by default)
    seed: int = 0
    warmup: int = 1
    repeats: int = 1  # measured iterations per round
    rounds: int = 6  # fresh workers per mode, in rotated order (see runner)
    threads: int = 1
    timeout_s: float | None = 900.0
    memory_limit_bytes: int | None = None
    sample_interval_s: float = 0.005
    dtype: str = "float64"  # the workload's floating-point type (--dtype)
    executor: str | None = None  # None: default_executor(backend, device) (--executor)
    trace: bool = False  # run --trace: one more checkpointed iteration, action by action

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise CaseError(f"model must be a non-empty string, got {self.model!r}")
        if not self.model.isprintable():  # tables, markdown rows and errors show it on a line
            raise CaseError(f"model must be printable text on one line, got {self.model[:40]!r}")
        if self.model != self.model.strip():  # "lstm " is lstm: one case, one key
            object.__setattr__(self, "model", self.model.strip())
        for name in ("steps", "snaps", "hidden", "batch", "input", "threads"):
            _pos_int(name, getattr(self, name), top=_STEPS_TOP if name == "steps" else None)
        for name in ("repeats", "rounds", "warmup"):
            check_count(name, getattr(self, name), minimum=0 if name == "warmup" else 1)
        if self.threads > MAX_THREADS:  # thousands of BLAS threads: a typo, and a hang
            raise CaseError(f"threads must be at most {MAX_THREADS}, got {str(self.threads)[:40]}")
        _pos_int("output", self.output)
        _pos_int("seed", self.seed, minimum=0)
        try:
            spec = get_strategy(self.strategy)
        except ValueError as err:
            raise CaseError(_cut_echo(err, self.strategy)) from None
        try:
            backend = backend_spec(self.backend)
        except ValueError as err:
            raise CaseError(_cut_echo(err, self.backend)) from None
        if self.device not in backend.devices:
            runs = ", ".join(b.name for b in BACKENDS.values() if self.device in b.devices)
            known = dict.fromkeys(d for b in BACKENDS.values() for d in b.devices)
            where = (
                f"; {self.device} needs --backend {runs}"
                if runs
                else f"; no backend has it (devices: {', '.join(known)})"
            )
            raise CaseError(
                f"unknown device {shown_value(self.device)} for --backend {self.backend} "
                f"(choose from {', '.join(backend.devices)}){where}"
            )
        if not spec.runs_on(backend):
            runs_on = " or ".join(
                f"--backend {b.name}" for b in BACKENDS.values() if spec.runs_on(b)
            )
            raise CaseError(f"strategy {spec.name!r} needs {runs_on}")
        if spec.setting is Setting.BUDGET:
            if self.budget_bytes is None:
                raise CaseError(f"strategy {spec.name!r} needs a byte budget (--budget)")
            _bytes_int("budget_bytes", self.budget_bytes)
        elif self.budget_bytes is not None:
            raise CaseError(
                f"a byte budget (--budget) is only used by strategy 'optimal', not {spec.name!r}"
            )
        self._check_numerics()
        if not isinstance(self.trace, bool):  # "no" would be truthy
            raise CaseError(f"trace must be true or false, got {self.trace!r}")
        if self.trace and not spec.ours:
            raise CaseError(
                f"--trace records our schedules action by action; strategy {spec.name!r} is "
                "a framework's own checkpointing (nothing to trace)"
            )
        if self.trace and (why := backend_spec(self.backend).untraced):
            raise CaseError(f"--trace is not available on --backend {self.backend}: {why}")
        _pos_float("timeout_s", self.timeout_s, allow_none=True)
        _pos_float("sample_interval_s", self.sample_interval_s)
        if self.memory_limit_bytes is not None:
            _bytes_int("memory_limit_bytes", self.memory_limit_bytes)

    def _check_numerics(self) -> None:
        backend = backend_spec(self.backend)
        # float16 too, where an autograd plug-in computes in it (asked only then: the
        # workloads package it reads imports autograd, which the command line does not load)
        if self.dtype not in DTYPES and not (
            isinstance(self.dtype, str) and self.dtype in DTYPE_EPSILON and self._own_dtype(backend)
        ):
            raise CaseError(
                f"unknown dtype {shown_value(self.dtype)} (choose from {', '.join(DTYPES)})"
            )
        if self.dtype not in backend.dtypes and not self._own_dtype(backend):
            runs = " or ".join(b.name for b in BACKENDS.values() if self.dtype in b.dtypes)
            which = "'s built-in models compute" if backend.plugins_own_dtype else " computes"
            raise CaseError(
                f"--dtype {self.dtype} needs --backend {runs} "
                f"({self.backend}{which} in {', '.join(backend.dtypes)} only)"
            )
        if self.executor is not None and self.executor not in EXECUTORS:
            choose = ", ".join(EXECUTORS)
            raise CaseError(f"unknown executor {shown_value(self.executor)} (choose from {choose})")
        if self.executor is not None and self.executor not in backend.executors:
            runs = " or ".join(b.name for b in BACKENDS.values() if self.executor in b.executors)
            raise CaseError(
                f"--executor {self.executor} needs --backend {runs} (the {self.backend} "
                f"backend runs our schedules with --executor {' or '.join(backend.executors)} only)"
            )

    def _own_dtype(self, backend: Any) -> bool:
        """Whether the case is a plug-in's whose arrays keep their own dtype on ``backend``
        (autograd's float32 plug-in: the check recorded it; ``measure.tasks``)."""
        from ckptbench.workloads import BUILTIN_WORKLOADS

        return backend.plugins_own_dtype and self.model not in BUILTIN_WORKLOADS

    @property
    def executor_used(self) -> str:
        """The executor this case runs: ``executor``, or the backend's default on its device."""
        return self.executor or default_executor(self.backend, self.device)

    @property
    def executor_ran(self) -> str | None:
        """The executor of ours that runs this case (:attr:`executor_used`); None for a
        framework's own checkpointing, which runs none."""
        return self.executor_used if get_strategy(self.strategy).ours else None

    def identity(self) -> dict[str, Any]:
        """Every field that changes what is measured (all but settings and limits).

        ``dtype`` float64 and an executor that is the default for the backend and device
        are left out, so cases measured before these fields existed keep their keys."""
        skip = set(SETTINGS_FIELDS) | set(LIMIT_FIELDS)
        ident = {k: v for k, v in self.to_dict().items() if k not in skip}
        if ident.get("dtype") == "float64":
            del ident["dtype"]
        if self.executor_used == default_executor(self.backend, self.device):
            del ident["executor"]
        return ident

    @functools.cached_property  # computed once: a 60 000-cell dry run spent most of its
    def key(self) -> str:  # time hashing identities again (the case is frozen)
        """Identifier of the cell in a sweep: a readable prefix plus a hash of the identity.

        The prefix is cut for readability; the 10-hex-digit hash of every identity field
        (the full model spec included) keeps two different cases from sharing a key.
        """
        ident = self.identity()
        digest = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:10]
        backend = "" if self.backend == DEFAULT_BACKEND else f"-{self.backend}-{self.device}"
        budget = "" if self.budget_bytes is None else f"-m{self.budget_bytes}"
        if self.dtype != "float64":
            budget += "-" + _DTYPE_TAGS.get(self.dtype, self.dtype)
        if "executor" in ident:
            budget += f"-{self.executor}"
        return (
            f"{_slug(self.model)}{backend}-l{self.steps}-s{self.snaps}-{self.strategy}{budget}"
            f"-h{self.hidden}-b{self.batch}-i{self.input}-o{self.output}-t{self.threads}"
            f"-seed{self.seed}-{digest}"
        )

    def check_fits_memory(self, total_bytes: int | None = None) -> None:
        """Refuse (``CaseError``) a case whose inputs and outputs alone, or a built-in's
        parameters, inputs and one state (``workloads.registry``: its ``least``), could not
        fit in this machine's memory (``total_bytes``, default: psutil's total)."""
        need = 8 * self.steps * self.batch * (self.input + self.output)
        if total_bytes is None:
            import psutil

            total_bytes = psutil.virtual_memory().total
        if need > total_bytes:
            raise CaseError(
                f"--steps {self.steps} x --batch {self.batch} x (--input {self.input} + "
                f"--output {self.output}): the inputs and outputs alone need about "
                f"{need / 2**30:,.1f} GiB, more than this machine's {total_bytes / 2**30:.1f} GiB"
            )
        from ckptbench.workloads import Sizes, registry

        entry = registry.builtin(self.model)  # a plug-in's arrays are known when it runs
        least = entry.least_elements(Sizes(**self.sizes()), self.steps) if entry else None
        if least is not None and least * DTYPE_BYTES[self.dtype] > total_bytes:
            raise CaseError(
                f"--model {self.model} at --hidden {self.hidden} --batch {self.batch} --input "
                f"{self.input} --output {self.output}, {self.steps} steps: its parameters, "
                f"inputs and one state alone need about "
                f"{least * DTYPE_BYTES[self.dtype] / 2**30:,.1f} GiB in {self.dtype}, more "
                f"than this machine's {total_bytes / 2**30:.1f} GiB"
            )

    def effective(self) -> tuple[Case, tuple[str, ...]]:
        """The case as it will run, and notes: snaps clamped, or = steps where unused; what
        its strategy says of its setting (``StrategySpec.note``); no executor for a peer,
        which runs none of ours. One case, one key, whatever was typed."""
        case, notes = self, []
        if snaps_ignored(self.strategy) and self.snaps != self.steps:
            note = f"--snaps {self.snaps} is not used by strategy {self.strategy}; recorded as "
            notes.append(note + f"{self.steps}, so every command gives this case one key")
            case = replace(case, snaps=self.steps)
        elif self.snaps > self.steps:
            clamp = get_strategy(self.strategy).setting.clamp
            notes.append(f"--snaps {self.snaps} clamped to {self.steps}: {clamp}")
            case = replace(case, snaps=self.steps)
        said = get_strategy(self.strategy).note
        if said is not None and (text := said(case.steps, case.snaps)):
            notes.append(text)
        if self.executor is not None and not get_strategy(self.strategy).ours:
            notes.append(
                f"--executor {self.executor} is not used by strategy {self.strategy} (a "
                "framework's own checkpointing runs no executor of ours); recorded without it"
            )
            case = replace(case, executor=None)
        return case, tuple(notes)

    def sizes(self) -> dict[str, int]:
        """Keyword sizes for the workload factory."""
        return {
            "hidden": self.hidden,
            "batch": self.batch,
            "input": self.input,
            "output": self.output,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Case:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise CaseError(f"unknown case key(s): {', '.join(unknown)}")
        return cls(**data)

    def with_(self, **changes: Any) -> Case:
        return replace(self, **changes)


def _slug(text: str) -> str:
    keep = [c if c.isalnum() else "_" for c in text]
    return "".join(keep).strip("_")[-40:].strip("_") or "model"


@dataclass(frozen=True)
class Iteration:
    """One timed, memory-measured iteration of loss + gradient inside the worker."""

    wall_time_s: float
    cpu_time_s: float
    peak_rss_bytes: int  # exact peak of this iteration (VmHWM after reset, or fallback)
    start_rss_bytes: int  # RSS just before the iteration, after malloc_trim
    phases: dict[str, float] = field(default_factory=dict)  # executor phase times (s)
    peak_device_bytes: int | None = None  # CUDA: torch.cuda.max_memory_allocated
    start_device_bytes: int | None = None  # CUDA: memory_allocated before the iteration
    device_peak_exact: bool | None = None  # False: peak_device_bytes is an upper bound
    # CPU time of the worker's measuring thread alone: never above wall_time_s, whatever the
    # threads (analysis/stability.py); None in results written before it was recorded
    thread_cpu_time_s: float | None = None


@dataclass(frozen=True)
class ModeResult:
    """Everything measured for one mode in one fresh worker process."""

    mode: Mode
    status: Status
    iterations: tuple[Iteration, ...] = ()
    warmup: tuple[Iteration, ...] = ()
    peak_method: str = ""  # "vmhwm" (exact, reset per iteration) or "ru_maxrss" (fallback)
    baseline_rss_anon_bytes: int | None = None  # RssAnon of the worker before iterating
    sampled_peak_rss_bytes: int | None = None  # parent's psutil sampler, like top
    sample_count: int = 0
    sampler_cpu_time_s: float | None = None
    timeline: tuple[tuple[float, int], ...] = ()  # (seconds, rss_bytes), thinned
    counters: dict[str, int | None] = field(default_factory=dict)  # None: not measured
    loss: float | None = None
    grad_max_rel_err: float | None = None  # vs normal mode, checkpointed only
    error: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    wall_time_s: float | None = None  # whole worker process
    plan: dict[str, Any] = field(default_factory=dict)  # strategy optimal: costs, prediction
    started_unix_s: float | None = None  # when the worker was started (for mprof files)
    other_busy_cores: float | None = None  # cores other processes kept busy meanwhile
    round: int = 0  # which round of the run (fresh workers per mode, rotated order)
    iterations_planned: int | None = None  # warm-up excluded; more than len(iterations)
    # when the mode was stopped (timeout, interrupt) after some iterations completed
    trace: dict[str, Any] | None = None  # run --trace: rows per action (measure/trace.py)
    # the CPUs the worker could run on once its backend was set up, as a cpulist (JAX pins
    # a one-thread worker to one CPU); None: not reported (a failed mode, an older result)
    cpu_affinity: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def reported(cls, report: dict[str, Any], **common: Any) -> ModeResult:
        """An ok mode from a worker's ``result`` event and the parent's own ``common``
        fields (``trace``: the traced iteration's section, when the job asked for it)."""
        trace = report.get("trace")
        return cls(
            status=Status.OK,
            peak_method=str(report.get("peak_method", "")),
            baseline_rss_anon_bytes=report.get("baseline_rss_anon_bytes"),
            counters=dict(report.get("counters") or {}),
            plan=dict(report.get("plan") or {}),
            loss=report.get("loss"),
            trace=dict(trace) if isinstance(trace, dict) else None,
            cpu_affinity=_text_or_none(report.get("cpu_affinity")),
            **common,
        )


@dataclass(frozen=True)
class SavedAs:
    """Where a result was saved when not at the path asked for (:func:`save_or_beside`:
    beside it, or in the temporary folder), and why not there. Carried by the result a
    runner returns (:attr:`RunResult.saved_as`), never written into a document."""

    path: Path
    why: str


@dataclass(frozen=True)
class RunResult:
    """One case measured in all modes, with the environment; its figures are
    :attr:`summary` (typed, computed from the raw samples, written into the file)."""

    case: Case
    modes: tuple[ModeResult, ...]
    environment: dict[str, Any]
    created: str
    host: str = ""
    schema_version: int = SCHEMA_VERSION
    tool_version: str = ""
    #: the file it was read from (``store.load_result``; "" for one measured here): tells
    #: the invocations of one cell apart where they are shown; not part of the document
    source: str = field(default="", compare=False, repr=False, metadata={"stored": False})
    #: where the runner saved it when not at the path it was given (None: there, or nowhere
    #: asked): a sweep names that file and never saves the result a second time; not part
    #: of the document
    saved_as: SavedAs | None = field(
        default=None, compare=False, repr=False, metadata={"stored": False}
    )

    def mode_rounds(self, mode: Mode) -> tuple[ModeResult, ...]:
        """Every complete round's result of ``mode`` (every round's where none is complete:
        :func:`ckptbench.results.modes.complete_rounds`), in round order."""
        kept = complete_rounds(self.modes)
        return tuple(sorted((m for m in kept if m.mode is mode), key=lambda m: m.round))

    def mode(self, mode: Mode) -> ModeResult | None:
        """``mode`` pooled over the complete rounds (:meth:`mode_rounds`): iterations of
        every one, the worst status.

        With one round this is that round's result itself.
        """
        rounds = self.mode_rounds(mode)
        if len(rounds) <= 1:
            return rounds[0] if rounds else None
        return pool_rounds(rounds)

    @property
    def rounds_started(self) -> int:
        return len({m.round for m in self.modes})

    @property
    def interrupted_round(self) -> int | None:
        """The 1-based round ckptbench was stopped in (SIGTERM, SIGHUP, Ctrl-C), or None."""
        cut = [m.round for m in self.modes if m.status is Status.INTERRUPTED]
        if cut:
            return min(cut) + 1
        return (recorded_stop(self.modes, self.environment) or {}).get("round")

    @property
    def interruption(self) -> str | None:
        """'interrupted in round 8', 'interrupted before round 8' (stopped between rounds)."""
        cut = self.interrupted_round
        if cut is None:
            return None
        return f"interrupted {'before' if cut > self.rounds_started else 'in'} round {cut}"

    @property
    def stopped_by(self) -> str | None:
        """What the file records stopped its run (``environment.interrupted.by``: 'SIGTERM',
        or :data:`UNFINISHED` for a file saved mid-run by an older ckptbench), or None."""
        stop = (self.environment or {}).get("interrupted")
        by = stop.get("by") if isinstance(stop, dict) else None
        return by if isinstance(by, str) and by else None

    @property
    def saved_mid_run(self) -> bool:
        """A file saved mid-run whose run never finished (:data:`UNFINISHED`; or, with no
        stop recorded, whose ``environment.finished`` is false: ``modes.recorded_stop``)."""
        return (recorded_stop(self.modes, self.environment) or {}).get("by") == UNFINISHED

    @property
    def stop_text(self) -> str | None:
        """'interrupted in round 3 (2 complete rounds)'; for a file saved mid-run, 'never
        finished (1 complete round), saved mid-run: killed outright, or still running' (as
        compare's status column and warning say them: :func:`stop_status`); None for a run
        that was not stopped."""
        where = self.interruption
        if where is None:
            return None
        said = stop_status(where, self.saved_mid_run, self.rounds_complete)
        return f"{said}, {SAVED_MID_RUN_WHY}" if self.saved_mid_run else said

    @property
    def absent_modes(self) -> str | None:
        """The modes this result lacks and why, 'no baseline: measured without it (`run
        --modes`)' (no stop recorded) or 'no normal: interrupted in round 1 (stopped; ...)'; None
        when it holds every mode."""
        missing = [m.value for m in MODES if self.mode(m) is None]
        if not missing:
            return None
        if self.interruption is None:
            why = f"measured without {'it' if len(missing) == 1 else 'them'} (`run --modes`)"
        else:
            why = f"{self.interruption} (stopped; `sweep --resume` measures a sweep's cell again)"
        return f"no {', '.join(missing)}: {why}"

    @property
    def rounds_complete(self) -> int:
        """Rounds in which no mode was cut by an interruption."""
        cut = {m.round for m in self.modes if m.status is Status.INTERRUPTED}
        return len({m.round for m in self.modes} - cut)

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.modes)

    @cached_property
    def summary(self) -> CellSummary:
        """Every figure of this result, computed once from its raw samples
        (:func:`ckptbench.results.summary.compute`; never read back from a file)."""
        from ckptbench.results.summary import compute

        return compute(self.case, self.modes, self.environment)


# ---------------------------------------------------------------------- JSON


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def result_to_dict(result: RunResult) -> dict[str, Any]:
    """The JSON document of a result (schema_version first); its ``summary`` is written
    from :attr:`RunResult.summary` (the stable keys of ``CellSummary.as_dict``), after the
    environment, where it has always been."""
    raw = asdict(result)
    for f in fields(RunResult):  # where it was read from or saved, not what it holds
        if not f.metadata.get("stored", True):
            raw.pop(f.name)
    data = _jsonable(raw)
    ordered = {"schema_version": data.pop("schema_version")}
    for key, value in data.items():
        ordered[key] = value
        if key == "environment":
            ordered["summary"] = result.summary.as_dict()
    return _as_text(ordered)


def _as_text(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with a lone surrogate in any string (a plug-in's error message, an environment
    variable of non-UTF-8 bytes) as its escape (``results.files.writable_text``): saved as it
    was, no reader read the file. The modes' timelines, pairs of numbers and the bulk of a
    file, are left as they are."""
    out = {k: v if k == "modes" else writable_text(v) for k, v in doc.items()}
    out["modes"] = [{k: v if k == "timeline" else writable_text(v) for k, v in m.items()}
                    for m in doc["modes"]]  # fmt: skip
    return out


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def mode_from_dict(data: dict[str, Any]) -> ModeResult:
    d = dict(data)
    d["mode"] = Mode(d["mode"])
    d["status"] = Status(d["status"])
    d["iterations"] = tuple(Iteration(**it) for it in d.get("iterations", ()))
    d["warmup"] = tuple(Iteration(**it) for it in d.get("warmup", ()))
    d["timeline"] = tuple((float(t), int(r)) for t, r in d.get("timeline", ()))
    trace = d.get("trace")
    if trace is not None and not (
        isinstance(trace, dict) and all(isinstance(r, dict) for r in trace.get("rows", ()))
    ):
        raise ValueError("trace must be an object whose rows are objects")
    return ModeResult(**d)


def version_problem(data: dict[str, Any], source: str) -> str | None:
    """Why ``data`` is not of the schema version this ckptbench reads (None: it is)."""
    version = data.get("schema_version")
    if version == SCHEMA_VERSION:
        return None
    return f"{source}: {unsupported_version('schema_version', version, SCHEMA_VERSION)}"


def unsupported_version(name: str, version: Any, reads: int) -> str:
    """Why a document's ``name`` (schema_version, manifest_version) ``version`` is not read by
    this ckptbench, which reads ``reads``: a newer ckptbench wrote it (upgrade), an older one
    did, or it is no version a ckptbench writes."""
    if type(version) is int and version > reads:
        return (f"{name} {version} is from a newer ckptbench (this one reads {reads}): "
                "upgrade ckptbench to read it")  # fmt: skip
    if type(version) is int and version >= 1:
        return (f"{name} {version} is from an older ckptbench (this one reads {reads}): read it "
                "with that version, or measure again")  # fmt: skip
    text = repr(version) if len(repr(version)) <= 40 else repr(version)[:37] + "..."
    return f"{name} {text} is not supported (this ckptbench reads {reads})"


def result_from_dict(data: dict[str, Any], source: str = "result") -> RunResult:
    """Parse a result document; one-line ``ValueError`` on another schema or a bad shape.
    The stored ``summary`` is not read: the figures are computed from the raw samples."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a ckptbench result (expected a JSON object)")
    if (problem := version_problem(data, source)) is not None:
        raise ValueError(problem)
    try:
        return RunResult(
            case=_executor_as_run(Case.from_dict(data["case"]), data.get("environment")),
            modes=tuple(mode_from_dict(m) for m in data["modes"]),
            environment=data.get("environment", {}),
            created=data.get("created", ""),
            host=data.get("host", ""),
            schema_version=SCHEMA_VERSION,
            tool_version=data.get("tool_version", ""),
        )
    except (KeyError, TypeError, ValueError) as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{source}: malformed result ({type(err).__name__}: {msg})") from None


def _executor_as_run(case: Case, environment: Any) -> Case:
    """``case`` naming the executor its result ran on where that is no longer the default.

    A case saved without ``--executor`` ran its backend's default of the day, which the
    result's ``environment["executor"]`` records. Once a default changes (JAX's on a GPU
    did; torch's on CUDA may), such a result would be read as the new default's: its
    figures labelled with an executor that never ran, and a resumed sweep keeping it as the
    new default's cell. Read back, the case names the executor that ran instead (its key
    then names it too, so a resumed sweep finds a conflict, not a kept cell). Peers run no
    executor of ours and are left as saved."""
    ran = environment.get("executor") if isinstance(environment, dict) else None
    if case.executor is not None or not isinstance(ran, str) or ran == case.executor_used:
        return case
    if not get_strategy(case.strategy).ours or ran not in backend_spec(case.backend).executors:
        return case
    return replace(case, executor=ran)


def _cut_echo(err: Exception, value: object) -> str:
    """``err``'s message, the value typed that it quotes cut to a readable length
    (:func:`ckptbench.results.files.shown_value`)."""
    said = str(err)
    return said.replace(repr(value), shown_value(value)) if isinstance(value, str) else said


class TargetError(OSError):
    """A file may not be written where it was asked: it exists, or is not a regular file."""


def check_target(path: str | os.PathLike[str], *, replace: bool) -> None:
    """Raise :class:`TargetError` unless ``path`` may be (re)written as a regular file.

    A symlink, a folder, a FIFO, a device or a socket is never replaced; an existing regular
    file only when ``replace`` is true.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise TargetError(f"{path}: is a symbolic link; ckptbench never writes through one")
    if not stat.S_ISREG(st.st_mode):
        raise TargetError(f"{path}: exists and is not a regular file")
    if not replace:
        raise TargetError(f"{path}: exists (ckptbench never replaces a file unless told to)")


def write_atomic(path: str | os.PathLike[str], text: str | bytes, *, replace: bool = True) -> None:
    """Write ``text`` (UTF-8) or bytes to ``path`` atomically (temp file in the same folder,
    fsync, rename).

    Never writes through a symlink or over anything but a regular file. With
    ``replace=False`` an existing ``path`` is never replaced: the temp file is hard-linked
    into place, which fails atomically if the name exists, so two writers cannot both win.
    """
    target = Path(path)
    check_target(target, replace=replace)
    target.parent.mkdir(parents=True, exist_ok=True)
    # the temp name is the target's plus 14 bytes: cut to fit a 255-byte name (a 249-byte
    # --out passed every check and lost its measurement at the first save)
    prefix = f".{fit_name(target.name, NAME_MAX - 14)}."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode open() would have
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        binary = isinstance(text, bytes)
        # text is UTF-8; a lone surrogate (a non-UTF-8 file name as Python holds it, in a
        # report) as its escape: it raised UnicodeEncodeError, a traceback and no report
        coding = {} if binary else {"encoding": "utf-8", "errors": "backslashreplace"}
        with os.fdopen(fd, "wb" if binary else "w", **coding) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            check_target(target, replace=True)  # it may have become a link meanwhile
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise TargetError(
                    f"{target}: exists (ckptbench never replaces a file unless told to)"
                ) from None
            os.unlink(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_result(result: RunResult, path: str | os.PathLike[str], *, replace: bool = True) -> None:
    """Save a result atomically (see :func:`write_atomic` for what is never replaced)."""
    write_atomic(path, json.dumps(result_to_dict(result), indent=1) + "\n", replace=replace)


#: The longest file name (bytes) the common file systems take.
NAME_MAX = 255


def fit_name(name: str, limit: int) -> str:
    """``name`` cut to at most ``limit`` bytes of UTF-8 (whole characters)."""
    data = name.encode("utf-8", "surrogateescape")
    return name if len(data) <= limit else data[:limit].decode("utf-8", "ignore")


def kept_beside(path: Path, kind: str, stamp: str | None = None) -> Path:
    """A new name beside ``path`` for a file kept there, ``<name>.<UTC time>.<kind>`` (or
    ``stamp`` in place of the time), cut to fit a 255-byte name (a replaced result, an
    unreadable answer)."""
    tail = f".{stamp or datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}.{kind}"
    return path.with_name(fit_name(path.name, NAME_MAX - len(tail.encode())) + tail)


#: where a file system takes no hard links: a move checks the name is free, then renames
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK}


def move_over_nothing(src: Path, dst: Path) -> None:
    """Move ``src`` (a link itself, not what it points to) to ``dst``, never over anything
    there: hard-linked, which fails if ``dst`` exists (FileExistsError), then unlinked."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as err:
        if err.errno not in _NO_LINKS:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "File exists", str(dst)) from None
        os.rename(src, dst)
        return
    try:
        os.unlink(src)
    except OSError:
        os.unlink(dst)  # left as it was
        raise


def names_beside(path: Path, kind: str) -> Iterator[Path]:
    """The names :func:`kept_beside` gives, the clock's first, then with a counter
    (``<name>.<UTC time>-1.<kind>``, up to 99): one to use when the one before exists."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    for n in range(100):
        yield kept_beside(path, kind, stamp if n == 0 else f"{stamp}-{n}")


def move_aside(path: Path, kind: str) -> Path:
    """Move ``path`` to a new name beside it (:func:`names_beside`), never over a file kept
    there before (a name the clock gave twice). Returns the new name; OSError when it
    cannot be moved."""
    for aside in names_beside(path, kind):
        try:
            move_over_nothing(path, aside)
        except FileExistsError:
            continue
        return aside
    raise FileExistsError(errno.EEXIST, "every name beside it is taken", str(path))


def save_or_beside(result: RunResult, path: Path, *, replace: bool) -> tuple[Path, str | None]:
    """Save ``result`` at ``path`` (:func:`save_result`); when that fails
    (the file appeared, the folder went away or is full), save it beside ``path`` under a
    new name instead, or in the temporary folder. Returns where it was saved, and why not
    at ``path`` (None when it was). A finished measurement is never dropped for its name."""
    try:
        save_result(result, path, replace=replace)
        return path, None
    except OSError as err:
        why = str(err) if isinstance(err, TargetError) else f"{path}: {err.strerror or err}"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    tail = f".{stamp}-{os.getpid()}{path.suffix or '.json'}"
    name = fit_name(path.stem, NAME_MAX - len(tail.encode())) + tail
    last: OSError | None = None
    for folder in (path.parent, Path(tempfile.gettempdir())):
        try:
            save_result(result, folder / name, replace=False)
            return folder / name, why
        except OSError as err:
            last = err
    assert last is not None  # said where it was asked for, and that nothing could hold it
    raise OSError(last.errno, f"{last.strerror}: the result was not saved", str(path))


def _lock_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    except OSError:
        text = []
    return f"pid {text[0]}" if text and text[0].isdigit() else "another process"


def being_written(path: str | os.PathLike[str]) -> str | None:
    """Who is writing ``path`` right now: a result file whose :func:`writer_lock` a live
    ckptbench holds ('another ckptbench (pid N)'), or a folder a sweep holds (its exclusive
    ``flock`` on the folder itself, 'a ckptbench sweep'). Read from the kernel's table of
    locks (``/proc/locks``), so a reader takes no lock a writer could trip on; None when
    nobody is writing, or where that table cannot be read."""
    p = Path(path)
    folder = p.is_dir()
    where = p if folder else p.parent / f".{p.name}.lock"
    try:
        st = os.stat(where)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read().splitlines()
    except OSError:
        return None
    ident = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table:  # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        f = line.split()
        if len(f) > 5 and f[1] == "FLOCK" and f[3] == "WRITE" and f[5] == ident:
            if folder:
                return "a ckptbench sweep"
            try:
                return f"another ckptbench (pid {int(where.read_text().split()[0])})"
            except (OSError, ValueError, IndexError):
                return "another ckptbench"
    return None


@contextlib.contextmanager
def writer_lock(path: str | os.PathLike[str], what: str = "--out") -> Iterator[None]:
    """Claim the file ``path`` for this process while the block runs: the lock file
    ``.NAME.lock`` beside it holds this process's pid under an exclusive ``flock``. The
    kernel drops the flock when its process dies, so a lock file left by a killed writer is
    stale and is taken over. A live writer's claim is a one-line :class:`TargetError` naming
    its pid, raised before anything is measured."""
    p = Path(path)
    lock = p.parent / f".{p.name}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as err:
            raise TargetError(f"{what} {p}: cannot create {lock.name} ({err.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise TargetError(
                f"{what} {p}: another ckptbench ({holder}) is writing this file; wait for it "
                f"to finish or use another {what}"
            ) from None
        try:  # the holder may have removed the file between our open and our flock
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
    except OSError as err:  # a full disk: said naming the file, before anything is measured
        _drop_lock(lock, fd)
        raise TargetError(f"{what} {p}: cannot write {lock.name} ({err.strerror})") from None
    try:
        yield
    finally:
        _drop_lock(lock, fd)


def _drop_lock(lock: Path, fd: int) -> None:
    """Remove ``lock`` if it is still the file ``fd`` holds, and close ``fd``."""
    with contextlib.suppress(OSError):
        if os.stat(lock).st_ino == os.fstat(fd).st_ino:
            os.unlink(lock)
    os.close(fd)
