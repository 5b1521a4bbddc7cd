"""Sweep configurations: ``configs/*.toml`` parsed with tomllib into a frozen :class:`SweepConfig`.

A config names a base case, a grid of axes to vary and the expectations ``ckptbench check``
enforces::

    name = "lstm"                   # optional, defaults to the file name
    description = "..."             # optional

    [case]                          # fixed Case fields (see ckptbench.results.schema.Case)
    model = "lstm"
    steps = 1000

    [grid]                          # axes: lists; cells = Cartesian product, first axis outermost
                                    # (optional: without axes the [case] alone is one cell)
    strategy = ["revolve", "uniform"]
    snaps = [4, 8, 16]

    [expect]                        # thresholds every cell must meet (all optional)
    memory_savings_min = 2.0
    [expect.store-all]              # per-strategy overrides of [expect]
    memory_savings_min = 1.0

Sizes and durations may be written as on the command line: ``budget_bytes = ["8MiB",
"16MiB"]``, ``timeout_s = "10m"``.

``grid`` may also be an array of sub-grids (``[[grid]]`` tables); their cells are concatenated
in file order. Cells are canonical and unique: ``store-all`` ignores ``snaps`` (it stores every
state), so its cells get ``snaps = steps`` and collapse into one per remaining combination; two
cells that measure the same thing are kept once. Two cells with one ``case.key`` that differ
otherwise (e.g. in ``repeats``) are an error, because result files are named by the key
(the expansion is :mod:`ckptbench.sweep.grid`).

Every problem is a :class:`ConfigError` (a ``ValueError``) with a one-line message
``FILE:LINE: KEY: what is wrong`` (the line where it can be found).
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ckptbench.backends.registry import BACKENDS, DEFAULT_BACKEND, resolve_device
from ckptbench.results.files import SHOWN_CHARS, read_text_limited, shown_value
from ckptbench.results.inputs import named_pipe, said_path, unreadable_text, without_bom
from ckptbench.results.schema import Case, CaseError
from ckptbench.results.units import check_duration, parse_duration, parse_size
from ckptbench.schedules import OPTIMAL, STRATEGIES, Setting, get_strategy
from ckptbench.sweep.grid import expand_grid
from ckptbench.sweep.keylines import KeyLines, config_words
from ckptbench.workloads.registry import name_problem

__all__ = [
    "EXPECT_KEYS",
    "ConfigError",
    "Expect",
    "SweepConfig",
    "load_config",
    "parse_config",
    "safe_name",
]

CASE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Case))
TOP_KEYS = ("name", "description", "case", "grid", "expect")
#: A sweep config larger than this is not one (read in a bounded way: ``/dev/zero`` ends).
MAX_CONFIG_BYTES = 4 * 2**20


class ConfigError(ValueError):
    """A sweep config cannot be read or is invalid (one line: file, line, key, problem)."""


# --------------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class Expect:
    """Thresholds a measured cell must meet; ``None`` means "not checked".

    * ``memory_savings_min``: normal overhead / checkpointed overhead must be at least this;
    * ``slowdown_max``: checkpointed median time / normal median time must be at most this;
    * ``grad_max_rel_err_max``: checkpointed gradient vs normal, max relative error;
    * ``forward_steps_exact``: the executor's counted advances and taped steps must equal the
      planned schedule's (for revolve that is the binomial optimum t(l, s), and l taped steps).
    """

    memory_savings_min: float | None = None
    slowdown_max: float | None = None
    grad_max_rel_err_max: float | None = None
    forward_steps_exact: bool = False

    def merged(self, override: Mapping[str, Any]) -> Expect:
        return Expect(**{**self.as_dict(), **override})

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def empty(self) -> bool:
        return self == Expect()


EXPECT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Expect))


@dataclass(frozen=True)
class SweepConfig:
    """A parsed, validated sweep: its cells in a stable order and what they must meet."""

    name: str
    cases: tuple[Case, ...]
    base: Mapping[str, Any]  # the [case] table as written
    axes: tuple[str, ...]  # grid axes in first-seen order
    expect: Expect = Expect()
    expect_by_strategy: Mapping[str, Expect] = field(default_factory=dict)
    description: str = ""
    source: str = "<string>"
    notes: tuple[str, ...] = ()  # e.g. cells collapsed because store-all ignores snaps

    def expect_for(self, case: Case) -> Expect:
        """The thresholds for one cell: [expect] with its strategy's overrides applied."""
        return self.expect_by_strategy.get(case.strategy, self.expect)


class _Reader:
    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.where = KeyLines(text)

    def error(
        self, message: str, table: str = "", key: str | None = None, index: int = 0
    ) -> ConfigError:
        line = self.where.find(table, key, index) if (table or key) else None
        if line is None and key:  # a sub-table header such as [expect.uniform]
            line = self.where.find(f"{table}.{key}" if table else key, None)
        if line is None and table:
            line = self.where.find(table, None, index)
        loc = f"{self.source}:{line}" if line else self.source
        name = ".".join(key_text(p) for p in (table, key) if p)
        prefix = f"{loc}: {name}: " if name else f"{loc}: "
        return ConfigError(prefix + message)


# --------------------------------------------------------------------------- parsing


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep config file; :class:`ConfigError` on any problem."""
    p = Path(path)
    if named_pipe(p):  # as every other reader says it (``files.read_regular_file``)
        raise ConfigError(f"{said_path(path)}: is a FIFO (named pipe), not a file ckptbench reads")
    try:
        text = read_text_limited(p, MAX_CONFIG_BYTES)
    except OSError as err:
        raise ConfigError(f"{said_path(path)}: {unreadable_text(err, p)}") from None
    except ValueError as err:
        raise ConfigError(f"{p}: {err}") from None
    return parse_config(text, source=str(p), default_name=p.stem)


_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


def safe_name(text: str) -> str:
    """``text`` as a safe folder name: other characters become '_' (a file stem default)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).lstrip(".")[:100]
    return name or "sweep"


def parse_config(text: str, source: str = "<string>", default_name: str = "sweep") -> SweepConfig:
    """Parse and validate the TOML text of a sweep config."""
    text = without_bom(text)  # a byte-order mark (Windows editors): tomllib refuses it
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        msg = str(err).splitlines()[0] if str(err) else "invalid TOML"
        raise ConfigError(f"{source}: invalid TOML: {msg}") from None
    except ValueError:  # an integer past Python's 4300 digits (int() raises in tomllib)
        raise ConfigError(
            f"{source}: a number of more than 4300 digits, too long to read (no value in a "
            "config is near that long)"
        ) from None
    except RecursionError:  # '[[[[...' thousands deep: tomllib recurses per level
        raise ConfigError(
            f"{source}: TOML nested too deep to read (a config nests a few levels)"
        ) from None
    r = _Reader(source, text)

    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise r.error(_unknown("key", unknown[0], TOP_KEYS), key=unknown[0])

    name = doc.get("name", safe_name(default_name))
    if not isinstance(name, str) or not name.strip():
        raise r.error(f"must be a non-empty string, got {name!r}", key="name")
    if not _SAFE_NAME.fullmatch(name.strip()):
        raise r.error(
            f"{shown_value(name)} is not a safe folder name (letters, digits, '.', '_', '-'; "
            "not starting with '.'): results go to results/<name>",
            key="name",
        )
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise r.error(f"must be a string, got {description!r}", key="description")

    if "case" not in doc and "grid" not in doc:  # an empty file, a FIFO read as nothing
        raise r.error("nothing to measure: give a [case] table (alone: one cell) or a [grid]")
    base = _parse_base(r, doc.get("case", {}))
    subgrids = _parse_grid(r, doc.get("grid"), base)
    expect, by_strategy = _parse_expect(r, doc.get("expect", {}))

    cases, notes, axes = expand_grid(r.error, base, subgrids)
    return SweepConfig(
        name=name.strip(),
        cases=cases,
        base=dict(base),
        axes=axes,
        expect=expect,
        expect_by_strategy=by_strategy,
        description=description,
        source=source,
        notes=notes,
    )


#: Fields a value needs beside it to be checked on its own (the cell itself is checked whole).
_COMPANIONS: dict[tuple[str, Any], dict[str, Any]] = {
    ("budget_bytes", "*"): {"strategy": OPTIMAL.name},
    ("budget_bytes", None): {},
    ("dtype", "*"): {"backend": "torch"},  # autograd computes in float64 only
}


def key_text(key: str) -> str:
    """A key as an error names it: as written, or quoted and cut where it is long or not one
    printable line (a quoted TOML key may hold anything: :func:`shown_value`)."""
    return key if len(key) <= SHOWN_CHARS and key.isprintable() else shown_value(key)


def _unknown(what: str, key: Any, known: Sequence[str]) -> str:
    """'unknown case key; did you mean model? (known: ...)': the nearest known name, if any."""
    near = difflib.get_close_matches(str(key), known, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    return f"unknown {what}{hint} (known: {', '.join(known)})"


def _companions(key: str, value: Any) -> dict[str, Any]:
    """What ``key = value`` needs beside it: a strategy's budget and backend come from the
    strategy registry, a device's or executor's backend from the backend registry, the rest
    from :data:`_COMPANIONS`."""
    if key == "strategy" and value in STRATEGIES:
        spec = get_strategy(value)
        extra: dict[str, Any] = {"budget_bytes": 1} if spec.setting is Setting.BUDGET else {}
        if spec.backend is not None:  # a peer runs on its own backend only
            extra["backend"] = spec.backend
        return extra
    if key == "device" and isinstance(value, str):
        runs = [b.name for b in BACKENDS.values() if value in b.devices]
        return {"backend": runs[0]} if runs and DEFAULT_BACKEND not in runs else {}
    if key == "executor" and isinstance(value, str):  # a backend that runs it, if one does
        runs = [b.name for b in BACKENDS.values() if value in b.executors]
        return {"backend": runs[0]} if runs else {}
    hashable = value if isinstance(value, (str, int, float, type(None))) else None
    return _COMPANIONS.get((key, hashable), _COMPANIONS.get((key, "*"), {}))


#: Case fields a config may also write as the command line does: sizes ("8MiB") and
#: durations ("10m"), read by the same parsers as the options.
_TYPED: dict[str, Callable[[str], Any]] = {
    "budget_bytes": parse_size,
    "memory_limit_bytes": parse_size,
    "timeout_s": parse_duration,
    "sample_interval_s": parse_duration,
}


def _read_value(r: _Reader, table: str, key: str, value: Any, index: int = 0) -> Any:
    """``value`` as the case takes it: a size or duration typed as text parsed, a device's
    other name resolved, then checked (:func:`_check_case_value`)."""
    if key == "device" and isinstance(value, str):  # as --device takes it: gpu is cuda
        value = resolve_device(value)
    try:
        if isinstance(value, str) and key in _TYPED:
            value = _TYPED[key](value)
        elif _TYPED.get(key) is parse_duration and _is_number(value):  # the same bound
            check_duration(value)
    except ValueError as err:
        raise r.error(str(err), table, key, index) from None
    _check_case_value(r, table, key, value, index)
    return value


def _is_number(value: Any) -> bool:
    """A number a duration bound applies to: not inf or nan (Case says 'finite' of them)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_case_value(r: _Reader, table: str, key: str, value: Any, index: int = 0) -> None:
    if key not in CASE_FIELDS:
        raise r.error(_unknown("case key", key, CASE_FIELDS), table, key, index)
    # a model that is no string is Case's to refuse ("must be a non-empty string"): the
    # name check below took 1.5 or true to str.strip, an AttributeError traceback
    if key == "model" and isinstance(value, str) and (why := name_problem(value)) is not None:
        raise r.error(why, table, key, index)
    try:
        Case(**{**_companions(key, value), key: value})
    except CaseError as err:
        raise r.error(config_words(str(err)), table, key, index) from None
    except TypeError as err:  # pragma: no cover - Case(**{known: value}) only fails on values
        raise r.error(str(err), table, key, index) from None


def _parse_base(r: _Reader, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise r.error("must be a table of Case fields", key="case")
    return {key: _read_value(r, "case", key, value) for key, value in table.items()}


def _parse_grid(r: _Reader, grid: Any, base: Mapping[str, Any]) -> list[dict[str, list[Any]]]:
    """The sub-grids' axes, read and checked. No grid (no ``[grid]``, an empty one, ``grid =
    []``) is one sub-grid without axes: one cell, the ``[case]`` as written (asv's benchmark
    without ``params``). An empty table among several ``[[grid]]`` tables is refused: it adds
    the bare ``[case]`` as a cell, most likely a table whose axes were forgotten."""
    subgrids = [] if grid is None else grid if isinstance(grid, list) else [grid]
    if not any(subgrids):  # no axes anywhere: the [case] alone
        if any(not isinstance(sub, dict) for sub in subgrids):
            raise r.error("must be a table of axes (name = [values])", key="grid")
        return [{}]
    parsed = []
    for index, sub in enumerate(subgrids):
        if not isinstance(sub, dict):
            raise r.error("must be a table of axes (name = [values])", key="grid")
        if not sub:
            raise r.error(
                "a [[grid]] table among several needs at least one axis (a config without "
                "axes is one cell: the [case] alone)",
                "grid",
                None,
                index,
            )
        axes: dict[str, list[Any]] = {}
        for key, values in sub.items():
            if key not in CASE_FIELDS:
                raise r.error(_unknown("case key", key, CASE_FIELDS), "grid", key, index)
            if not isinstance(values, list):
                raise r.error(
                    f"a grid axis must be a list (put a fixed value in [case]), got {values!r}",
                    "grid",
                    key,
                    index,
                )
            if not values:
                raise r.error("empty grid: the axis has no values", "grid", key, index)
            axes[key] = [_read_value(r, "grid", key, value, index) for value in values]
        parsed.append(axes)
    return parsed


def _expect_table(r: _Reader, table: str, data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in EXPECT_KEYS:
            raise r.error(_unknown("expectation", key, EXPECT_KEYS), table, key)
        if key == "forward_steps_exact":
            if not isinstance(value, bool):
                raise r.error(f"must be true or false, got {value!r}", table, key)
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise r.error(f"must be a positive number, got {value!r}", table, key)
        elif not math.isfinite(value):
            raise r.error(f"must be a finite number (no cell can meet {value!r})", table, key)
        else:
            value = float(value)
        out[key] = value
    return out


def _parse_expect(r: _Reader, table: Any) -> tuple[Expect, dict[str, Expect]]:
    if not isinstance(table, dict):
        raise r.error("must be a table", key="expect")
    flat = {k: v for k, v in table.items() if not isinstance(v, dict)}
    nested = {k: v for k, v in table.items() if isinstance(v, dict)}
    expect = Expect(**_expect_table(r, "expect", flat))
    by_strategy: dict[str, Expect] = {}
    for strategy, override in nested.items():
        if strategy not in STRATEGIES:
            raise r.error(
                f"unknown strategy table (choose from {', '.join(STRATEGIES)})", "expect", strategy
            )
        by_strategy[strategy] = expect.merged(_expect_table(r, f"expect.{strategy}", override))
    return expect, by_strategy
