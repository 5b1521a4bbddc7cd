"""Result schema (frozen dataclasses), validation of cases, and atomic JSON IO.

Every ratio ckptbench prints can be recomputed from the raw per-iteration samples stored here.
This module never prints; errors are ``ValueError`` with one-line messages.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any

from ckptbench.revolve import Strategy

__all__ = [
    "SCHEMA_VERSION",
    "Case",
    "CaseError",
    "Iteration",
    "Mode",
    "ModeResult",
    "RunResult",
    "Status",
    "result_from_dict",
    "result_to_dict",
    "save_result",
    "write_atomic",
]

SCHEMA_VERSION = 2  # 2: Case.output; threads in Case.key


class CaseError(ValueError):
    """A case (command-line options or a config cell) is invalid."""


class Mode(Enum):
    """How the gradient is computed in one worker process."""

    BASELINE = "baseline"  # forward only, zero gradient: the memory floor
    NORMAL = "normal"  # plain autograd, every step's tape kept
    CHECKPOINTED = "checkpointed"  # binomial_checkpoint with the case's strategy


class Status(Enum):
    """Outcome of one mode's measurement."""

    OK = "ok"
    FAILED = "failed"  # the worker reported an error (e.g. gradient mismatch)
    CRASHED = "crashed"  # the worker died or printed no result
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out-of-memory"  # RSS exceeded --memory-limit; the worker was stopped


MODES: tuple[Mode, ...] = (Mode.BASELINE, Mode.NORMAL, Mode.CHECKPOINTED)

#: Case fields that change how a cell is measured but are not part of ``Case.key``.
SETTINGS_FIELDS = ("warmup", "repeats", "sample_interval_s")


def _pos_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CaseError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise CaseError(f"{name} must be >= {minimum}, got {value}")
    return value


def _pos_float(name: str, value: Any, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CaseError(f"{name} must be a positive number, got {value!r}")
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
    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int = 1  # readout size per step (a scalar prediction per step by default)
    seed: int = 0
    warmup: int = 1
    repeats: int = 3
    threads: int = 1
    timeout_s: float | None = 900.0
    memory_limit_bytes: int | None = None
    sample_interval_s: float = 0.005

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise CaseError(f"model must be a non-empty string, got {self.model!r}")
        for name in ("steps", "snaps", "hidden", "batch", "input", "repeats", "threads"):
            _pos_int(name, getattr(self, name))
        _pos_int("output", self.output)
        _pos_int("warmup", self.warmup, minimum=0)
        _pos_int("seed", self.seed, minimum=0)
        try:
            Strategy(self.strategy)
        except ValueError:
            names = ", ".join(s.value for s in Strategy)
            raise CaseError(f"unknown strategy {self.strategy!r} (choose from {names})") from None
        _pos_float("timeout_s", self.timeout_s, allow_none=True)
        _pos_float("sample_interval_s", self.sample_interval_s)
        if self.memory_limit_bytes is not None:
            _pos_int("memory_limit_bytes", self.memory_limit_bytes)

    @property
    def key(self) -> str:
        """Identifier of the cell in a sweep: everything that changes what is measured."""
        return (
            f"{_slug(self.model)}-l{self.steps}-s{self.snaps}-{self.strategy}"
            f"-h{self.hidden}-b{self.batch}-i{self.input}-o{self.output}-t{self.threads}"
            f"-seed{self.seed}"
        )

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
    return "".join(keep).strip("_")[:40] or "model"


@dataclass(frozen=True)
class Iteration:
    """One timed, memory-measured iteration of loss + gradient inside the worker."""

    wall_time_s: float
    cpu_time_s: float
    peak_rss_bytes: int  # exact peak of this iteration (VmHWM after reset, or fallback)
    start_rss_bytes: int  # RSS just before the iteration, after malloc_trim


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
    counters: dict[str, int] = field(default_factory=dict)  # executor counters
    loss: float | None = None
    grad_max_rel_err: float | None = None  # vs normal mode, checkpointed only
    error: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    wall_time_s: float | None = None  # whole worker process

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class RunResult:
    """One case measured in all modes, with the environment and a summary of ratios."""

    case: Case
    modes: tuple[ModeResult, ...]
    environment: dict[str, Any]
    summary: dict[str, Any]
    created: str
    host: str = ""
    schema_version: int = SCHEMA_VERSION
    tool_version: str = ""

    def mode(self, mode: Mode) -> ModeResult | None:
        for m in self.modes:
            if m.mode is mode:
                return m
        return None

    @property
    def ok(self) -> bool:
        return all(m.ok for m in self.modes)


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
    """The JSON document of a result (schema_version first)."""
    data = _jsonable(asdict(result))
    ordered = {"schema_version": data.pop("schema_version")}
    ordered.update(data)
    return ordered


def mode_from_dict(data: dict[str, Any]) -> ModeResult:
    d = dict(data)
    d["mode"] = Mode(d["mode"])
    d["status"] = Status(d["status"])
    d["iterations"] = tuple(Iteration(**it) for it in d.get("iterations", ()))
    d["warmup"] = tuple(Iteration(**it) for it in d.get("warmup", ()))
    d["timeline"] = tuple((float(t), int(r)) for t, r in d.get("timeline", ()))
    return ModeResult(**d)


def result_from_dict(data: dict[str, Any], source: str = "result") -> RunResult:
    """Parse a result document; one-line ``ValueError`` on another schema or a bad shape."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: not a ckptbench result (expected a JSON object)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema_version {version!r} is not supported (this ckptbench reads "
            f"{SCHEMA_VERSION})"
        )
    try:
        return RunResult(
            case=Case.from_dict(data["case"]),
            modes=tuple(mode_from_dict(m) for m in data["modes"]),
            environment=data.get("environment", {}),
            summary=data.get("summary", {}),
            created=data.get("created", ""),
            host=data.get("host", ""),
            schema_version=version,
            tool_version=data.get("tool_version", ""),
        )
    except (KeyError, TypeError, ValueError) as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{source}: malformed result ({type(err).__name__}: {msg})") from None


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode open() would have
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_result(result: RunResult, path: str | os.PathLike[str]) -> None:
    write_atomic(path, json.dumps(result_to_dict(result), indent=1) + "\n")
