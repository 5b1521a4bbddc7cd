"""What every backend's checkpointed layer chain holds (:class:`ChainLoop`).

A chain (:mod:`ckptbench.workloads.chain`) runs ``x_{i+1} = layer(i, params[i], x_i)`` for
``i = 0 .. L-1``; its checkpointed loop ``loop(params, x0) -> x_L`` is one differentiable
operation whose forward is the engine's first sweep (the output x_L is what the taped last
step, FIRSTURN, computes) and whose reverse starts from the cotangent of x_L and adds each
layer's parameter cotangent into that layer's accumulator. The schedule is any of
:mod:`ckptbench.schedules` for ``L`` steps, with the stored bytes of every snapshot its own
state's (or the plan's ``state_bytes[i]``).
"""

from __future__ import annotations

from typing import Any

from ckptbench.engine.interpreter import ScheduledLoop

__all__ = ["ChainLoop"]


class ChainLoop(ScheduledLoop):
    """A layer chain's checkpointed loop: ``layer`` and what every
    :class:`~ckptbench.engine.interpreter.ScheduledLoop` holds (``steps`` = layers). The
    bindings subclass it and add ``__call__(params, x0) -> x_L``."""

    def __init__(
        self, layer: Any, layers: int, snaps: int | None = None, strategy: Any = None,
        *, plan: Any = None, tape_bytes: int = 0,
    ) -> None:  # fmt: skip
        if not callable(layer):
            raise ValueError("layer must be a callable layer(i, params_i, x)")
        self.layer = layer
        super().__init__(layers, snaps, strategy, plan=plan, tape_bytes=tape_bytes)

    def check_params(self, params: Any) -> Any:
        """``params`` if it holds one entry per layer (a list, or a framework's box of
        one), else a one-line ``ValueError``."""
        try:
            n = len(params)
        except TypeError:
            n = type(params).__name__
        if n != self.steps or isinstance(params, dict | str):
            raise ValueError(f"params must hold one entry per layer ({self.steps}), got {n}")
        return params

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(layers={self.steps}, snaps={self.snaps}, "
            f"strategy={self.strategy.name!r})"
        )
