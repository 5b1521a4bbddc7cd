"""Minimum-time checkpointing schedules under a byte budget, keeping states *and* tapes.

Revolve (Griewank & Walther, ACM TOMS 26(1), 2000) is optimal when a schedule may store only
states. An executor may also keep a step's tape (all its reverse needs) until that step is
reversed, which is what segment checkpointing does with a whole segment. Beaumont,
Eyraud-Dubois, Herrmann, Joly & Shilova, "Optimal checkpointing for heterogeneous chains:
how to train deep neural networks with limited memory" (2019, the ``rotor`` tool) give a
dynamic program over chains whose steps each have a forward cost, a taped-forward-plus-
reverse cost, a state size and a tape size. This module is our version of that program for
the :mod:`ckptbench.schedules` vocabulary (ADVANCE, TAKESHOT, RESTORE, TAPE, REVERSE,
FIRSTURN/YOUTURN).

Cost model (:func:`predict` scores any action stream with it, so Revolve, equal segments and
the optimal plan are compared by one function):

* time = ``fixed_time_s`` + forward cost of every untaped advance + taped cost of every
  step (each step is taped exactly once, by TAPE or a turn);
* storage = the states in live snapshot slots (x_0 included when the schedule stores it,
  which every schedule here does) + the kept tapes + the tape of the step being reversed
  by a FIRSTURN/YOUTURN. A snapshot of x_i lives until step i is reversed (Revolve's rule,
  and the executor's); the current state is not counted. The peak of this sum is what a
  budget bounds and what :attr:`Plan.peak_bytes` reports, in exact bytes.

The dynamic program. For a chain piece [a, b) whose first state x_a is current, with m free
bytes, two values: N(a, b, m) when x_a is not stored and S(a, b, m) when x_a sits in a slot
(paid for outside m). A single step is a turn (needs its tape, t_a <= m). Otherwise::

    S(a, b, m) = min( c_a + N(a+1, b, m - t_a),                        # TAPE a, keep it
                      min_k F(a, k) + N(k, b, m) + S(a, k, m) )          # ADVANCE, RESTORE x_a
    N(a, b, m) = min( c_a + N(a+1, b, m - t_a), S(a, b, m - s_a) )       # or TAKESHOT x_a

with c = taped cost, F(a, k) = untaped forward cost of steps a..k-1, s/t = state/tape
bytes. Heterogeneous chains cost O(l^3 M) (numpy over the start index and memory);
homogeneous ones depend only on b - a: O(l^2 M), vectorised over the split point. Every
schedule the program chooses from starts its reverse with FIRSTURN after one monotone first
sweep, as the executor requires.

Memory is discretised in quanta of q bytes, M = floor(budget / q) levels: state and tape
sizes are rounded *up* to whole quanta, so every plan fits the real budget (the reported
peak is replayed in exact bytes). When the greatest common divisor of all sizes and the
budget gives at most ``levels`` levels, q is that divisor and the plan is optimal exactly.
Otherwise q = ceil(budget / levels) and the plan is optimal among schedules whose rounded
sizes fit; each stored item may then be charged up to q - 1 bytes too much, so a schedule
that fills the budget to within (items x q) bytes can be missed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ckptbench.schedules import (
    Action,
    ActionKind,
    ScheduleError,
    check_int,
    replay_bytes,
    schedule,
    uniform_schedule,
)

__all__ = [
    "MAX_PLAN_UPDATES",
    "Costs",
    "Plan",
    "PlanError",
    "Prediction",
    "check_budget",
    "check_plannable",
    "compare_at_budget",
    "costs_from_json",
    "min_budget_bytes",
    "plan_estimate",
    "plan_optimal",
    "predict",
]

DEFAULT_LEVELS = 512
#: Plans whose dynamic program needs more table updates than this are refused before anything
#: is measured (about 10 minutes on the 2-core machine of docs/architecture.md, which managed
#: about 4e7 updates/s: l = 1000 homogeneous at 512 levels, 2.6e8 updates, took 8 s there).
MAX_PLAN_UPDATES = 2 * 10**10
#: Largest byte count or time a costs file may give (beyond, a typo, not a measurement).
MAX_COST_BYTES = 2**62
MAX_COST_TIME_S = 1e9


class PlanError(ValueError):
    """No schedule fits, or the planner's input is invalid."""


# --------------------------------------------------------------------------- costs


def _tuple_or_scalar(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, (list, tuple)):
        if not value:
            raise PlanError(f"{name} must not be an empty list")
        return tuple(_scalar(name, v, kind) for v in value)
    return _scalar(name, value, kind)


def _scalar(name: str, value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PlanError(f"{name} must be a number or a list of numbers, got {_brief(value)}")
    top = MAX_COST_BYTES if kind is int else MAX_COST_TIME_S
    if isinstance(value, float) and not math.isfinite(value):
        raise PlanError(f"{name} must be finite and >= 0, got {value!r}")
    if value < 0 or value > top:
        raise PlanError(f"{name} must be finite, >= 0 and <= {top:.3g}, got {_brief(value)}")
    if kind is int:
        if value != int(value):
            raise PlanError(f"{name} must be a whole number of bytes, got {value!r}")
        return int(value)
    return float(value)


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Costs:
    """Per-step costs of a chain: one value for every step (homogeneous) or a tuple per step.

    ``forward_time_s``: one untaped step. ``taped_time_s``: one taped step plus its reverse.
    ``state_bytes[i]``: the state x_i (a snapshot). ``tape_bytes[i]``: step i's tape, kept
    until its reverse. ``fixed_time_s``: per-gradient time no schedule changes (e.g. the
    readout of every step in the first sweep, the loss); it only shifts predictions.
    """

    forward_time_s: float | tuple[float, ...]
    taped_time_s: float | tuple[float, ...]
    state_bytes: int | tuple[int, ...]
    tape_bytes: int | tuple[int, ...]
    fixed_time_s: float = 0.0

    def __post_init__(self) -> None:
        for name, kind in (
            ("forward_time_s", float),
            ("taped_time_s", float),
            ("state_bytes", int),
            ("tape_bytes", int),
        ):
            object.__setattr__(self, name, _tuple_or_scalar(name, getattr(self, name), kind))
        object.__setattr__(self, "fixed_time_s", _scalar("fixed_time_s", self.fixed_time_s, float))
        lengths = {len(v) for v in self._fields() if isinstance(v, tuple)}
        if len(lengths) > 1:
            raise PlanError(f"per-step cost lists differ in length: {sorted(lengths)}")
        sb = self.state_bytes
        if (min(sb) if isinstance(sb, tuple) else sb) < 1:
            raise PlanError("state_bytes must be >= 1")

    def _fields(self) -> tuple:
        return (self.forward_time_s, self.taped_time_s, self.state_bytes, self.tape_bytes)

    @property
    def steps(self) -> int | None:
        """The chain length the per-step lists fix, or None for homogeneous costs."""
        for v in self._fields():
            if isinstance(v, tuple):
                return len(v)
        return None

    def per_step(self, steps: int) -> tuple[list[float], list[float], list[int], list[int]]:
        """(forward, taped, state bytes, tape bytes) as lists of ``steps`` entries."""
        check_int("steps", steps)
        if self.steps is not None and self.steps != steps:
            raise PlanError(f"costs are given for {self.steps} steps, not {steps}")
        return tuple(  # type: ignore[return-value]
            list(v) if isinstance(v, tuple) else [v] * steps for v in self._fields()
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-able dict (lists for per-step values); :func:`costs_from_json` reads it back."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, doc: Any) -> Costs:
        """Costs from a dict with the field names; unknown or missing keys are a PlanError."""
        if not isinstance(doc, dict):
            raise PlanError("costs must be a JSON object")
        names = {"forward_time_s", "taped_time_s", "state_bytes", "tape_bytes", "fixed_time_s"}
        unknown = sorted(set(doc) - names)
        if unknown:
            raise PlanError(
                f"unknown cost field {unknown[0]!r} (known: {', '.join(sorted(names))})"
            )
        missing = sorted(names - {"fixed_time_s"} - set(doc))
        if missing:
            raise PlanError(f"costs lack {missing[0]!r}")
        return cls(**doc)


def costs_from_json(text: str) -> Costs:
    """Parse a costs file (the format plug-ins give the CLI).

    A JSON object with ``forward_time_s``, ``taped_time_s`` (seconds), ``state_bytes``,
    ``tape_bytes`` (bytes) and optionally ``fixed_time_s``; each a number for every step or a
    list with one entry per step (heterogeneous chain; lists must all have the chain's
    length). Example: ``{"forward_time_s": [0.001, 0.002], "taped_time_s": 0.005,
    "state_bytes": 65536, "tape_bytes": [450000, 900000]}``.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise PlanError(f"costs file is not JSON: {err.msg} at line {err.lineno}") from None
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise PlanError(f"costs file is not usable JSON: {str(err).splitlines()[0]}") from None
    return Costs.from_dict(doc)


# --------------------------------------------------------------------------- predictions


@dataclass(frozen=True)
class Prediction:
    """A schedule scored by the cost model: time, storage peak, counts."""

    time_s: float
    peak_bytes: int
    peak_state_bytes: int
    peak_tape_bytes: int
    advances: int
    tapes_kept: int  # TAPE actions (tapes kept beyond their own step)
    peak_tapes: int  # most tapes kept at once, the live one excluded
    snapshots: int  # TAKESHOT actions
    peak_snapshots: int


def predict(actions: Iterable[Action], steps: int, costs: Costs) -> Prediction:
    """Replay ``actions`` (checked like :func:`ckptbench.schedules.replay_bytes`) and score them.

    Example: Revolve with 31 slots on 1000 steps, forward 0.4 ms, taped 2.5 ms, 64 KiB
    states, 440 KiB tapes: time = 2439 * 0.4 ms + 1000 * 2.5 ms = 3.4756 s and peak =
    31 * 64 KiB + 440 KiB.
    """
    cf, cb, sb, tb = costs.per_step(steps)
    acts = list(actions)
    r = replay_bytes(acts, steps, sb, tb)
    tapes = sum(1 for a in acts if a.kind is ActionKind.TAPE)
    time_s = costs.fixed_time_s + math.fsum(
        [n * f for n, f in zip(r.step_advances, cf, strict=True)] + cb
    )
    return Prediction(
        time_s=time_s,
        peak_bytes=r.peak_bytes,
        peak_state_bytes=r.peak_state_bytes,
        peak_tape_bytes=r.peak_tape_bytes,
        advances=r.stats.advances,
        tapes_kept=tapes,
        peak_tapes=r.stats.peak_tapes,
        snapshots=r.stats.takeshots,
        peak_snapshots=r.stats.peak_snapshots,
    )


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """The minimum-time schedule for ``costs`` on ``steps`` steps within ``budget_bytes``."""

    steps: int
    budget_bytes: int
    costs: Costs = field(repr=False)
    action_list: tuple[Action, ...] = field(repr=False)
    predicted_time_s: float
    peak_bytes: int
    prediction: Prediction = field(repr=False)
    quantum_bytes: int  # memory granularity of the dynamic program
    exact: bool  # True when the quantum divides every size and the budget (no rounding)
    slots: int  # snapshot slots the schedule uses (slot indices 0..slots-1)

    def actions(self) -> Iterator[Action]:
        """A fresh iterator over the schedule (the executor calls this once per sweep)."""
        return iter(self.action_list)

    def summary(self) -> dict[str, Any]:
        """JSON-able figures: predicted time, peak and counts (no actions)."""
        p = self.prediction
        return {
            "steps": self.steps,
            "budget_bytes": self.budget_bytes,
            "predicted_time_s": self.predicted_time_s,
            "peak_bytes": self.peak_bytes,
            "advances": p.advances,
            "tapes_kept": p.tapes_kept,
            "peak_tapes": p.peak_tapes,
            "snapshots": p.snapshots,
            "peak_snapshots": p.peak_snapshots,
            "slots": self.slots,
            "quantum_bytes": self.quantum_bytes,
            "exact": self.exact,
            "costs": self.costs.as_dict(),
        }


def plan_optimal(
    costs: Costs, steps: int, budget_bytes: int, *, levels: int = DEFAULT_LEVELS
) -> Plan:
    """Minimum-time schedule (states and kept tapes) whose storage peak fits ``budget_bytes``.

    ``levels`` bounds the memory levels of the dynamic program (see the module docstring for
    the granularity and its effect). Plans are cached by their (hashable) inputs. Raises
    :class:`PlanError` when no schedule fits (the budget must hold at least x_0 and a tape).
    Homogeneous l = 1000 at 512 levels plans in about a second; heterogeneous chains cost
    O(l^3 M) and suit a few hundred steps.
    """
    if not isinstance(costs, Costs):
        raise PlanError(f"costs must be a Costs, got {type(costs).__name__}")
    check_int("steps", steps)
    check_int("budget_bytes", budget_bytes, minimum=0)
    check_int("levels", levels)
    costs.per_step(steps)  # length check
    return _plan_cached(costs, steps, budget_bytes, levels)


def plan_estimate(
    steps: int, homogeneous: bool = True, levels: int = DEFAULT_LEVELS
) -> tuple[int, int]:
    """(table updates, table bytes) of the dynamic program for ``steps`` steps, at most
    ``levels`` + 1 memory levels wide: homogeneous l^2/2 x width updates and (l + 1) x width
    x 32 bytes (two float64 values, two int32 choices, one working row block); heterogeneous
    l^3/6 x width updates and l^2/2 x width x 24 bytes."""
    width = levels + 1
    if homogeneous:
        return steps * steps // 2 * width, 32 * (steps + 1) * width
    return steps**3 // 6 * width, 12 * steps * steps * width


def check_plannable(
    steps: int, costs: Costs | None = None, *, memory_bytes: int | None = None,
    levels: int = DEFAULT_LEVELS,
) -> None:  # fmt: skip
    """:class:`PlanError` with the estimate when planning ``steps`` steps would need more than
    :data:`MAX_PLAN_UPDATES` table updates or more than half of ``memory_bytes`` (default:
    this machine's memory). Without ``costs`` the chain is taken as homogeneous (measured
    costs are)."""
    homogeneous = costs is None or costs.steps is None
    updates, table_bytes = plan_estimate(steps, homogeneous, levels)
    if memory_bytes is None:
        import psutil

        memory_bytes = int(psutil.virtual_memory().total)
    kind = "homogeneous" if homogeneous else "per-step (heterogeneous)"
    what = (
        f"planning {steps} steps with {kind} costs needs about {updates:.1e} table updates "
        f"and {table_bytes / 2**30:,.1f} GiB of tables"
    )
    if table_bytes > memory_bytes // 2:
        raise PlanError(f"{what}, more than half of this machine's "
                        f"{memory_bytes / 2**30:.1f} GiB; use fewer steps")  # fmt: skip
    if updates > MAX_PLAN_UPDATES:
        raise PlanError(f"{what}, over the limit of {MAX_PLAN_UPDATES:.0e} (about 10 minutes "
                        "here); use fewer steps")  # fmt: skip


def _least_storage(sb: np.ndarray, tb: np.ndarray) -> int:
    """The smallest storage peak of any schedule (exact in the given units). With x_i stored,
    the rest [i, l) needs only its largest tape (restore x_i for every step); before storing,
    a schedule can only keep tapes. So the least peak is min(sum of tapes, min over k of
    tapes 0..k-1 kept + state x_k + largest tape of k..l-1)."""
    kept = np.concatenate([[0], np.cumsum(tb)[:-1]])
    largest_after = np.maximum.accumulate(tb[::-1])[::-1]
    return int(min(int(tb.sum()), int((kept + sb + largest_after).min())))


def min_budget_bytes(costs: Costs, steps: int, levels: int = DEFAULT_LEVELS) -> int:
    """The smallest budget :func:`plan_optimal` plans with: from the least storage peak in
    exact bytes (:func:`_least_storage`, below which no schedule fits), the first budget whose
    rounded sizes (module doc: memory quanta) still fit; a budget is skipped when the peak in
    quanta needs more, up to the next budget that holds it at that quantum."""
    _, _, sb_list, tb_list = costs.per_step(steps)
    sb, tb = np.asarray(sb_list, dtype=np.int64), np.asarray(tb_list, dtype=np.int64)
    budget = _least_storage(sb, tb)
    while True:
        q, _ = _quantum(sb_list, tb_list, budget, levels)
        need = _least_storage(-(-sb // q), -(-tb // q))
        if need <= budget // q:
            return budget
        budget = max(budget + 1, need * q)


def check_budget(costs: Costs, steps: int, budget_bytes: int) -> None:
    """:class:`PlanError` naming the smallest budget that works when none fits ``budget``."""
    least = min_budget_bytes(costs, steps)
    if budget_bytes < least:
        raise PlanError(
            f"no schedule of {steps} steps fits in a budget of {budget_bytes} B; the smallest "
            f"budget that works is {least} B"
        )


@lru_cache(maxsize=64)
def _plan_cached(costs: Costs, steps: int, budget: int, levels: int) -> Plan:
    cf, cb, sb, tb = costs.per_step(steps)
    q, exact = _quantum(sb, tb, budget, levels)
    m_top = budget // q
    su = [-(-x // q) for x in sb]
    tu = [-(-x // q) for x in tb]
    homogeneous = all(len(set(v)) == 1 for v in (cf, cb, su, tu))
    if homogeneous:
        tables = _dp_homogeneous(steps, cf[0], cb[0], su[0], tu[0], m_top)
    else:
        tables = _dp_heterogeneous(steps, cf, cb, su, tu, m_top)
    if not math.isfinite(tables.value(steps, 0, m_top)):
        least = min_budget_bytes(costs, steps, levels)
        raise PlanError(
            f"no schedule of {steps} steps fits in {budget} B; the smallest budget that "
            f"works is {least} B"
        )
    acts = tuple(_emit(tables, steps, su, tu, m_top))
    pred = predict(acts, steps, costs)
    if pred.peak_bytes > budget:  # pragma: no cover - rounding up makes this impossible
        raise ScheduleError(f"plan peak {pred.peak_bytes} B exceeds budget {budget} B")
    slots = 1 + max((a.slot for a in acts if a.kind is ActionKind.TAKESHOT), default=-1)
    return Plan(
        steps=steps,
        budget_bytes=budget,
        costs=costs,
        action_list=acts,
        predicted_time_s=pred.time_s,
        peak_bytes=pred.peak_bytes,
        prediction=pred,
        quantum_bytes=q,
        exact=exact,
        slots=slots,
    )


def _quantum(sb: list[int], tb: list[int], budget: int, levels: int) -> tuple[int, bool]:
    g = 0
    for x in {*sb, *tb, budget}:
        g = math.gcd(g, x)
    if g and budget // g <= levels:
        return g, True
    q = max(1, -(-budget // levels))
    exact = all(x % q == 0 for x in {*sb, *tb})
    return q, exact


INF = math.inf
# choice codes: 0 = turn (single step), 1 = TAPE, 2 = TAKESHOT (N only), j + 1 = ADVANCE j (S)
_TURN, _TAPE_C, _SHOT = 0, 1, 2


class _Tables:
    """N/S values and choices; homogeneous tables are indexed by length only."""

    def __init__(self, homogeneous: bool) -> None:
        self.homogeneous = homogeneous
        self.n_val: list[np.ndarray] = [np.empty(0)]
        self.s_val: list[np.ndarray] = [np.empty(0)]
        self.n_ch: list[np.ndarray] = [np.empty(0, dtype=np.int32)]
        self.s_ch: list[np.ndarray] = [np.empty(0, dtype=np.int32)]

    def value(self, n: int, a: int, m: int) -> float:
        row = self.n_val[n] if self.homogeneous else self.n_val[n][a]
        return float(row[m])

    def choice(self, stored: bool, n: int, a: int, m: int) -> int:
        t = self.s_ch[n] if stored else self.n_ch[n]
        return int(t[m] if self.homogeneous else t[a, m])


def _shift(row: np.ndarray, k: int) -> np.ndarray:
    """out[m] = row[m - k] (inf where m < k)."""
    out = np.full_like(row, INF)
    if k <= 0:
        return row.copy() if k == 0 else out  # negative sizes do not occur
    if k < row.shape[-1]:
        out[..., k:] = row[..., :-k]
    return out


def _dp_homogeneous(l: int, cf: float, cb: float, s: int, t: int, m_top: int) -> _Tables:
    tab = _Tables(True)
    width = m_top + 1
    n_val = np.full((l + 1, width), INF)
    s_val = np.full((l + 1, width), INF)
    one = np.full(width, INF)
    one[t:] = cb
    n_val[1], s_val[1] = one, one
    tab.n_val = n_val  # type: ignore[assignment]
    tab.s_val = s_val  # type: ignore[assignment]
    n_ch = np.zeros((l + 1, width), dtype=np.int32)
    s_ch = np.zeros((l + 1, width), dtype=np.int32)
    for n in range(2, l + 1):
        tape = cb + _shift(n_val[n - 1], t)
        js = np.arange(1, n)
        adv = (cf * js)[:, None] + n_val[n - 1 : 0 : -1] + s_val[1:n]
        k = np.argmin(adv, axis=0)
        best_adv = adv[k, np.arange(width)]
        use_tape = tape <= best_adv
        s_val[n] = np.where(use_tape, tape, best_adv)
        s_ch[n] = np.where(use_tape, _TAPE_C, k + 2)  # code j + 1 with j = k + 1
        shot = _shift(s_val[n], s)
        use_tape_n = tape <= shot
        n_val[n] = np.where(use_tape_n, tape, shot)
        n_ch[n] = np.where(use_tape_n, _TAPE_C, _SHOT)
    tab.n_ch, tab.s_ch = n_ch, s_ch  # type: ignore[assignment]
    return tab


def _shift_rows(rows: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """out[a, m] = rows[a, m - ks[a]] (inf where m < ks[a])."""
    width = rows.shape[1]
    idx = np.arange(width)[None, :] - ks[:, None]
    out = np.take_along_axis(rows, np.clip(idx, 0, width - 1), axis=1)
    out[idx < 0] = INF
    return out


def _dp_heterogeneous(
    l: int, cf: list[float], cb: list[float], su: list[int], tu: list[int], m_top: int
) -> _Tables:
    tab = _Tables(False)
    width = m_top + 1
    cfa, cba = np.asarray(cf), np.asarray(cb)
    sua, tua = np.asarray(su), np.asarray(tu)
    prefix = np.concatenate([[0.0], np.cumsum(cfa)])
    m_grid = np.arange(width)[None, :]
    one = np.where(m_grid >= tua[:, None], cba[:, None], INF)  # rows a = 0..l-1
    tab.n_val.append(one)
    tab.s_val.append(one)
    zeros = np.zeros((l, width), dtype=np.int32)
    tab.n_ch.append(zeros)
    tab.s_ch.append(zeros)
    for n in range(2, l + 1):
        rows = l - n + 1  # starts a = 0..l-n
        a = np.arange(rows)
        tape = cba[:rows, None] + _shift_rows(tab.n_val[n - 1][1 : rows + 1], tua[:rows])
        best = tape.copy()
        choice = np.full((rows, width), _TAPE_C, dtype=np.int32)
        for j in range(1, n):
            cand = (prefix[a + j] - prefix[a])[:, None] + tab.n_val[n - j][j : j + rows]
            cand += tab.s_val[j][:rows]
            better = cand < best
            best[better] = cand[better]
            choice[better] = j + 1
        tab.s_val.append(best)
        tab.s_ch.append(choice)
        shot = _shift_rows(best, sua[:rows])
        use_tape = tape <= shot
        tab.n_val.append(np.where(use_tape, tape, shot))
        tab.n_ch.append(np.where(use_tape, _TAPE_C, _SHOT).astype(np.int32))
    return tab


def _emit(tab: _Tables, l: int, su: list[int], tu: list[int], m_top: int) -> Iterator[Action]:
    """Turn the choices into actions, with an explicit stack (chains nest l deep)."""
    free_slots: list[int] = []
    next_slot = 0
    slot_of: dict[int, int] = {}
    # tasks: ("N"|"S", a, n, m) | ("R", a) reverse kept tape | ("X", a, n, m) restore then S
    stack: list[tuple] = [("N", 0, l, m_top)]

    def turn_kind(step: int) -> ActionKind:
        return ActionKind.FIRSTURN if step == l - 1 else ActionKind.YOUTURN

    def release(step: int) -> None:
        slot = slot_of.pop(step, None)
        if slot is not None:
            free_slots.append(slot)
            free_slots.sort(reverse=True)

    while stack:
        task = stack.pop()
        if task[0] == "R":
            yield Action(ActionKind.REVERSE, step=task[1])
            release(task[1])
            continue
        kind, a, n, m = task
        if kind == "X":
            yield Action(ActionKind.RESTORE, slot=slot_of[a], step=a)
            kind = "S"
        stored = kind == "S"
        c = tab.choice(stored, n, a, m)
        if n == 1 or c == _TURN:
            yield Action(turn_kind(a), step=a)
            release(a)
        elif c == _TAPE_C:
            yield Action(ActionKind.TAPE, step=a)
            stack.append(("R", a))
            stack.append(("N", a + 1, n - 1, m - tu[a]))
        elif not stored and c == _SHOT:
            if free_slots:
                slot = free_slots.pop()
            else:
                slot, next_slot = next_slot, next_slot + 1
            slot_of[a] = slot
            yield Action(ActionKind.TAKESHOT, slot=slot, step=a)
            stack.append(("S", a, n, m - su[a]))
        else:
            j = c - 1
            yield Action(ActionKind.ADVANCE, start=a, stop=a + j)
            stack.append(("X", a, j, m))
            stack.append(("N", a + j, n - j, m))
    yield Action(ActionKind.TERMINATE)


# --------------------------------------------------------------------------- comparisons


def _largest_fitting(make, steps: int, costs: Costs, budget: int) -> tuple[int, Prediction] | None:
    """Most slots s (1..steps) whose schedule ``make(s)`` predicts a peak within budget."""
    _, _, sb, tb = costs.per_step(steps)
    s = max(1, min(steps, (budget - max(tb)) // max(sb)))
    best = None
    while s >= 1:  # walk down until it fits
        p = predict(make(s), steps, costs)
        if p.peak_bytes <= budget:
            best = (s, p)
            break
        s -= 1
    if best is None:
        return None
    s = best[0]
    while s < steps:  # a cheaper-than-assumed peak may leave room for more slots
        p = predict(make(s + 1), steps, costs)
        if p.peak_bytes > budget:
            break
        s, best = s + 1, (s + 1, p)
    return best


def compare_at_budget(
    costs: Costs, steps: int, budget_bytes: int, *, levels: int = DEFAULT_LEVELS
) -> list[dict[str, Any]]:
    """Rows for the ``plan`` table: optimal, Revolve and equal segments at one budget.

    Every row is scored by :func:`predict` (same cost model). Revolve and equal segments get
    the most slots whose predicted peak fits the budget. A strategy with no fitting schedule
    gets a row with ``None`` figures and a ``note``.
    """
    rows: list[dict[str, Any]] = []

    def row(strategy: str, snaps: int | None, p: Prediction | None, note: str = "") -> None:
        rows.append(
            {
                "strategy": strategy,
                "snaps": snaps,
                "predicted_time_s": p.time_s if p else None,
                "peak_bytes": p.peak_bytes if p else None,
                "advances": p.advances if p else None,
                "tapes_kept": p.tapes_kept if p else None,
                "peak_tapes": p.peak_tapes if p else None,
                "peak_snapshots": p.peak_snapshots if p else None,
                "note": note,
            }
        )

    try:
        plan = plan_optimal(costs, steps, budget_bytes, levels=levels)
        note = "" if plan.exact else f"memory quantum {plan.quantum_bytes} B"
        row("optimal", plan.slots, plan.prediction, note)
    except PlanError as err:
        row("optimal", None, None, str(err))
    for name, make in (
        ("revolve", lambda s: schedule(steps, s)),
        ("uniform", lambda s: uniform_schedule(steps, s)),
    ):
        found = _largest_fitting(make, steps, costs, budget_bytes)
        if found is None:
            row(name, None, None, "no schedule fits the budget")
        else:
            row(name, found[0], found[1])
    return rows
