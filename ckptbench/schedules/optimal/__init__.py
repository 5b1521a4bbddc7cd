"""The budget planner as a strategy: the fastest schedule of states *and* tapes in a budget.

Beaumont, Eyraud-Dubois, Herrmann, Joly & Shilova, "Optimal checkpointing for heterogeneous
chains: how to train deep neural networks with limited memory", 2019. The dynamic program
and the plan's action stream live in ``schedules.optimal.planner``; this module only states the
strategy's properties: it is set by a byte budget, it needs measured step costs, and its
step counts are the plan's own (recorded in each result). Pure: no arrays, no I/O.
"""

from __future__ import annotations

from ckptbench.schedules.strategy import ALL_BACKENDS, Setting, StrategySpec

__all__ = ["OPTIMAL"]

#: Minimum time under a byte budget, keeping states and tapes (ckptbench.schedules.optimal.planner).
OPTIMAL = StrategySpec(
    name="optimal",
    label="optimal (budget planner)",
    marker="D",
    setting=Setting.BUDGET,
    backends=ALL_BACKENDS,
    help="fastest schedule of states and tapes within --budget bytes (measured step costs)",
    planned=True,
)
