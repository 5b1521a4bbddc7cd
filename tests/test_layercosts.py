"""Per-layer costs of a layer chain (issue 23, item 2): measured on the backend that runs the
plan, planned with, and shown per layer by ``ckptbench plan``.

* state bytes per layer are exact (from the shapes), times positive, tapes counted;
* ``cnn-stack`` at 24 layers: the plan made from the measured costs predicts the stored
  bytes the executor counts (``peak_stored_bytes``), on autograd and torch, and the
  gradient is the plain one;
* what a plan does with each step (:func:`ckptbench.schedules.fates.step_fates`) adds up to
  its prediction's counts;
* ``plan`` on a chain: the per-layer table in every format, ``--save-costs`` round trips
  through ``--costs``, and one real subprocess end to end.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
from _fresh import fresh_python_json
from _layer_chains import SIZE_ARGS, TINY, check_optimal_run, shapes_bytes
from click.testing import CliRunner

from ckptbench.backends import registry
from ckptbench.cli import cli
from ckptbench.measure import peaks
from ckptbench.measure.layercosts import measure_layer_costs
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules.fates import step_fates
from ckptbench.schedules.optimal import Costs, min_budget_bytes, plan_optimal
from ckptbench.workloads import Sizes, load_workload

BACKENDS = [
    pytest.param("autograd", id="autograd"),
    pytest.param(
        "torch",
        id="torch",
        marks=[
            pytest.mark.torch,
            pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch"),
        ],
    ),
]


def _case(backend: str, name: str, layers: int, budget: int = 1) -> Case:
    return Case(model=name, steps=layers, strategy="optimal", budget_bytes=budget,
                backend=backend, seed=1, **TINY)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_layer_costs_of_a_chain_whose_state_changes_shape_at_every_layer(backend):
    layers = 9
    report = registry.measure_costs(_case(backend, "mlp-stack", layers))
    costs = Costs.from_dict(report["costs"])
    assert costs.steps == layers
    fwd, taped, state, tape = costs.per_step(layers)
    assert state == shapes_bytes("mlp-stack", layers)  # exact, from the shapes
    assert len(set(state)) > 2
    assert all(t > 0 for t in fwd) and all(t > 0 for t in taped)
    assert all(b > 0 for b in tape)
    assert report["layers"] == [f"dense{i}" for i in range(layers - 1)] + ["out"]
    assert report["steps"] == layers and costs.fixed_time_s > 0
    assert len(report["forward_samples_s"]) == layers


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_stack_24_plan_predicts_the_executors_stored_bytes(backend):
    layers = 24
    case = _case(backend, "cnn-stack", layers)
    doc = registry.measure_costs(case)["costs"]
    costs = Costs.from_dict(doc)
    sb = shapes_bytes("cnn-stack", layers)
    assert list(costs.state_bytes) == sb
    least = min_budget_bytes(costs, layers)
    everything = sum(sb) + sum(costs.tape_bytes)
    budget = (least + everything) // 3
    plan = plan_optimal(costs, layers, budget)
    assert plan.prediction.advances > 0  # a real trade, not store-all
    case = dataclasses.replace(case, budget_bytes=budget)
    be = registry.get_backend(backend)
    built = be.build_gradient(case, Mode.CHECKPOINTED, doc)
    _, grad = built.gradient(built.params)
    counters = built.counters()
    assert counters["peak_stored_bytes"] == plan.peak_bytes <= budget
    assert built.plan()["peak_bytes"] == plan.peak_bytes
    assert counters["state_bytes"] == sb[0]
    normal = be.build_gradient(case, Mode.NORMAL)
    _, want = normal.gradient(normal.params)
    got, want = built.flatten(grad), normal.flatten(want)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))


def test_step_fates_add_up_to_the_prediction():
    layers = 12
    costs = Costs(
        forward_time_s=tuple(1.0 + i % 3 for i in range(layers)),
        taped_time_s=tuple(3.0 + i % 2 for i in range(layers)),
        state_bytes=tuple(100 * (1 + i % 4) for i in range(layers)),
        tape_bytes=tuple(350 * (1 + i % 3) for i in range(layers)),
    )
    plan = plan_optimal(costs, layers, 2500)
    fates = step_fates(plan.action_list, layers)
    p = plan.prediction
    assert sum(f.advances for f in fates) == p.advances > 0
    assert sum(f.kept_tape for f in fates) == p.tapes_kept
    assert fates[0].snapshot and not fates[-1].kept_tape
    assert fates[-1].describe() == "taped at its turn"
    for f in fates:
        words = f.describe()
        assert ("taped and kept" in words) == f.kept_tape
        assert ("recomputed" in words) == (f.advances > 0)


def _plan(args):
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def test_plan_on_a_chain_prints_each_layer_in_every_format(tmp_path):
    saved = tmp_path / "costs.json"
    base = ["--model", "cnn-stack", "--steps", "6", *SIZE_ARGS, "--budget", "192KiB"]
    res = _plan([*base, "--json", "--save-costs", str(saved)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    names = [r["layer"] for r in doc["layers"]]
    assert names == ["conv0", "conv1", "conv2", "conv3", "conv4", "head"]
    assert doc["layers"][0]["state_bytes"] == shapes_bytes("cnn-stack", 6)[0]
    assert doc["plan"]["peak_bytes"] <= 192 * 1024
    assert {"plan", "advances", "snapshot", "kept_tape"} <= set(doc["layers"][0])
    assert json.loads(saved.read_text()) == doc["costs"]
    # --save-costs round trips through --costs: the same plan, the same rows
    again = _plan([*base, "--json", "--costs", str(saved)])
    assert again.exit_code == 0, again.output
    redo = json.loads(again.stdout)
    assert redo["rows"] == doc["rows"] and redo["plan"] == doc["plan"]
    assert redo["layers"] == doc["layers"]  # names included (the built-in's own)
    for fmt, words in (("text", "taped + reverse ms"), ("markdown", "## optimal plan per layer"),
                       ("csv", "layer,forward_time_s,taped_time_s")):  # fmt: skip
        res = _plan([*base, "--costs", str(saved), "--format", fmt])
        assert res.exit_code == 0 and words in res.output, (fmt, res.output)
    # the budget and what the plan stores at its precision: not "0.2 MiB" beside "0.2 MiB"
    text = _plan([*base, "--costs", str(saved), "--format", "text"]).output
    assert "optimal plan per layer within 192 KiB" in text and "0.2 MiB" not in text


def test_plan_on_a_recurrence_has_no_layer_table(tmp_path):
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps({"forward_time_s": 1e-3, "taped_time_s": 3e-3,
                                 "state_bytes": 1024, "tape_bytes": 4096}))  # fmt: skip
    res = _plan(["--steps", "50", "--budget", "64KiB", "--costs", str(costs), "--json"])
    assert res.exit_code == 0, res.output
    assert "layers" not in json.loads(res.stdout)


def test_plan_on_a_chain_end_to_end_in_a_subprocess():
    out = subprocess.run(
        [sys.executable, "-m", "ckptbench", "plan", "--model", "mlp-stack", "--steps", "10",
         *SIZE_ARGS, "--budget", "16KiB", "--format", "text"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "optimal plan per layer" in out.stdout and "dense0" in out.stdout
    assert "out" in out.stdout.split()


def test_plan_measures_on_the_device_it_is_given():
    res = _plan(["--model", "cnn-stack", "--steps", "6", "--device", "gpu", "--budget", "1MiB"])
    assert res.exit_code == 2 and "--backend autograd" in res.output
    assert "'gpu'" in res.output and len(res.output.strip().splitlines()) == 1


@pytest.mark.skipif(peaks.peak_method() != "vmhwm", reason="needs a resettable VmHWM")
def test_autograd_tape_slopes_of_vmhwm_and_tracemalloc_agree_on_a_large_layer():
    from ckptbench.backends.autograd.framework import AutogradFramework

    wl = load_workload("cnn-stack", Sizes(hidden=64, batch=8, input=32, output=3))
    params, x0 = wl.init(3, np.random.default_rng(0))
    fw = AutogradFramework()
    got = {m: measure_layer_costs(wl, params, x0, framework=fw, samples=1, tape_method=m)
           for m in ("vmhwm", "tracemalloc")}  # fmt: skip
    assert got["vmhwm"].tape_method == "vmhwm"
    rss, traced = (got[m].costs.tape_bytes[0] for m in ("vmhwm", "tracemalloc"))
    # the first convolution keeps its padded input and nine shifted copies: ~8 x x_0
    assert 4 * x0.nbytes < traced < 16 * x0.nbytes
    assert rss == pytest.approx(traced, rel=0.3)
    with pytest.raises(ValueError, match="tape_method"):
        measure_layer_costs(wl, params, x0, framework=fw, samples=1, tape_method="guess")


def test_a_tracemalloc_slope_keeps_a_few_tapes_and_reads_what_64_read(monkeypatch):
    """tracemalloc counts bytes, not pages: 8 kept tapes give the slope that 64 gave (it
    took 26 s to measure a 24-layer cnn-stack at these sizes, tracing 64 tapes a slope)."""
    import tracemalloc

    from ckptbench.backends.autograd.framework import AutogradFramework
    from ckptbench.measure import layercosts

    layers = 6
    wl = load_workload("mlp-stack", Sizes(**TINY))
    params, x0 = wl.init(layers, np.random.default_rng(0))
    fw = AutogradFramework()
    traced: list[int] = []  # one entry a tape taken while tracemalloc traces (the slopes)
    chain_ops = fw.chain_ops

    def counting_ops(*args):
        ops = chain_ops(*args)

        class Counted:
            def __getattr__(self, name):
                return getattr(ops, name)

            def tape(self, *a):
                traced.extend([1] if tracemalloc.is_tracing() else [])
                return ops.tape(*a)

        return Counted()

    monkeypatch.setattr(fw, "chain_ops", counting_ops)
    assert layercosts.TRACEMALLOC_TAPES == 8
    for tapes in (8, 64):
        monkeypatch.setattr(layercosts, "TRACEMALLOC_TAPES", tapes)
        traced.clear()
        measure_layer_costs(wl, params, x0, framework=fw, samples=3, tape_method="tracemalloc")
        assert len(traced) == layers * 3 * (1 + tapes)  # three slopes of 1 and k2 tapes
    # the bytes themselves are read in a fresh process, as the worker reads them (_fresh)
    kept = fresh_python_json(f"""
        import json
        import numpy as np
        from ckptbench.backends.autograd.framework import AutogradFramework
        from ckptbench.measure import layercosts
        from ckptbench.workloads import Sizes, load_workload
        wl = load_workload("mlp-stack", Sizes(**{TINY!r}))
        params, x0 = wl.init({layers}, np.random.default_rng(0))
        kept = {{}}
        for tapes in (8, 64):
            layercosts.TRACEMALLOC_TAPES = tapes
            kept[tapes] = layercosts.measure_layer_costs(
                wl, params, x0, framework=AutogradFramework(), samples=3,
                tape_method="tracemalloc").costs.tape_bytes
        print(json.dumps([kept[8], kept[64]]))
    """)
    # two measurements of 64 tapes a slope differ by up to 4% here (a layer's first slope
    # may count some 190 B a tape more); 8 and 64 differ by no more than that
    assert len(kept[0]) == layers
    for few, many in zip(*kept, strict=True):
        assert few == pytest.approx(many, rel=0.08)


@pytest.mark.slow
def test_run_optimal_on_a_chain_plans_from_measured_per_layer_costs(tmp_path):
    check_optimal_run(tmp_path / "r.json", "cnn-stack", 8, 128 * 1024,
                      ["--repeats", "1", "--max-rounds", "2"])  # fmt: skip


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch")
def test_plan_on_an_nn_sequential_plug_in_measures_each_module(tmp_path):
    net = tmp_path / "net.py"
    net.write_text(
        "import torch.nn as nn\n"
        "def make(input=8, hidden=16, **_):\n"
        "    return nn.Sequential(nn.Linear(input, hidden), nn.Tanh(),\n"
        "                         nn.Linear(hidden, 2 * hidden), nn.Linear(2 * hidden, 4))\n"
    )
    res = _plan([f"--model={net}:make", "--backend", "torch", "--steps", "4", "--batch", "2",
                 "--budget", "8KiB", "--json"])  # fmt: skip
    assert res.exit_code == 0, res.output
    layers = json.loads(res.stdout)["layers"]
    assert [r["layer"] for r in layers] == ["0.linear", "1.tanh", "2.linear", "3.linear"]
    assert [r["state_bytes"] for r in layers] == [2 * w * 8 for w in (8, 16, 16, 32)]  # float64


def test_save_costs_keeps_the_measured_costs_when_no_plan_fits(tmp_path):
    saved = tmp_path / "costs.json"
    res = _plan(["--model", "mlp-stack", "--steps", "4", *SIZE_ARGS, "--budget", "1B",
                 "--save-costs", str(saved)])  # fmt: skip
    assert res.exit_code == 2 and "smallest budget" in res.output
    assert f"(the costs are saved: plan again with --costs {saved})" in res.output
    costs = Costs.from_dict(json.loads(saved.read_text()))
    assert list(costs.state_bytes) == shapes_bytes("mlp-stack", 4)
