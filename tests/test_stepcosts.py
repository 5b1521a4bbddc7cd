"""Measured step costs: plausible magnitudes, both memory methods, JSON round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _fresh import fresh_python_json
from _imports import loaded_after_import

from ckptbench.measure.stepcosts import measure_step_costs
from ckptbench.schedules.optimal import Costs, costs_from_json, plan_optimal
from ckptbench.workloads import Sizes, load_workload

SIZES = {"hidden": 128, "batch": 8, "input": 16}


def small_lstm(steps):
    wl = load_workload("lstm", Sizes(**SIZES))
    return wl, *wl.init(steps, np.random.default_rng(0))


def test_lstm_costs_are_measured_and_plausible():
    wl, params, state0, inputs = small_lstm(200)
    report = measure_step_costs(wl, params, state0, inputs, samples=2)
    c = report.costs
    assert report.tape_method == "tracemalloc"
    assert c.state_bytes == 2 * 8 * 128 * 8  # (h, c), float64
    # the tape keeps the gate pre-activations and their nonlinearities: several states
    assert 2 * c.state_bytes < c.tape_bytes < 30 * c.state_bytes
    # taping costs more than a plain step, but measured times on a loaded machine can
    # invert a small gap: only a wide inversion is wrong
    assert 0 < c.forward_time_s < 4 * c.taped_time_s
    assert c.fixed_time_s > 0
    assert len(report.tape_samples_bytes) == 2


def test_tracemalloc_agrees_with_vmhwm_on_tape_bytes():
    """Both slopes in a fresh process, as the worker takes them (``_fresh``): in a
    long-lived one VmHWM's slope reads too little (88 491 B against 127 292 B once, in CI)."""
    got = fresh_python_json(f"""
        import json
        import numpy as np
        from ckptbench.measure import peaks
        from ckptbench.measure.stepcosts import measure_step_costs
        from ckptbench.workloads import Sizes, load_workload
        wl = load_workload("lstm", Sizes(**{SIZES!r}))
        params, state0, inputs = wl.init(120, np.random.default_rng(0))
        got = {{"peak_method": peaks.peak_method()}}
        for m in ("vmhwm", "tracemalloc") if got["peak_method"] == "vmhwm" else ("tracemalloc",):
            r = measure_step_costs(wl, params, state0, inputs, samples=1, tape_method=m)
            got[m] = [r.tape_method, r.costs.tape_bytes, r.costs.state_bytes]
        print(json.dumps(got))
    """)
    method, traced, state_bytes = got["tracemalloc"]
    assert method == "tracemalloc"
    assert 2 * state_bytes < traced < 30 * state_bytes
    if got["peak_method"] == "vmhwm":
        assert got["vmhwm"][0] == "vmhwm"
        assert got["vmhwm"][1] == pytest.approx(traced, rel=0.3)


def test_workload_costs_are_json_and_plan():
    wl = load_workload("rnn", Sizes(**SIZES))
    params, state0, inputs = wl.init(40, np.random.default_rng(0))
    doc = measure_step_costs(wl, params, state0, inputs, samples=1).as_dict()
    costs = costs_from_json(json.dumps(doc["costs"]))
    assert isinstance(costs, Costs) and costs.steps is None
    plan = plan_optimal(costs, 40, costs.state_bytes * 4 + costs.tape_bytes * 3)
    assert plan.peak_bytes <= plan.budget_bytes


def test_bad_arguments():
    wl, params, state0, inputs = small_lstm(10)
    with pytest.raises(ValueError, match="samples"):
        measure_step_costs(wl, params, state0, inputs, samples=0)
    with pytest.raises(ValueError, match="tape_method"):
        measure_step_costs(wl, params, state0, inputs, samples=1, tape_method="guess")


def test_stepcosts_imports_no_rendering_libraries():
    assert loaded_after_import("ckptbench.measure.stepcosts", ("pandas", "rich", "click")) == []


def test_a_small_tape_reads_the_same_in_every_process():
    """An LSTM at hidden 8: VmHWM's slope read 1092, 1365 or 1638 B per tape from one run to
    the next (whole pages over 15 steps, and pages freed by the run before reused), so
    `plan` and `run` of one case planned from different tapes; tracemalloc counts bytes,
    and the tape's autograd objects (about 24 KB here) with them."""
    reads, states = [], set()
    for seed in range(3):  # each in a process of its own, as plan's and run's workers are
        method, tape, state = fresh_python_json(f"""
            import json
            import numpy as np
            from ckptbench.measure.stepcosts import measure_step_costs
            from ckptbench.workloads import Sizes, load_workload
            wl = load_workload("lstm", Sizes(hidden=8, batch=2, input=4))
            params, state0, inputs = wl.init(20, np.random.default_rng({seed}))
            r = measure_step_costs(wl, params, state0, inputs, samples=3)
            print(json.dumps([r.tape_method, r.costs.tape_bytes, r.costs.state_bytes]))
        """)
        assert method == "tracemalloc"
        reads.append(tape)
        states.add(state)
    assert max(reads) <= 1.15 * min(reads), reads
    assert len(states) == 1 and min(reads) > 10 * states.pop()  # graph objects, not arrays alone
