"""Where the memory of one gradient goes, line by line, with memory_profiler's line profiler.

``ckptbench profile --model lstm --steps 50 --snaps 5 --mode normal`` runs one gradient
(after one unprofiled warm-up) under ``memory_profiler.LineProfiler`` (memory_profiler
0.61: a ``sys.settrace`` hook that measures memory at every line event of the registered
code objects and keeps, per line, the summed increment and the number of occurrences).
Registered: the workload's ``step``, ``post`` and ``loss``; the worker's gradient builder
and the plain loop it runs in normal and baseline mode (``backends.unrolled_outputs``);
the engine's first and reverse sweeps (``ckptbench.engine``) and every method of autograd's
binding (``CheckpointedLoop``, ``AutogradStepOps``, the taped step) with the closures inside
them.

What is measured: the memory currently traced by ``tracemalloc`` (Python objects and numpy
buffers, which numpy reports to tracemalloc). memory_profiler's own ``tracemalloc`` backend
is not used as is: it counts only allocations whose innermost Python frame lies in the
profiled line's file, and autograd allocates every array of a taped step inside its own
``tracer.py``, so each line of the LSTM step read 0.0 MiB. The profiler's code map is
therefore replaced by :class:`TracedCodeMap`, which attributes the change in total traced
memory since the previous line event to the line that just finished. Each byte is thus
counted once, at the innermost profiled line that was running when it was allocated or
freed; what a caller allocates for a call's arguments lands on the callee's ``def`` line;
what unprofiled code does after the last profiled line (autograd's reverse pass in normal
mode) is in ``end_traced_mib`` and the peak, not in any row.

This module runs in a fresh worker (``ckptbench.measure.worker``'s ``profile`` task, whose
protocol carries the job and the report), so the profiled process holds nothing but the job.
It never prints; the CLI renders the rows. See ``docs/architecture.md``.
"""

from __future__ import annotations

import inspect
import linecache
import tracemalloc
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import memory_profiler

from ckptbench.backends import counting, registry, unrolled_outputs
from ckptbench.backends.autograd import binding as checkpoint
from ckptbench.backends.autograd import chain
from ckptbench.backends.modes import FrameworkBackend
from ckptbench.engine import interpreter as engine
from ckptbench.results.schema import Case, Mode
from ckptbench.workloads import Sizes, load_workload
from ckptbench.workloads.chain import is_chain

__all__ = [
    "LineProfile",
    "LineRow",
    "TracedCodeMap",
    "profile_gradient",
    "profile_job",
]

MIB = 2**20


class TracedCodeMap(memory_profiler.CodeMap):
    """memory_profiler's code map, measuring tracemalloc's total traced memory per line and
    charging each line the change since the previous line event (module doc)."""

    def __init__(self) -> None:
        super().__init__(include_children=False, backend="tracemalloc")
        self.last_bytes = tracemalloc.get_traced_memory()[0]

    def trace(self, code, lineno, prev_lineno):
        now = tracemalloc.get_traced_memory()[0]
        inc, mem, occ = self[code].get(lineno, (0.0, 0.0, 0))
        self[code][lineno] = (inc + (now - self.last_bytes) / MIB, max(mem, now / MIB), occ + 1)
        self.last_bytes = now


@dataclass(frozen=True)
class LineRow:
    """One profiled source line: summed increment over its occurrences, highest traced
    memory seen when it finished, and how often it ran."""

    file: str
    function: str
    line: int
    source: str
    increment_mib: float
    mem_usage_mib: float
    occurrences: int


@dataclass(frozen=True)
class LineProfile:
    """The rows of one profiled gradient, with tracemalloc's totals for the whole call."""

    model: str
    steps: int
    snaps: int
    mode: str
    rows: tuple[LineRow, ...]
    peak_traced_mib: float  # highest traced memory during the gradient, over its start
    end_traced_mib: float  # traced memory still held when it returned (gradient, value)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def function_increment_mib(self, function: str) -> float:
        """Summed increments of the rows of one function (e.g. ``"step"``)."""
        return sum(r.increment_mib for r in self.rows if r.function == function)


def _display_path(filename: str) -> str:
    """``ckptbench/...`` for our own files wherever the package is installed, a plug-in's
    relative to the working folder where it lies below it, anything else as given."""
    package_parent = Path(engine.__file__).resolve().parents[2]  # .../ckptbench/engine/x.py
    path = Path(filename).resolve()
    for root in (package_parent, Path.cwd().resolve()):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return filename


def _functions(wl: Any) -> list[Any]:
    """The code a gradient of ``wl`` runs: the workload's step, post and loss (a layer
    chain's ``layer``, ``loss`` and every method its classes define, where the layers' own
    lines are), the plain gradient, and our executor's interpreter and step operations."""
    found = [getattr(wl, name, None) for name in ("step", "post", "loss")]
    if is_chain(wl):
        found += [
            fn
            for cls in type(wl).__mro__
            if cls is not object
            for fn in vars(cls).values()
            if inspect.isfunction(fn)
        ]
    found += [FrameworkBackend.build_gradient, unrolled_outputs, counting]
    found += [engine.first_sweep, engine.reverse_sweep, engine.reverse_turns, checkpoint.tape_step]
    found += [chain.tape_layer]
    found += [
        fn
        for module, classes in (
            (checkpoint, (checkpoint.CheckpointedLoop, checkpoint.AutogradStepOps)),
            (chain, (chain.AutogradChainOps, chain.AutogradChainLoop)),
        )
        for cls in classes
        for fn in vars(cls).values()
        if inspect.isfunction(fn) and fn.__module__ == module.__name__
    ]
    return list(dict.fromkeys(fn for fn in found if getattr(fn, "__code__", None) is not None))


def _function_names(code_map: TracedCodeMap) -> dict[tuple[str, int], str]:
    """(file, line) -> name of the innermost registered code object holding that line."""
    names: dict[tuple[str, int], str] = {}
    for code in sorted(code_map, key=lambda c: c.co_firstlineno):
        for _, _, line in code.co_lines():
            if line is not None:
                names[(code.co_filename, line)] = code.co_name
    return names


def _rows(code_map: TracedCodeMap) -> tuple[LineRow, ...]:
    names = _function_names(code_map)
    rows = []
    for filename, lines in code_map.items():
        for lineno, measure in lines:
            if measure is None:
                continue
            inc, mem, occ = measure
            rows.append(
                LineRow(
                    file=_display_path(filename),
                    function=names.get((filename, lineno), ""),
                    line=lineno,
                    source=linecache.getline(filename, lineno).rstrip(),
                    increment_mib=float(inc),
                    mem_usage_mib=float(mem),
                    occurrences=int(occ),
                )
            )
    return tuple(rows)


def profile_gradient(
    model: str = "lstm",
    steps: int = 50,
    snaps: int = 5,
    mode: str = "checkpointed",
    *,
    strategy: str = "revolve",
    hidden: int = 256,
    batch: int = 16,
    input: int = 32,
    output: int = 1,
    seed: int = 0,
) -> LineProfile:
    """Profile one gradient of ``model`` in ``mode`` line by line (module doc).

    Raises ``CaseError`` (a ValueError) for a bad case or mode."""
    case = Case(
        model=model,
        steps=steps,
        snaps=snaps,
        strategy=strategy,
        hidden=hidden,
        batch=batch,
        input=input,
        output=output,
        seed=seed,
    )
    try:
        which = Mode(mode)
    except ValueError:
        names = ", ".join(m.value for m in Mode)
        raise ValueError(f"unknown mode {mode!r} (choose from {names})") from None
    built = registry.build(case, which)  # the default backend: tracemalloc sees numpy
    params, gradient = built.params, built.gradient
    wl = load_workload(case.model, Sizes(**case.sizes()))
    gradient(params)  # warm-up: first-call caches are not what a step holds
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        profiler = memory_profiler.LineProfiler(backend="tracemalloc")
        code_map = TracedCodeMap()
        profiler.code_map = code_map
        # the workload's bound methods are built per instance; profile the ones the
        # gradient calls by their code objects, which every instance shares
        for fn in _functions(wl):
            profiler.add_function(fn)
        tracemalloc.reset_peak()
        start = tracemalloc.get_traced_memory()[0]
        code_map.last_bytes = start
        with profiler:
            value = gradient(params)
        end, peak = tracemalloc.get_traced_memory()
        del value
    finally:
        if started:
            tracemalloc.stop()
    return LineProfile(
        model=case.model,
        steps=case.steps,
        snaps=case.snaps,
        mode=which.value,
        rows=_rows(code_map),
        peak_traced_mib=(peak - start) / MIB,
        end_traced_mib=(end - start) / MIB,
    )


def profile_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one profile job (the keyword arguments of :func:`profile_gradient`)."""
    if not isinstance(job, dict):
        raise ValueError("a profile job must be a JSON object")
    allowed = set(inspect.signature(profile_gradient).parameters)
    unknown = sorted(set(job) - allowed)
    if unknown:
        raise ValueError(f"unknown profile job key(s): {', '.join(unknown)}")
    return {"ok": True, **profile_gradient(**job).to_dict()}
