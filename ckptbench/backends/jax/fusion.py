"""Fused windows of the engine-driven JAX executor: a stretch of the action stream as one
compiled call.

On a GPU every executable call costs host time (JAX's dispatch, the launch of each of its
kernels): the engine executor with one call per advance piece and per turn spends about
60 µs a call on an H200, where an LSTM step of hidden 256 computes in 14 µs, so Revolve's
2 101 calls for 1 000 steps cost more than its recomputation (docs/gpu.md). Griewank &
Walther's Revolve ("Algorithm 799", ACM TOMS 26(1), 2000) reverses a segment ``[a, b)`` with
``s`` free slots the same way wherever the segment lies: the actions that reverse it, read
relative to ``a``, repeat all over the stream. So the executor runs such stretches as one
call each:

* :func:`fusion_windows` reads the (pure, data-independent) action stream once per loop and
  marks the *windows*: first every whole segment ``[a, b)`` of at most ``span`` steps that
  the reverse sweep reverses from a state in hand without reading a snapshot below ``a``
  (Revolve's repeating sub-schedules), then the stretches of the rest of the reverse
  sweep that tape or reverse a step, cut after ``span`` reversals (a plan that keeps
  tapes reverses long runs of them). No window starts or is cut inside a run of kept
  tapes (tape ``a..b-2``, turn ``b-1``, reverse the tapes), so each lies in one window
  and is folded there (below). The first sweep (up to FIRSTURN) is one window too.
* Inside a window the step operations do not dispatch: :class:`Window` records each one
  (kind, static sizes, step index, which earlier value or outside array it reads) and hands
  back :class:`Lazy` values. The engine's bookkeeping (slots, kept tapes, counters, declared
  bytes) runs exactly as it does eagerly: it never looks at data.
* At the window's end :meth:`Window.program_key` normalises the record (step indices
  relative to the lowest; outside arrays numbered by first use; the values still referenced
  by the engine are the outputs, found by weak references) and the call is one executable,
  compiled ahead of time on the first occurrence of that key and reused for every
  repetition. Revolve 1 000 steps, 31 slots, ``span`` 32: 121 calls a gradient (2 101
  unfused), 33 distinct programs.
* Inside a window each run of kept tapes that the window also reverses (tape steps
  ``a..b-2``, turn ``b-1``, reverse the tapes) is one operation, the vjp of a scan
  (:func:`tape_runs`).

Nothing is read back to the host: a window's step indices enter as one device scalar (the
lowest index) plus static offsets.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

from jax import lax

from ckptbench.schedules import ActionKind

__all__ = ["DEFAULT_SPAN", "Lazy", "Window", "fusion_windows", "tape_runs"]

#: The longest segment (in steps) one fused window reverses; 0 turns fusion off.
DEFAULT_SPAN = 32

_K = ActionKind


_UNSET = object()


class Lazy:
    """A value a recorded step operation will produce: ``value`` once its window ran (it
    may be ``None``: an input cotangent that is not asked for)."""

    __slots__ = ("__weakref__", "ref", "value")

    def __init__(self, ref: tuple) -> None:
        self.ref = ref
        self.value: Any = _UNSET

    @property
    def ready(self) -> bool:
        return self.value is not _UNSET


_REVERSALS = (_K.YOUTURN, _K.REVERSE)
_TAPED = (_K.YOUTURN, _K.REVERSE, _K.TAPE)  # actions that tape or reverse a step


def _segment_end(actions: Sequence[Any], k: int, lo: int) -> int | None:
    """The position of the reverse of step ``lo`` if actions ``k..`` reverse the steps
    down to ``lo`` without reading a snapshot of a state below ``lo``."""
    for e in range(k, len(actions)):
        act = actions[e]
        kind = act.kind
        if kind is _K.RESTORE:
            if act.step < lo:
                return None
        elif kind in _REVERSALS:
            if act.step == lo:
                return e
        elif kind is not _K.ADVANCE and kind is not _K.TAKESHOT and kind is not _K.TAPE:
            return None
    return None


def _quiet(actions: Sequence[Any]) -> list[bool]:
    """``quiet[k]``: action ``k`` does not end inside a run of kept tapes (TAPE ``a..b-2``,
    YOUTURN ``b-1``, REVERSE ``b-2..a``, one after the other: what :func:`tape_runs` folds).
    A window starts or is cut only there, so each such run lies in one window."""
    quiet = [True] * len(actions)
    k = 0
    while k < len(actions):
        act = actions[k]
        m = 0
        while k + m < len(actions) and actions[k + m].kind is _K.TAPE:
            if actions[k + m].step != act.step + m:
                break
            m += 1
        turn = k + m
        if (
            m
            and turn + m < len(actions)
            and actions[turn].kind is _K.YOUTURN
            and actions[turn].step == act.step + m
            and all(
                actions[turn + 1 + q].kind is _K.REVERSE
                and actions[turn + 1 + q].step == act.step + m - 1 - q
                for q in range(m)
            )
        ):
            quiet[k : turn + m] = [False] * (turn + m - k)
            k = turn + m + 1
        else:
            k += 1
    return quiet


def _segments(
    actions: Sequence[Any], first: int, steps: int, span: int, quiet: Sequence[bool]
) -> dict[int, int]:
    """Every whole segment of at most ``span`` steps the reverse sweep reverses from a
    state in hand (Revolve's repeating sub-schedules), chosen greedily from the start,
    none starting inside a run of kept tapes (:func:`_quiet`)."""
    windows: dict[int, int] = {}
    last_reversed, here = steps - 1, None  # b, and the step of the state in hand
    k = first + 1
    while k < len(actions):
        act = actions[k]
        if here is not None and 0 < last_reversed - here <= span and quiet[k - 1]:
            end = _segment_end(actions, k, here)
            if end is not None:
                windows[k] = end
                last_reversed, here, k = here, None, end + 1
                continue
        kind = act.kind
        if kind is _K.RESTORE:
            here = act.step
        elif kind is _K.ADVANCE:
            here = act.stop
        elif kind is _K.TAPE:
            here = act.step + 1
        elif kind in _REVERSALS:
            last_reversed, here = act.step, None
        k += 1
    return windows


def _chunks(
    actions: Sequence[Any], first: int, covered: dict[int, int], span: int, quiet: Sequence[bool]
):  # fmt: skip
    """The stretches of the reverse sweep outside ``covered``, cut at the first point
    outside a run of kept tapes once ``span`` reversals are in (a plan keeping tapes
    reverses long runs of them; a run cut in two would not be folded); stretches that tape nothing
    are left out: their advances run as they do unfused, a few long calls each (on an
    H200 the one such stretch of Revolve 1000/31, 22 advances, cost 0.025 s a gradient
    fused; docs/gpu.md)."""
    inside = {k for start, end in covered.items() for k in range(start, end + 1)}
    chunks: dict[int, int] = {}

    def close(start: int, end: int) -> None:
        if any(actions[j].kind in _TAPED for j in range(start, end + 1)):
            chunks[start] = end

    start, count = None, 0
    for k in range(first + 1, len(actions)):
        if k in inside or actions[k].kind is _K.TERMINATE:
            if start is not None:
                close(start, k - 1)
            start, count = None, 0
            continue
        start = k if start is None else start
        if actions[k].kind in _REVERSALS:
            count += 1
        if count >= span and quiet[k]:
            close(start, k)
            start, count = None, 0
    if start is not None:
        close(start, len(actions) - 1)
    return chunks


def fusion_windows(
    actions: Sequence[Any], steps: int, span: int, rest: bool = True
) -> tuple[int, dict[int, int]]:
    """``(position of FIRSTURN, {first position: last position})`` of every reverse-sweep
    window (see the module docstring); no windows when ``span`` is 0. The whole segments
    first (they repeat: one executable serves them all), then, with ``rest``, the
    stretches between them that tape or reverse, cut after ``span`` reversals outside a
    run of kept tapes.
    Neighbouring windows are not joined: on an H200, Revolve 1 000 / 31 with its segments
    joined up to 32 reversals a call (44 calls) took 0.112 s, against 0.091 s for the
    segments alone (121 calls; docs/gpu.md)."""
    first = next(k for k, act in enumerate(actions) if act.kind is _K.FIRSTURN)
    if span <= 0:
        return first, {}
    quiet = _quiet(actions)
    segments = _segments(actions, first, steps, span, quiet)
    if not rest:  # the segments alone (the rest dispatched operation by operation)
        return first, segments
    return first, {**segments, **_chunks(actions, first, segments, span, quiet)}


class Window:
    """The step operations recorded since a window opened (see the module docstring).

    ``add`` records one operation: its kind (a key of the implementations handed to
    :meth:`program`), static arguments, step index and inputs (arrays, :class:`Lazy`
    values or ``None``); it returns ``n_out`` :class:`Lazy` values. Arrays from outside
    are numbered by first use; ``donate`` marks those the window may overwrite (the
    executor's accumulators).
    """

    def __init__(self) -> None:
        self.nodes: list[tuple] = []
        self.indices: list[int] = []
        self.outside: list[Any] = []
        self._outside_ids: dict[int, int] = {}
        self.donated: set[int] = set()
        self._made: list[weakref.ref] = []

    def _ref(self, value: Any, donate: bool) -> tuple:
        if isinstance(value, Lazy):
            if not value.ready:
                return value.ref
            value = value.value
        if value is None:
            return ("none",)
        j = self._outside_ids.get(id(value))
        if j is None:
            j = self._outside_ids[id(value)] = len(self.outside)
            self.outside.append(value)
        if donate:
            self.donated.add(j)
        return ("in", j)

    def add(
        self, kind: str, static: tuple, index: int, inputs: Sequence[Any], n_out: int,
        donate: Sequence[int] = (),
    ) -> list[Lazy]:  # fmt: skip
        node = len(self.nodes)
        refs = tuple(self._ref(v, q in donate) for q, v in enumerate(inputs))
        self.nodes.append((kind, static, refs))
        self.indices.append(index)
        made = [Lazy(("node", node, k)) for k in range(n_out)]
        self._made.extend(weakref.ref(v) for v in made)
        return made

    def live(self) -> list[Lazy]:
        """The values made here that something still references: the window's outputs."""
        alive = [r() for r in self._made]
        return [v for v in alive if v is not None]

    def _relative(self) -> tuple:
        """The record, each operation's step index made relative to the lowest."""
        base = min(self.indices)
        return tuple(
            (kind, static, refs, i - base)
            for (kind, static, refs), i in zip(self.nodes, self.indices, strict=True)
        )

    def _grouped(self) -> list[tuple]:
        """The record as :func:`tape_runs` returns it, nothing folded."""
        return [(*node, k) for k, node in enumerate(self._relative())]

    def program_key(self, outputs: Sequence[Lazy]) -> tuple:
        """What identifies this window's executable within one loop (whose arrays keep
        their shapes): the record with step indices relative to the lowest, the outputs,
        the outside arrays' count and the donated ones."""
        return (
            self._relative(),
            tuple(v.ref for v in outputs),
            len(self.outside),
            tuple(sorted(self.donated)),
        )

    def program(
        self, outputs: Sequence[Lazy], impls: dict[str, Callable], runs: bool = True
    ) -> Callable:
        """``fn(base_index, *outside) -> [output values]``, the record as one traceable
        function; ``impls[kind](static, index, *inputs)`` returns a node's outputs. With
        ``runs``, every run of kept tapes reversed inside the window is one ``"segment"``
        operation (:func:`tape_runs`)."""
        wanted = [v.ref for v in outputs]
        nodes = tape_runs(self._relative(), wanted) if runs else self._grouped()

        def run(base_index: Any, *outside: Any) -> list[Any]:
            made: dict[tuple, Any] = {}

            def get(ref: tuple) -> Any:
                if ref[0] == "in":
                    return outside[ref[1]]
                if ref[0] == "none":
                    return None
                return made[ref]

            done: Any = ()
            for kind, static, refs, offset, node in nodes:
                # in the schedule's order: an operation's inputs pass a barrier with the
                # previous operation's results, so XLA does not hoist it or merge it with
                # an identical one (Revolve re-advances from one snapshot several times in
                # a window). XLA may still join the parameter cotangents' additions into
                # one fusion (seen on the CPU: 8 turns held 8 cotangents; docs/gpu.md).
                args, _ = lax.optimization_barrier(([get(r) for r in refs], done))
                outs = impls[kind](static, base_index + offset, *args)
                for k, value in enumerate(outs):
                    made["node", node, k] = value
                done = outs
            return [made[r] for r in wanted]

        return run


_UNTAPED_INPUT_TAPE = (False, False)  # a kept tape without readouts, not the loop's first


def _run_length(nodes: Sequence[tuple], j: int) -> int:
    """``m`` if nodes ``j..j+2m`` are ``tape`` x m over consecutive steps (each from the
    last one's next state), the ``turn`` of the step after them, then the ``reverse`` of
    each of those tapes, last first, each taking the cotangents of the operation before
    it; else 0."""
    kind, static, refs, base = nodes[j]
    if kind != "tape" or static != _UNTAPED_INPUT_TAPE:
        return 0
    p, _, xs = refs
    m = 1
    while j + m < len(nodes) and nodes[j + m] == (
        "tape", _UNTAPED_INPUT_TAPE, (p, ("node", j + m - 1, 1), xs), base + m
    ):  # fmt: skip
        m += 1
    u = j + m
    if u + m >= len(nodes):
        return 0
    kind, _, refs, offset = nodes[u]
    if kind != "turn" or offset != base + m or refs[:3] != (p, ("node", u - 1, 1), xs):
        return 0
    g, inv = refs[3], nodes[u + 1][2][2]
    for k in range(m - 1, -1, -1):
        r = u + m - k
        cotangents = tuple(("node", r - 1, q) for q in range(3))
        if nodes[r] != ("reverse", (), (p, ("node", j + k, 0), inv, xs, g, *cotangents), base + k):
            return 0
    return m


def tape_runs(nodes: Sequence[tuple], wanted: Sequence[tuple]) -> list[tuple]:
    """The window's record with every run of kept tapes folded into one operation.

    A plan that keeps tapes (Beaumont et al., 2019) reverses a stretch ``[a, b)`` by taping
    steps ``a..b-2`` (kept), turning step ``b-1`` and reversing the kept tapes: with every
    operation a separate piece of straight-line code, each tape is written out and read
    back across an optimisation barrier (on an H200 such a plan ran at 1.6x the time of
    ``jax.checkpoint`` at the same memory; docs/gpu.md). Folded, the stretch is the
    ``jax.vjp`` of a ``lax.scan`` over its steps: the same steps taped once, the same
    tapes held at once (XLA stacks the scan's residuals), the way ``jax.checkpoint``
    reverses a segment. Only runs whose tapes, states and inner cotangents nothing else
    uses (the window's outputs included) are folded. Returns ``(kind, static, refs,
    offset, node)``: ``node`` names the outputs (a fold's are its last reverse's);
    a fold is ``("segment", (steps,), (p, state, xs, g, state_bar, pbar, xsbar), a)``.
    """
    users: dict[int, set[int]] = {}
    for k, (_, _, refs, _) in enumerate(nodes):
        for ref in refs:
            if ref[0] == "node":
                users.setdefault(ref[1], set()).add(k)
    out_nodes = {ref[1] for ref in wanted if ref[0] == "node"}
    grouped: list[tuple] = []
    j = 0
    while j < len(nodes):
        m = _run_length(nodes, j)
        run = set(range(j, j + 2 * m + 1))
        last = j + 2 * m
        if m and all(x == last or (x not in out_nodes and users.get(x, set()) <= run) for x in run):
            p, s, xs = nodes[j][2]
            g, sbar, pbar, xsbar = nodes[j + m][2][3:]
            refs = (p, s, xs, g, sbar, pbar, xsbar)
            grouped.append(("segment", (m + 1,), refs, nodes[j][3], last))
            j = last + 1
        else:
            grouped.append((*nodes[j], j))
            j += 1
    return grouped
