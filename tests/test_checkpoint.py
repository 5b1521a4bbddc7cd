"""binomial_checkpoint against plain autograd, finite differences and the step-count formula."""

from __future__ import annotations

from dataclasses import replace

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

from ckptbench import binomial_checkpoint
from ckptbench.schedules import optimal_forward_steps, replay, schedule, uniform_schedule
from ckptbench.schedules.cost_model import predict
from ckptbench.schedules.optimal import Costs, plan_optimal

B, H, I = 3, 5, 4


def rnn_step(p, h, x):
    return anp.tanh(h @ p["W"] + x @ p["U"] + p["b"])


def readout(p, h):
    return h @ p["V"]


def lstm_step(p, state, x):
    h, c = state
    z = anp.concatenate([x, h], axis=1) @ p[0] + p[1]
    i, f, o = (0.5 * (anp.tanh(0.5 * z[:, k * H : (k + 1) * H]) + 1) for k in range(3))
    g = anp.tanh(z[:, 3 * H :])
    c = f * c + i * g
    return (o * anp.tanh(c), c)


def lstm_post(p, state):
    return state[0] @ p[2]


def make_rnn(rng, steps):
    params = {
        "W": rng.normal(size=(H, H)) * 0.5,
        "U": rng.normal(size=(I, H)) * 0.5,
        "b": rng.normal(size=H) * 0.1,
        "V": rng.normal(size=(H, 2)),
    }
    return params, rng.normal(size=(B, H)), rng.normal(size=(steps, B, I))


def make_lstm(rng, steps):
    params = (
        rng.normal(size=(I + H, 4 * H)) * 0.4,
        rng.normal(size=4 * H) * 0.1,
        rng.normal(size=(H, 2)),
    )
    state = (rng.normal(size=(B, H)), rng.normal(size=(B, H)))
    return params, state, rng.normal(size=(steps, B, I))


CASES = {"rnn": (rnn_step, readout, make_rnn), "lstm": (lstm_step, lstm_post, make_lstm)}


def counting(step):
    """``step`` wrapped to count its calls in ``calls["f"]``."""
    calls = {"f": 0}

    def counted(p, h, x):
        calls["f"] += 1
        return step(p, h, x)

    return counted, calls


def plain_loop(f, post, steps):
    def loop(params, state, inputs):
        outs = []
        for i in range(steps):
            state = f(params, state, inputs[i])
            outs.append(post(params, state))
        return anp.stack(outs)

    return loop


def loss_of(loop):
    return lambda p, s, x: anp.sum(anp.sin(loop(p, s, x)) * anp.arange(1.0, 3.0))


def flat(tree):
    if isinstance(tree, dict):
        return np.concatenate([flat(tree[k]) for k in sorted(tree)])
    if isinstance(tree, (tuple, list)):
        return np.concatenate([flat(v) for v in tree])
    return np.ravel(tree)


def rel_err(a, b):
    a, b = flat(a), flat(b)
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


@pytest.mark.parametrize("model", ["rnn", "lstm"])
@pytest.mark.parametrize(
    ("steps", "snaps", "strategy"),
    [
        (1, 1, "revolve"),
        (2, 1, "revolve"),
        (37, 4, "revolve"),
        (37, 1, "revolve"),
        (37, 40, "revolve"),
        (37, 6, "uniform"),
        (37, 3, "store-all"),
    ],
)
def test_gradients_equal_plain_autograd(model, steps, snaps, strategy):
    f, post, make = CASES[model]
    params, state0, inputs = make(np.random.default_rng(steps * 7 + snaps), steps)
    loop = binomial_checkpoint(f, post, steps, snaps, strategy)
    ref = plain_loop(f, post, steps)
    np.testing.assert_array_equal(loop(params, state0, inputs), ref(params, state0, inputs))
    g = autograd.grad(loss_of(loop), (0, 1, 2))(params, state0, inputs)
    g_ref = autograd.grad(loss_of(ref), (0, 1, 2))(params, state0, inputs)
    for got, want in zip(g, g_ref, strict=True):
        assert rel_err(got, want) <= 1e-12


@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_gradients_match_finite_differences(model):
    f, post, make = CASES[model]
    steps = 12
    rng = np.random.default_rng(1)
    params, state0, inputs = make(rng, steps)
    loop = binomial_checkpoint(f, post, steps, 3)
    loss = loss_of(loop)
    g_params = autograd.grad(loss, 0)(params, state0, inputs)
    g_inputs = autograd.grad(loss, 2)(params, state0, inputs)
    eps = 1e-6
    # random directions: directional derivative vs central difference
    for _ in range(3):
        dx = rng.normal(size=inputs.shape)
        fd = (loss(params, state0, inputs + eps * dx) - loss(params, state0, inputs - eps * dx)) / (
            2 * eps
        )
        assert np.sum(g_inputs * dx) == pytest.approx(fd, rel=1e-6)
    leaves = params if isinstance(params, tuple) else tuple(params[k] for k in sorted(params))
    grads = g_params if isinstance(g_params, tuple) else tuple(g_params[k] for k in sorted(params))
    for leaf, grad in zip(leaves, grads, strict=True):
        idx = tuple(rng.integers(0, n) for n in leaf.shape)
        old = leaf[idx]
        leaf[idx] = old + eps
        up = loss(params, state0, inputs)
        leaf[idx] = old - eps
        down = loss(params, state0, inputs)
        leaf[idx] = old
        assert grad[idx] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize(("steps", "snaps"), [(1, 1), (50, 1), (100, 10), (200, 7), (64, 64)])
def test_step_evaluations_are_optimal(steps, snaps):
    counted, calls = counting(rnn_step)
    params, h0, xs = make_rnn(np.random.default_rng(0), steps)
    loop = binomial_checkpoint(counted, readout, steps, snaps)
    autograd.grad(loss_of(loop))(params, h0, xs)
    optimal = optimal_forward_steps(steps, snaps)
    assert calls["f"] == optimal + steps
    st = loop.stats
    assert st.steps_advanced == optimal
    assert st.steps_taped == steps
    assert st.step_evaluations == calls["f"]
    assert st.forward_steps_optimal == optimal
    assert st.peak_live_snapshots <= snaps
    assert st.peak_snapshot_bytes == st.peak_live_snapshots * h0.nbytes


def test_forward_alone_is_the_first_sweep():
    counted, calls = counting(rnn_step)
    params, h0, xs = make_rnn(np.random.default_rng(0), 100)
    loop = binomial_checkpoint(counted, readout, 100, 10)
    loop(params, h0, xs)
    assert calls["f"] == 100  # 99 advances + the taped last step, outputs for all
    assert loop.stats.post_calls == 99


def test_uniform_counts_match_replay():
    counted, calls = counting(rnn_step)
    params, h0, xs = make_rnn(np.random.default_rng(0), 90)
    loop = binomial_checkpoint(counted, readout, 90, 12, strategy="uniform")
    autograd.grad(loss_of(loop))(params, h0, xs)
    stats = replay(uniform_schedule(90, 12), 90, 12)
    assert calls["f"] == stats.advances + stats.taped
    assert loop.stats.peak_live_snapshots <= 12


def test_params_as_list_and_state_built_inline():
    """Containers built from boxes inside the differentiated function still differentiate."""
    params, h0, xs = make_rnn(np.random.default_rng(3), 9)
    loop = binomial_checkpoint(rnn_step, readout, 9, 2)
    ref = plain_loop(rnn_step, readout, 9)

    def loss(W, loopfn):
        p = {"W": W, "U": params["U"], "b": params["b"], "V": params["V"]}
        return anp.sum(loopfn(p, h0, xs) ** 2)

    g = autograd.grad(loss)(params["W"], loop)
    assert rel_err(g, autograd.grad(loss)(params["W"], ref)) <= 1e-12


def test_jacobian_calls_vjp_repeatedly():
    params, h0, xs = make_rnn(np.random.default_rng(4), 15)
    loop = binomial_checkpoint(rnn_step, readout, 15, 3)
    ref = plain_loop(rnn_step, readout, 15)
    J = autograd.jacobian(lambda h: loop(params, h, xs)[-2:].ravel())(h0)
    J_ref = autograd.jacobian(lambda h: ref(params, h, xs)[-2:].ravel())(h0)
    assert rel_err(J, J_ref) <= 1e-12


def test_bad_inputs_raise_clear_errors():
    params, h0, xs = make_rnn(np.random.default_rng(0), 10)
    loop = binomial_checkpoint(rnn_step, readout, 11, 3)
    with pytest.raises(ValueError, match="leading axis 10, expected steps=11"):
        loop(params, h0, xs)

    def bad_step(p, h, x):
        return rnn_step(p, h, x)[:, :2]

    loop = binomial_checkpoint(bad_step, readout, 10, 3)
    with pytest.raises(ValueError, match="f must return a state like the one it got"):
        autograd.grad(lambda p: anp.sum(loop(p, h0, xs)))(params)

    def tuple_step(p, h, x):
        return (rnn_step(p, h, x), h)

    loop = binomial_checkpoint(tuple_step, readout, 1, 3)
    with pytest.raises(ValueError, match="expected array"):
        loop(params, h0, xs[:1])
    with pytest.raises(ValueError, match="snaps must be >= 1"):
        binomial_checkpoint(rnn_step, readout, 10, 0)
    with pytest.raises(ValueError, match="unknown strategy"):
        binomial_checkpoint(rnn_step, readout, 10, 2, strategy="sqrt")
    with pytest.raises(ValueError, match="inputs must be an array"):
        binomial_checkpoint(rnn_step, readout, 10, 2)(params, h0, 3.0)


def test_parameter_cotangent_accumulated_in_place(monkeypatch):
    """The accumulator is allocated once per call, never per step."""
    import ckptbench.backends.autograd.binding as ck

    seen = []
    real = ck._accumulate

    def spy(acc, grads):
        seen.append(tuple(id(a) for a in acc))
        real(acc, grads)

    monkeypatch.setattr(ck, "_accumulate", spy)
    params, h0, xs = make_rnn(np.random.default_rng(0), 30)
    loop = binomial_checkpoint(rnn_step, readout, 30, 4)
    autograd.grad(loss_of(loop))(params, h0, xs)
    # one accumulation per step, always into the same 4 arrays
    assert len(seen) == 30
    assert len(set(seen)) == 1
    assert len(seen[0]) == len(params)


# ---------------------------------------------------------------- optimal plans (kept tapes)


def optimal_cases():
    """(steps, costs, budget) covering no tapes, some tapes and store-all tapes."""
    hom = Costs(forward_time_s=0.4, taped_time_s=2.5, state_bytes=B * H * 8, tape_bytes=900)
    rng = np.random.default_rng(9)
    het = Costs(
        forward_time_s=tuple(rng.uniform(0.2, 1.0, 23)),
        taped_time_s=tuple(rng.uniform(1.0, 4.0, 23)),
        state_bytes=B * H * 8,
        tape_bytes=tuple(int(v) for v in rng.integers(300, 2000, 23)),
    )
    return [
        (37, hom, 3 * 120 + 900),  # one tape only: Revolve with 3 slots
        (37, hom, 6 * 120 + 4 * 900),
        (37, hom, 37 * 900),  # every tape fits
        (2, hom, 120 + 900),
        (23, het, 5 * 120 + 3000),
    ]


@pytest.mark.parametrize("case", range(5))
@pytest.mark.parametrize("model", ["rnn", "lstm"])
def test_optimal_plans_give_plain_gradients_and_planned_counters(case, model):
    steps, costs, budget = optimal_cases()[case]
    f, post, make = CASES[model]
    params, state0, inputs = make(np.random.default_rng(case), steps)
    state_bytes = sum(np.asarray(s).nbytes for s in (state0 if model == "lstm" else (state0,)))
    costs = replace(costs, state_bytes=state_bytes)
    plan = plan_optimal(costs, steps, budget * state_bytes // 120)
    counted, calls = counting(f)
    loop = binomial_checkpoint(counted, post, steps, plan=plan)
    ref = plain_loop(f, post, steps)
    np.testing.assert_array_equal(loop(params, state0, inputs), ref(params, state0, inputs))
    calls["f"] = 0
    g = autograd.grad(loss_of(loop), (0, 1, 2))(params, state0, inputs)
    g_ref = autograd.grad(loss_of(ref), (0, 1, 2))(params, state0, inputs)
    for got, want in zip(g, g_ref, strict=True):
        assert rel_err(got, want) <= 1e-12
    st, p = loop.stats, plan.prediction
    assert st.strategy == "optimal"
    assert calls["f"] == st.step_evaluations == p.advances + steps
    assert (st.steps_advanced, st.steps_taped) == (p.advances, steps)
    assert (st.tapes_kept, st.tapes_kept_peak) == (p.tapes_kept, p.peak_tapes)
    assert st.peak_live_snapshots == p.peak_snapshots
    assert st.peak_stored_bytes == plan.peak_bytes <= plan.budget_bytes
    phases = st.advance_time_s + st.taped_time_s + st.bookkeeping_time_s
    assert 0 < phases <= st.executor_time_s
    assert st.other_time_s >= 0


def test_optimal_gradient_equals_revolve_executor_bit_for_bit():
    params, h0, xs = make_rnn(np.random.default_rng(2), 40)
    costs = Costs(forward_time_s=0.4, taped_time_s=2.5, state_bytes=h0.nbytes, tape_bytes=900)
    plan = plan_optimal(costs, 40, 10 * h0.nbytes + 6 * 900)
    assert plan.prediction.tapes_kept > 0
    g_opt = autograd.grad(loss_of(binomial_checkpoint(rnn_step, readout, 40, plan=plan)))
    g_rev = autograd.grad(loss_of(binomial_checkpoint(rnn_step, readout, 40, 5)))
    a, b = g_opt(params, h0, xs), g_rev(params, h0, xs)
    for k in params:
        np.testing.assert_array_equal(a[k], b[k])


def test_optimal_loop_from_costs_and_budget_and_repeated_vjp():
    params, h0, xs = make_rnn(np.random.default_rng(4), 15)
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=h0.nbytes, tape_bytes=500)
    loop = binomial_checkpoint(
        rnn_step, readout, 15, strategy="optimal", costs=costs, budget_bytes=3 * 120 + 1500
    )
    assert loop.plan.prediction.tapes_kept > 0
    ref = plain_loop(rnn_step, readout, 15)
    J = autograd.jacobian(lambda h: loop(params, h, xs)[-2:].ravel())(h0)
    J_ref = autograd.jacobian(lambda h: ref(params, h, xs)[-2:].ravel())(h0)
    assert rel_err(J, J_ref) <= 1e-12


def test_optimal_strategy_errors_are_one_line():
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=120, tape_bytes=500)
    plan = plan_optimal(costs, 10, 2000)
    with pytest.raises(ValueError, match="needs a plan"):
        binomial_checkpoint(rnn_step, readout, 10, 3, strategy="optimal")
    with pytest.raises(ValueError, match="10 steps, not steps=11"):
        binomial_checkpoint(rnn_step, readout, 11, plan=plan)
    with pytest.raises(ValueError, match="not uniform"):
        binomial_checkpoint(rnn_step, readout, 10, strategy="uniform", plan=plan)
    with pytest.raises(ValueError, match="go together"):
        binomial_checkpoint(rnn_step, readout, 10, costs=costs)
    with pytest.raises(ValueError, match="needs snaps"):
        binomial_checkpoint(rnn_step, readout, 10)


def test_revolve_phase_timers_cover_the_executor():
    params, h0, xs = make_rnn(np.random.default_rng(0), 200)
    loop = binomial_checkpoint(rnn_step, readout, 200, 7)
    autograd.grad(loss_of(loop))(params, h0, xs)
    st = loop.stats
    assert st.advance_time_s > 0 and st.taped_time_s > 0 and st.bookkeeping_time_s > 0
    assert st.other_time_s >= 0
    assert st.tapes_kept == st.tapes_kept_peak == st.tape_bytes == 0
    assert st.peak_stored_bytes == st.peak_snapshot_bytes  # tapes undeclared: 0 bytes


def test_declared_tape_bytes_make_revolve_peaks_comparable_with_plans():
    params, h0, xs = make_rnn(np.random.default_rng(0), 100)
    costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=h0.nbytes, tape_bytes=700)
    loop = binomial_checkpoint(rnn_step, readout, 100, 10, tape_bytes=700)
    autograd.grad(loss_of(loop))(params, h0, xs)
    want = predict(schedule(100, 10), 100, costs).peak_bytes
    assert loop.stats.peak_stored_bytes == want == 10 * h0.nbytes + 700
    with pytest.raises(ValueError, match="tape_bytes must be >= 0"):
        binomial_checkpoint(rnn_step, readout, 100, 10, tape_bytes=-1)


def test_a_gradient_leaves_no_reference_cycle_holding_tapes():
    """The executor's helpers create no cycles: every taped step is freed by refcounting."""
    import gc

    from ckptbench.workloads import Sizes, load_workload

    wl = load_workload("lstm", Sizes(hidden=8, batch=2, input=3, output=1))
    params, state0, inputs = wl.init(40, np.random.default_rng(0))
    loop = binomial_checkpoint(wl.step, wl.post, 40, 5)
    grad = autograd.grad(lambda p: wl.loss(loop(p, state0, inputs)))
    gc.collect()
    gc.disable()
    try:
        grad(params)
        found = gc.collect()
    finally:
        gc.enable()
    assert found < 50, found  # a few frames at most; 1000s of VJPNodes before the fix
