"""The budget planner's dynamic program: minimum time over states *and* kept tapes.

Beaumont, Eyraud-Dubois, Herrmann, Joly & Shilova, "Optimal checkpointing for heterogeneous
chains: how to train deep neural networks with limited memory" (2019, the ``rotor`` tool),
for the :mod:`ckptbench.schedules` vocabulary. For a chain piece [a, b) whose first state
x_a is current, with m free bytes, two values: N(a, b, m) when x_a is not stored and
S(a, b, m) when x_a sits in a slot (paid for outside m). A single step is a turn (needs its
tape, t_a <= m). Otherwise::

    S(a, b, m) = min( c_a + N(a+1, b, m - t_a),                        # TAPE a, keep it
                      min_k F(a, k) + N(k, b, m) + S(a, k, m) )          # ADVANCE, RESTORE x_a
    N(a, b, m) = min( c_a + N(a+1, b, m - t_a), S(a, b, m - s_a) )       # or TAKESHOT x_a

with c = taped cost, F(a, k) = untaped forward cost of steps a..k-1, s/t = state/tape
bytes. Heterogeneous chains cost O(l^3 M) (numpy over the start index and memory);
homogeneous ones depend only on b - a: O(l^2 M), vectorised over the split point. Every
schedule the program chooses from starts its reverse with FIRSTURN after one monotone first
sweep, as the executor requires. :mod:`ckptbench.schedules.optimal.emit` turns the choices
into actions.

Memory is discretised in quanta of q bytes, M = floor(budget / q) levels: state and tape
sizes are rounded *up* to whole quanta, so every plan fits the real budget (the reported
peak is replayed in exact bytes). When the greatest common divisor of all sizes gives at
most ``levels`` levels, q is that divisor and the plan is optimal exactly (every storage
peak is a multiple of it, so M = floor(budget / q) loses nothing).
Otherwise q = ceil(budget / levels) and the plan is optimal among schedules whose rounded
sizes fit; each stored item may then be charged up to q - 1 bytes too much, so a schedule
that fills the budget to within (items x q) bytes can be missed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ckptbench.schedules.optimal.costs import Costs
from ckptbench.schedules.optimal.emit import SHOT, TAPE

__all__ = [
    "Solution",
    "Tables",
    "least_storage",
    "least_storage_of",
    "min_budget_bytes",
    "quantum",
    "solve",
]

INF = math.inf


@dataclass(frozen=True)
class Solution:
    """The solved tables and the rounding they were solved with."""

    tables: Tables
    quantum_bytes: int
    exact: bool  # the quantum divides every size and the budget (no rounding)
    state_units: list[int]  # state sizes in quanta
    tape_units: list[int]  # tape sizes in quanta
    levels: int  # the top memory level, floor(budget_bytes / quantum)

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.tables.value(len(self.state_units), 0, self.levels))


def solve(costs: Costs, steps: int, budget_bytes: int, levels: int) -> Solution:
    """Solve the program for ``costs`` on ``steps`` steps within ``budget_bytes``."""
    cf, cb, sb, tb = costs.per_step(steps)
    q, exact = quantum(sb, tb, budget_bytes, levels)
    m_top = budget_bytes // q
    su = [-(-x // q) for x in sb]
    tu = [-(-x // q) for x in tb]
    if all(len(set(v)) == 1 for v in (cf, cb, su, tu)):
        tables = _homogeneous(steps, cf[0], cb[0], su[0], tu[0], m_top)
    else:
        tables = _heterogeneous(steps, cf, cb, su, tu, m_top)
    return Solution(tables, q, exact, su, tu, m_top)


def quantum(sb: list[int], tb: list[int], budget_bytes: int, levels: int) -> tuple[int, bool]:
    """(memory quantum, exact) for these sizes and budget (the module docstring). The
    divisor is the sizes' alone: every storage peak is a multiple of it, so the budget's
    remainder holds nothing and the plan is exact at any budget (with the budget in the
    divisor, 20 497 B of 100 B states and 1 000 B tapes rounded every item up and planned
    slower than 20 400 B did)."""
    g = 0
    for x in {*sb, *tb}:
        g = math.gcd(g, x)
    if g and budget_bytes // g <= levels:
        return g, True
    q = max(1, -(-budget_bytes // levels))
    exact = all(x % q == 0 for x in {*sb, *tb})
    return q, exact


def least_storage(sb: np.ndarray, tb: np.ndarray) -> int:
    """The smallest storage peak of any schedule (exact in the given units). With x_i stored,
    the rest [i, l) needs only its largest tape (restore x_i for every step); before storing,
    a schedule can only keep tapes. So the least peak is min(sum of tapes, min over k of
    tapes 0..k-1 kept + state x_k + largest tape of k..l-1). Summed in Python integers: a
    costs file's bytes (each up to 2**62) add up past int64, which wrapped to a negative
    peak."""
    sb, tb = np.asarray(sb, dtype=object), np.asarray(tb, dtype=object)
    kept = np.concatenate([[0], np.cumsum(tb)[:-1]])
    largest_after = np.maximum.accumulate(tb[::-1])[::-1]
    return int(min(int(tb.sum()), int((kept + sb + largest_after).min())))


def least_storage_of(costs: Costs, steps: int, q: int = 1) -> int:
    """:func:`least_storage` of ``costs`` on ``steps`` steps with every size rounded up to
    ``q`` bytes, in quanta; homogeneous costs in closed form (no per-step arrays, so a chain
    of 2**31 steps is answered at once): min(every tape, x_0 and one tape)."""
    if costs.steps is None:
        s, t = -(-costs.state_bytes // q), -(-costs.tape_bytes // q)  # type: ignore[operator]
        return min(steps * t, s + t)
    _, _, sb_list, tb_list = costs.per_step(steps)
    sb, tb = np.asarray(sb_list, dtype=np.int64), np.asarray(tb_list, dtype=np.int64)
    return least_storage(-(-sb // q), -(-tb // q))


def min_budget_bytes(costs: Costs, steps: int, levels: int) -> int:
    """The smallest budget :func:`plan_optimal` plans with: from the least storage peak in
    exact bytes (:func:`least_storage`, below which no schedule fits), the first budget whose
    rounded sizes (module doc: memory quanta) still fit; a budget is skipped when the peak in
    quanta needs more, up to the next budget that holds it at that quantum."""
    sizes = (
        ([costs.state_bytes], [costs.tape_bytes])  # homogeneous: the sizes' set is all
        if costs.steps is None
        else costs.per_step(steps)[2:]
    )
    budget_bytes = least_storage_of(costs, steps)
    while True:
        q, _ = quantum(*sizes, budget_bytes, levels)  # type: ignore[arg-type]
        need = least_storage_of(costs, steps, q)
        if need <= budget_bytes // q:
            return budget_bytes
        budget_bytes = max(budget_bytes + 1, need * q)


class Tables:
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


def _homogeneous(l: int, cf: float, cb: float, s: int, t: int, m_top: int) -> Tables:
    tab = Tables(True)
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
        s_ch[n] = np.where(use_tape, TAPE, k + 2)  # code j + 1 with j = k + 1
        shot = _shift(s_val[n], s)
        use_tape_n = tape <= shot
        n_val[n] = np.where(use_tape_n, tape, shot)
        n_ch[n] = np.where(use_tape_n, TAPE, SHOT)
    tab.n_ch, tab.s_ch = n_ch, s_ch  # type: ignore[assignment]
    return tab


def _shift_rows(rows: np.ndarray, ks: np.ndarray) -> np.ndarray:
    """out[a, m] = rows[a, m - ks[a]] (inf where m < ks[a])."""
    width = rows.shape[1]
    idx = np.arange(width)[None, :] - ks[:, None]
    out = np.take_along_axis(rows, np.clip(idx, 0, width - 1), axis=1)
    out[idx < 0] = INF
    return out


def _heterogeneous(
    l: int, cf: list[float], cb: list[float], su: list[int], tu: list[int], m_top: int
) -> Tables:
    tab = Tables(False)
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
        choice = np.full((rows, width), TAPE, dtype=np.int32)
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
        tab.n_ch.append(np.where(use_tape, TAPE, SHOT).astype(np.int32))
    return tab
