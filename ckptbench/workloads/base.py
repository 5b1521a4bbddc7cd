"""Shared vocabulary of the workloads package: sizes, the protocol, the error type.

Nothing here measures, prints or imports autograd: a workload is only the
recipe (init, step, post, loss) that the executors run and tape.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "REQUIRED_METHODS",
    "SIZE_FIELDS",
    "Sizes",
    "Workload",
    "WorkloadError",
    "check_init_result",
    "check_positive",
    "defined_at",
    "float_dtype",
    "state_nbytes",
]

#: The methods every workload object must provide.
REQUIRED_METHODS: tuple[str, ...] = ("init", "step", "post", "loss")

#: Keyword arguments a workload factory may receive, in this order.
SIZE_FIELDS: tuple[str, ...] = ("hidden", "batch", "input", "output")

_NEWLINES = re.compile(r"\s*[\r\n]+\s*")


class WorkloadError(ValueError):
    """A workload could not be built or loaded. The message is always one line."""

    def __init__(self, message: str) -> None:
        super().__init__(_NEWLINES.sub(" ", str(message)).strip())


def defined_at(fn: Any) -> str | None:
    """``file.py:LINE`` where a plug-in's function or method is defined (relative to the
    current folder when it lies below it), or None."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None or not code.co_filename or code.co_filename.startswith("<"):
        return None
    path = os.path.abspath(code.co_filename)
    rel = os.path.relpath(path)
    return f"{path if rel.startswith('..') else rel}:{code.co_firstlineno}"


def check_init_result(drawn: Any, init: Any = None) -> tuple[Any, Any, Any]:
    """``init``'s result as ``(params, state0, inputs)``, or a one-line WorkloadError saying
    what was expected, what came and where ``init`` is defined."""
    if isinstance(drawn, tuple | list) and len(drawn) == 3:
        return drawn[0], drawn[1], drawn[2]
    if isinstance(drawn, tuple | list):
        got = f"a {type(drawn).__name__} of {len(drawn)} value{'s' * (len(drawn) != 1)}"
    else:
        got = f"a {type(drawn).__name__}"
    place = defined_at(init) if init is not None else None
    raise WorkloadError(
        f"init must return 3 values (params, state0, inputs), got {got}"
        + (f" ({place})" if place else "")
    )


def check_positive(name: str, value: object) -> int:
    """Return ``value`` as an int if it is a positive integer, else raise WorkloadError."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise WorkloadError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise WorkloadError(f"{name} must be a positive integer, got {value}")
    return int(value)


@dataclass(frozen=True)
class Sizes:
    """Problem sizes shared by every workload.

    The defaults (hidden 256, batch 16, input 32) are the project's reference
    case. ``output`` is the width of the linear readout applied by ``post``;
    ``None`` (the default) means "same as ``input``", and is resolved at
    construction, so ``Sizes().output == 32``. Every size must be a positive
    integer; anything else raises :class:`WorkloadError`.
    """

    hidden: int = 256
    batch: int = 16
    input: int = 32
    output: int | None = None

    def __post_init__(self) -> None:
        if self.output is None:
            object.__setattr__(self, "output", self.input)
        for name in SIZE_FIELDS:
            object.__setattr__(self, name, check_positive(name, getattr(self, name)))

    def as_kwargs(self) -> dict[str, int]:
        """The sizes as factory keyword arguments (``hidden``, ``batch``, ``input``, ``output``)."""
        return {name: getattr(self, name) for name in SIZE_FIELDS}


@runtime_checkable
class Workload(Protocol):
    """A recurrent workload, run as ``state = step(params, state, inputs[t])``.

    * ``params`` — any autograd container (built-ins use a dict of arrays);
    * ``state`` — an array or a tuple of arrays;
    * ``inputs`` — an array whose leading axis is the number of steps;
    * ``outputs`` — the stack of ``post`` results, shape ``(steps, ...)``.

    The gradient the harness measures is that of
    ``loss(stack([post(params, s_1), ..., post(params, s_steps)]))`` where
    ``s_{t+1} = step(params, s_t, inputs[t])`` and ``s_0 = state0``.
    """

    def init(self, steps: int, rng: np.random.Generator) -> tuple[Any, Any, Any]:
        """Return ``(params, state0, inputs)`` drawn from ``rng``."""
        ...

    def step(self, params: Any, state: Any, x: Any) -> Any:
        """Advance the state by one step with input ``x`` (= ``inputs[t]``)."""
        ...

    def post(self, params: Any, state: Any) -> Any:
        """The per-step output computed from a state."""
        ...

    def loss(self, outputs: Any) -> Any:
        """A scalar loss of all stacked outputs (leading axis = steps)."""
        ...


def state_nbytes(state: Any) -> int:
    """Bytes held by one state snapshot: an array, or a (nested) tuple/list of arrays."""
    if isinstance(state, tuple | list):
        return sum(state_nbytes(part) for part in state)
    return int(np.asarray(state).nbytes)


def float_dtype(x: Any) -> str | None:
    """The name of ``x``'s floating-point dtype, as ``--dtype`` spells it (``float32``,
    ``bfloat16``, ``float16``, ...; torch's without its ``torch.``), or None for an
    integer, boolean or complex array and anything without a dtype."""
    dtype = getattr(x, "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else ""
    return name if name.startswith("float") or name == "bfloat16" else None
