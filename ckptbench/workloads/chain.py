"""Layer chains: stacks of layers that differ, each with its own parameters and shapes.

A recurrence (:class:`ckptbench.workloads.base.Workload`) applies one step with one set of
weights to a state of one shape, ``steps`` times. A *chain* is a stack of ``L`` layers::

    x_{i+1} = layer(i, params[i], x_i)        i = 0 .. L-1
    L       = loss(x_L)

where layer ``i`` has its own parameters ``params[i]`` and the state ``x_i`` may change its
shape from layer to layer (an MLP of varying widths, a CNN whose feature maps shrink while
its channels grow, a transformer with an embedding and a head around its blocks). The
measured gradient is ``d loss(x_L) / d(params[0], ..., params[L-1], x_0)``: every layer's
parameters and the input. There are no per-step inputs and no per-step readouts; for a
chain ``--steps`` is the number of layers ``L``.

Every schedule of :mod:`ckptbench.schedules` runs on a chain unchanged: step ``i`` of the
schedule is layer ``i`` and the state ``x_i`` is what a snapshot holds (its bytes are that
layer's input's bytes, so snapshots of one schedule differ in size; see
:func:`ckptbench.schedules.replay_bytes` with per-step bytes).

This module declares the protocol only: nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ckptbench.workloads.base import WorkloadError, defined_at

__all__ = [
    "CHAIN_METHODS",
    "Chain",
    "LayerSpec",
    "check_chain_init",
    "is_chain",
    "layer_names",
]

#: The methods every chain must provide (``layer_names`` is optional).
CHAIN_METHODS: tuple[str, ...] = ("init", "layer", "loss")


@dataclass(frozen=True)
class LayerSpec:
    """What a built-in chain declares of one layer: its name (``"conv3"``, ``"block2.attn"``;
    the key of later per-layer tables), its kind (``"dense"``, ``"conv"``, ``"attn"``,
    ``"mlp"``, ``"embed"``, ``"head"``) and the shapes of its input and output state."""

    name: str
    kind: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]


@runtime_checkable
class Chain(Protocol):
    """A stack of layers, run as ``x = layer(i, params[i], x)`` for ``i = 0 .. L-1``.

    * ``params`` — a list of ``L`` parameter trees, one per layer (a dict of arrays, or
      ``{}`` for a layer without parameters);
    * a state ``x_i`` — one array, whose shape may differ from layer to layer;
    * the gradient measured is that of ``loss(x_L)`` with respect to every layer's
      parameters and ``x_0``.
    """

    def init(self, layers: int, rng: Any) -> tuple[list[Any], Any]:
        """Return ``(params, x0)`` drawn from ``rng``: one parameter tree per layer."""
        ...

    def layer(self, i: int, params: Any, x: Any) -> Any:
        """Layer ``i`` applied with its own parameters ``params`` (= ``params[i]``) to ``x``."""
        ...

    def loss(self, x: Any) -> Any:
        """A scalar loss of the last layer's output ``x_L``."""
        ...


def is_chain(workload: Any) -> bool:
    """Whether ``workload`` is a layer chain (``init``, ``layer``, ``loss``; no ``step``)."""
    return all(callable(getattr(workload, m, None)) for m in CHAIN_METHODS) and not callable(
        getattr(workload, "step", None)
    )


def layer_names(chain: Any, layers: int) -> tuple[str, ...]:
    """The names of a chain's ``layers`` layers: its ``layer_names(layers)`` when it has one,
    else ``layer0``, ``layer1``, ... A one-line :class:`WorkloadError` when a chain gives the
    wrong number, or a name that is empty or not printable text on one line (a newline
    would forge a row of a per-layer table, an escape sequence reach the terminal: the rule
    ``Case`` applies to a model), or a name twice (the per-layer tables are keyed by name:
    the later layer's row would replace the earlier's)."""
    own = getattr(chain, "layer_names", None)
    if not callable(own):
        return tuple(f"layer{i}" for i in range(layers))
    names = tuple(str(n) for n in own(layers))
    if len(names) != layers:
        raise WorkloadError(f"layer_names({layers}) gave {len(names)} names, not {layers}")
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not name or not name.isprintable():
            rule = "must not be empty" if not name else (
                "must be printable text on one line (no newline, tab or escape)"
            )  # fmt: skip
            raise WorkloadError(f"layer_names({layers}) gave {name[:40]!r} for layer {i}: a "
                                f"layer name {rule}")  # fmt: skip
        if name in first:
            raise WorkloadError(
                f"layer_names({layers}) gave {name[:40]!r} for layers {first[name]} and {i}: "
                "layer names must differ (the per-layer tables are keyed by them)"
            )
        first[name] = i
    return names


def check_chain_init(drawn: Any, layers: int, init: Any = None) -> tuple[list[Any], Any]:
    """``init``'s result as ``(params, x0)`` with one parameter tree per layer, or a one-line
    :class:`WorkloadError` saying what was expected, what came and where ``init`` is."""
    place = defined_at(init) if init is not None else None
    at = f" ({place})" if place else ""
    if not isinstance(drawn, tuple | list) or len(drawn) != 2:
        got = f"{len(drawn)} values" if isinstance(drawn, tuple | list) else type(drawn).__name__
        raise WorkloadError(f"a chain's init must return 2 values (params, x0), got {got}{at}")
    params, x0 = drawn
    if not isinstance(params, Sequence) or isinstance(params, str | bytes):
        raise WorkloadError(
            f"a chain's params must be a list with one entry per layer, got "
            f"{type(params).__name__}{at}"
        )
    if len(params) != layers:
        raise WorkloadError(
            f"a chain of {layers} layers needs {layers} parameter entries, got {len(params)}{at}"
        )
    return list(params), x0
