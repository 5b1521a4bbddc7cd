"""Per-layer costs of a layer chain measured on JAX (``ckptbench.backends.jax.layercosts``).

* ``plan --backend jax`` on a built-in stack measures every layer and prints the plan per
  layer (no timing assertions: only that times were measured);
* the measured state bytes are x_i's and the tape bytes are what the chain executor's own
  tapes hold in a real gradient; a plan made from them predicts the executor's stored bytes.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import numpy as np
import pytest
from _layer_chains import SIZE_ARGS, TINY, check_optimal_run, shapes_bytes
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules.optimal import Costs, min_budget_bytes, plan_optimal
from ckptbench.workloads import Sizes

pytestmark = [
    pytest.mark.jax,
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="no jax"),
]


def _case(name: str, layers: int, budget: int = 1) -> Case:
    return Case(model=name, steps=layers, strategy="optimal", budget_bytes=budget,
                backend="jax", executor="engine", seed=1, **TINY)  # fmt: skip


def test_plan_on_jax_measures_and_prints_every_layer():
    res = CliRunner().invoke(
        cli, ["plan", "--model", "mlp-stack", "--backend", "jax", "--steps", "5", *SIZE_ARGS,
              "--budget", "16KiB", "--json"],
        catch_exceptions=False,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    rows = doc["layers"]
    assert [r["layer"] for r in rows] == ["dense0", "dense1", "dense2", "dense3", "out"]
    assert [r["state_bytes"] for r in rows] == shapes_bytes("mlp-stack", 5)
    assert all(r["forward_time_s"] > 0 and r["taped_time_s"] > 0 for r in rows)
    assert all(r["tape_bytes"] >= r["state_bytes"] for r in rows)  # a tape keeps its x_i
    assert doc["plan"]["peak_bytes"] <= 16 * 1024
    text = CliRunner().invoke(
        cli, ["plan", "--model", "mlp-stack", "--backend", "jax", "--steps", "5", *SIZE_ARGS,
              "--budget", "16KiB", "--format", "text"],
        catch_exceptions=False,
    )  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "optimal plan per layer" in text.output and "taped + reverse ms" in text.output
    assert "dense3" in text.output and "out" in text.output.split()


def test_jax_layer_bytes_equal_what_the_chain_executor_holds(monkeypatch):
    import jax

    from ckptbench.backends import registry
    from ckptbench.backends.jax.chain import JaxChainOps, chain_checkpoint
    from ckptbench.backends.jax.workloads import load_jax_workload

    layers = 6
    report = registry.measure_costs(_case("mlp-stack", layers))
    costs = Costs.from_dict(report["costs"])
    assert report["backend"] == "jax" and report["tape_method"] == "jax-vjp-residuals"
    assert report["timing"] == "device-synchronized" and report["device"] == "cpu"
    fwd, taped, state, tape = costs.per_step(layers)
    assert state == shapes_bytes("mlp-stack", layers)  # exact, from the shapes
    assert all(t > 0 for t in fwd) and all(t > 0 for t in taped)

    # the executor's own tapes in a real gradient, as it holds them
    wl = load_jax_workload("mlp-stack", Sizes(**TINY))
    params, x0 = wl.init(layers, np.random.default_rng(1))
    held: dict[int, int] = {}
    states: dict[int, int] = {}
    original = JaxChainOps.tape

    def recording(self, x, i, outputs):
        kept, out = original(self, x, i, outputs)
        outs = {a.unsafe_buffer_pointer() for a in jax.tree_util.tree_leaves(out)}
        bufs = {a.unsafe_buffer_pointer(): a.nbytes for a in jax.tree_util.tree_leaves(kept)}
        held[i] = sum(n for ptr, n in bufs.items() if ptr not in outs)
        states[i] = self.state_nbytes(x)
        return kept, out

    monkeypatch.setattr(JaxChainOps, "tape", recording)
    plan = plan_optimal(costs, layers, sum(state) + sum(tape))  # every layer taped and kept
    loop = chain_checkpoint(wl.layer, layers, strategy="optimal", plan=plan)
    loop.value_and_grad(wl.loss, params, x0)
    assert set(range(layers - 1)) <= set(held)  # (the last one may turn: tape + reverse)
    assert {i: states[i] for i in held} == {i: state[i] for i in held}
    assert {i: held[i] for i in held} == {i: tape[i] for i in held}
    assert loop.stats.peak_stored_bytes == plan.peak_bytes


def test_a_plan_from_jax_layer_costs_predicts_the_executors_stored_bytes():
    from ckptbench.backends import registry

    layers = 6
    case = _case("cnn-stack", layers)
    doc = registry.measure_costs(case)["costs"]
    costs = Costs.from_dict(doc)
    assert list(costs.state_bytes) == shapes_bytes("cnn-stack", layers)
    least = min_budget_bytes(costs, layers)
    budget = (least + sum(costs.state_bytes) + sum(costs.tape_bytes)) // 3
    plan = plan_optimal(costs, layers, budget)
    assert plan.prediction.advances > 0  # a real trade, not store-all
    case = dataclasses.replace(case, budget_bytes=budget)
    be = registry.get_backend("jax")
    built = be.build_gradient(case, Mode.CHECKPOINTED, doc)
    _, grad = built.gradient(built.params)
    assert built.counters()["peak_stored_bytes"] == plan.peak_bytes <= budget
    normal = be.build_gradient(case, Mode.NORMAL)
    _, want = normal.gradient(normal.params)
    got, want = built.flatten(grad), normal.flatten(want)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


@pytest.mark.slow
def test_run_optimal_on_jax_plans_a_stack_from_measured_per_layer_costs(tmp_path):
    check_optimal_run(tmp_path / "r.json", "mlp-stack", 6, 8 * 1024,
                      ["--backend", "jax", "--rounds", "1"])  # fmt: skip
