"""The contract between the worker and a backend (autograd, torch, JAX, ...).

A backend turns a (case, mode) into :class:`Built`: the parameters, a function computing
the loss and its gradient, a step-call counter and the executor's counters. The worker
measures it; it knows nothing else about the backend (see docs/architecture.md). What a
backend may read of a case is :class:`CaseView` (``ckptbench.results.schema.Case`` is one;
the contract does not import it, so the schema may validate against the registries).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ckptbench.schedules import optimal_forward_steps

__all__ = [
    "Built",
    "CaseView",
    "CheckpointStats",
    "ExecutorCounters",
    "attach_recorder",
    "counting",
    "loop_counters",
    "loop_phases",
    "unrolled_outputs",
]


class CaseView(Protocol):
    """What a backend reads of a case (``ckptbench.results.schema.Case`` provides it)."""

    model: str
    steps: int
    snaps: int
    strategy: str
    backend: str
    device: str  # never empty: "cpu" unless the case names a device
    budget_bytes: int | None
    hidden: int
    batch: int
    input: int
    output: int
    seed: int
    threads: int


@dataclass(frozen=True)
class Built:
    """What a backend gives the worker for one (case, mode)."""

    params: Any
    gradient: Callable[[Any], tuple[float, Any]]  # params -> (loss, gradient tree)
    calls: list[int | None]  # step-call counter, reset before every iteration; None: unmeasured
    counters: Callable[[], dict[str, Any]]  # executor counters after the last iteration
    flatten: Callable[[Any], Any]  # gradient tree -> 1-D float64 numpy array
    phases: Callable[[], dict[str, float]] = dict  # executor phase times of the last call
    plan: Callable[[], dict[str, Any]] = dict  # the plan an ``optimal`` executor ran, if any
    device_meter: Any = None  # CUDA: ``measure()`` context giving the device's peak bytes
    # ``run --trace``: set (or, with None, remove) a per-action recorder on the mode's engine
    # loop; False where the mode runs none (baseline, normal, a peer, a compiled executor)
    trace: Callable[[Any], bool] = lambda recorder: False
    step_label: Callable[[int], str] | None = None  # a step's name in a trace ("step i")


@dataclass(frozen=True)
class CheckpointStats:
    """Counters and phase times of one executor call (forward sweep plus, when differentiated,
    its reverse sweep), the same for every backend's executor."""

    steps: int
    snaps: int
    strategy: str
    steps_advanced: int  # untaped evaluations of f, first sweep included
    steps_taped: int  # evaluations of f with the backend's tape
    post_calls: int  # untaped evaluations of post (one per step, in the first sweep)
    peak_live_snapshots: int  # most snapshot slots holding a live state at once
    peak_snapshot_bytes: int  # most bytes held in live snapshots at once
    state_bytes: int  # bytes of one state (x_0's: a chain's states differ)
    tapes_kept: int = 0  # TAPE actions: tapes kept beyond their own step
    tapes_kept_peak: int = 0  # most tapes kept at once (the one being reversed excluded)
    tape_bytes: int = 0  # declared bytes of one tape (the plan's costs; 0 when unknown)
    peak_stored_bytes: int = 0  # most bytes of live snapshots + kept tapes + the live tape
    advance_time_s: float = 0.0  # in ADVANCE actions (untaped steps, first-sweep readouts)
    taped_time_s: float = 0.0  # in taped steps (TAPE, turns) and their reverses
    bookkeeping_time_s: float = 0.0  # snapshots, restores, producing the schedule's actions
    executor_time_s: float = 0.0  # all time inside the primitive's forward and vjp

    @property
    def other_time_s(self) -> float:
        """Executor time in no action (argument checks, zero cotangents, assembling grads)."""
        return self.executor_time_s - (
            self.advance_time_s + self.taped_time_s + self.bookkeeping_time_s
        )

    @property
    def step_evaluations(self) -> int:
        """All evaluations of f: advanced + taped."""
        return self.steps_advanced + self.steps_taped

    @property
    def forward_steps_optimal(self) -> int:
        """t(l, s) for this call's steps and snaps: the binomial lower bound on advances."""
        return optimal_forward_steps(self.steps, min(self.snaps, self.steps))


class ExecutorCounters:
    """The mutable counters an executor keeps during one call (advances, taped steps, live
    snapshots and tapes, phase times); :meth:`stats` freezes them as :class:`CheckpointStats`.
    """

    def __init__(self) -> None:
        self.advanced = 0
        self.taped = 0
        self.post_calls = 0
        self.peak_live = 0
        self.state_bytes = 0
        self.tapes_kept = 0
        self.peak_tapes = 0
        self.advance_s = 0.0
        self.taped_s = 0.0
        self.book_s = 0.0
        self.executor_s = 0.0

    def frozen(
        self, steps: int, snaps: int, strategy: str, *, tape_bytes: int, peak_stored_bytes: int,
        peak_snapshot_bytes: int | None = None,
    ) -> CheckpointStats:  # fmt: skip
        """The counters as :class:`CheckpointStats`; ``peak_snapshot_bytes`` defaults to the
        peak of live snapshots times one state's bytes (states of one size)."""
        if peak_snapshot_bytes is None:
            peak_snapshot_bytes = self.peak_live * self.state_bytes
        return CheckpointStats(
            steps=steps,
            snaps=snaps,
            strategy=strategy,
            steps_advanced=self.advanced,
            steps_taped=self.taped,
            post_calls=self.post_calls,
            peak_live_snapshots=self.peak_live,
            peak_snapshot_bytes=peak_snapshot_bytes,
            state_bytes=self.state_bytes,
            tapes_kept=self.tapes_kept,
            tapes_kept_peak=self.peak_tapes,
            tape_bytes=tape_bytes,
            peak_stored_bytes=peak_stored_bytes,
            advance_time_s=self.advance_s,
            taped_time_s=self.taped_s,
            bookkeeping_time_s=self.book_s,
            executor_time_s=self.executor_s,
        )


def attach_recorder(loop: Any, recorder: Any) -> bool:
    """Set ``recorder`` on ``loop`` when it is an engine loop (``new_run``); else False."""
    if not hasattr(loop, "new_run"):
        return False
    loop.recorder = recorder
    return True


def loop_counters(loop: Any) -> dict[str, int]:
    """The integer counters of an executor's last call ({} without stats: the peer)."""
    stats = getattr(loop, "stats", None)
    if stats is None:
        return {}
    return {
        k: v
        for k, v in asdict(stats).items()
        if isinstance(v, int) and not isinstance(v, bool) and k not in ("steps", "snaps")
    }


def loop_phases(loop: Any) -> dict[str, float]:
    """The executor's phase times of its last call (``*_time_s``; {} without stats)."""
    stats = getattr(loop, "stats", None)
    if stats is None:
        return {}
    return {k: float(v) for k, v in asdict(stats).items() if k.endswith("_time_s")}


def counting(step: Callable[..., Any]) -> tuple[Callable[..., Any], list[int]]:
    """``step`` wrapped to count its calls, and the counter (``calls[0]``; the worker resets
    it before every iteration)."""
    calls = [0]

    def counted(params: Any, state: Any, x: Any) -> Any:
        calls[0] += 1
        return step(params, state, x)

    return counted, calls


def unrolled_outputs(
    step: Callable[..., Any],
    post: Callable[..., Any],
    params: Any,
    state0: Any,
    inputs: Any,
    steps: int,
) -> list[Any]:
    """The plain loop every backend's baseline and normal mode runs: one ``post`` output per
    step, from ``state0`` over ``inputs[0 .. steps-1]`` (stacking them is the backend's)."""
    state, outs = state0, []
    for i in range(steps):
        state = step(params, state, inputs[i])
        outs.append(post(params, state))
    return outs
