"""Test helpers shared by the per-layer cost tests of every backend: the tiny stack sizes,
the exact bytes of each layer's input, and a `ckptbench run --strategy optimal` on a stack
checked against its own plan."""

from __future__ import annotations

import math

from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Mode
from ckptbench.results.store import load_result
from ckptbench.schedules.optimal import Costs
from ckptbench.workloads import Sizes, load_workload

TINY = {"hidden": 64, "batch": 2, "input": 8, "output": 3}
SIZE_ARGS = ["--hidden", "64", "--batch", "2", "--input", "8", "--output", "3"]


def shapes_bytes(name: str, layers: int) -> list[int]:
    """The bytes of x_0 .. x_{L-1} (float64), from the stack's declared shapes."""
    wl = load_workload(name, Sizes(**TINY))
    return [8 * math.prod(spec.in_shape) for spec in wl.specs(layers)]


def check_optimal_run(out, model: str, layers: int, budget_bytes: int, args: list[str]) -> None:
    """`ckptbench run --strategy optimal` on ``model`` (``args``: the backend and rounds)
    plans from costs measured per layer and holds the plan: the gradient equals the plain
    one, every layer's state bytes are the shapes', and the executor stores exactly what the
    plan predicted, within the budget."""
    argv = ["run", "--model", model, "--steps", str(layers), *SIZE_ARGS, "--strategy",
            "optimal", "--budget", str(budget_bytes), *args, "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(cli, argv, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    ckpt = load_result(out).mode(Mode.CHECKPOINTED)
    assert ckpt.grad_max_rel_err <= 1e-12
    costs = Costs.from_dict(ckpt.plan["costs"])
    assert list(costs.state_bytes) == shapes_bytes(model, layers)  # measured per layer
    assert ckpt.counters["peak_stored_bytes"] == ckpt.plan["peak_bytes"] <= budget_bytes
