"""``run --trace``: the engine's per-action rows against ``replay_bytes``, the worker's
traced iteration, the CLI and one real run (see docs/trace.md)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ckptbench.engine.trace import TraceRecorder
from ckptbench.schedules import make_schedule, replay_bytes
from ckptbench.schedules.optimal import Costs, plan_optimal
from ckptbench.workloads import Sizes, load_workload

SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}
TAPE_BYTES = 700
STEPS = 20


def _autograd(plan=None, snaps=4):
    import autograd
    import autograd.numpy as anp

    from ckptbench.backends.autograd.binding import binomial_checkpoint

    wl = load_workload("lstm", Sizes(**SMALL))
    params, state0, inputs = wl.init(STEPS, np.random.default_rng(0))
    if plan is None:
        loop = binomial_checkpoint(wl.step, wl.post, STEPS, snaps, tape_bytes=TAPE_BYTES)
    else:
        loop = binomial_checkpoint(wl.step, wl.post, STEPS, plan=plan)

    def run():
        autograd.grad(lambda p: anp.sum(loop(p, state0, inputs)))(params)

    return loop, run


def _torch(plan=None, snaps=4):
    import torch

    from ckptbench.backends.torch.binding import revolve_checkpoint
    from ckptbench.backends.torch.workloads import TorchLSTM

    wl = TorchLSTM(**SMALL)
    params, state0, inputs = wl.init(STEPS, np.random.default_rng(0))
    params = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
    if plan is None:
        loop = revolve_checkpoint(wl.step, wl.post, STEPS, snaps, tape_bytes=TAPE_BYTES)
    else:
        loop = revolve_checkpoint(wl.step, wl.post, STEPS, plan=plan)

    def run():
        torch.sum(loop(params, state0, inputs)).backward()

    return loop, run


BINDINGS = [
    pytest.param(_autograd, id="autograd"),
    pytest.param(
        _torch,
        id="torch",
        marks=pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch"),
    ),
]


def _state_bytes() -> int:
    wl = load_workload("lstm", Sizes(**SMALL))
    _, state0, _ = wl.init(STEPS, np.random.default_rng(0))
    return sum(s.nbytes for s in state0)


@pytest.mark.parametrize("make", BINDINGS)
@pytest.mark.parametrize("planned", [False, True], ids=["revolve", "optimal"])
def test_the_trace_plans_the_bytes_replay_bytes_counts_per_action(make, planned):
    sb = _state_bytes()
    if planned:
        costs = Costs(forward_time_s=1.0, taped_time_s=3.0, state_bytes=sb, tape_bytes=TAPE_BYTES)
        plan = plan_optimal(costs, STEPS, 3 * sb + 2 * TAPE_BYTES)
        actions, loop_run = plan.actions(), make(plan=plan)
    else:
        actions, loop_run = make_schedule("revolve", STEPS, 4), make()
    loop, run = loop_run
    rec = TraceRecorder()
    loop.recorder = rec
    run()
    want = replay_bytes(actions, STEPS, sb, TAPE_BYTES, per_action=True)
    assert [r["index"] for r in rec.rows] == list(range(want.stats.actions))
    assert [r["planned_bytes"] for r in rec.rows] == list(want.action_bytes)
    assert max(want.action_bytes) == want.peak_bytes == loop.stats.peak_stored_bytes
    assert rec.rows[-1]["kind"] == "TERMINATE" and rec.rows[-1]["planned_bytes"] == 0
    kinds = {r["kind"]: r for r in rec.rows}
    assert kinds["TAKESHOT"]["stored"].startswith("x_")
    assert kinds["YOUTURN"]["taped"].endswith("(reversed)")
    assert any(r["recomputed"] for r in rec.rows)
    if planned:
        assert kinds["TAPE"]["taped"].endswith("(kept)") and "tape" in kinds["REVERSE"]["freed"]


def test_without_a_recorder_the_engine_records_nothing():
    loop, run = _autograd()
    run()
    assert loop.recorder is None and loop.stats.peak_stored_bytes > 0


def test_replay_bytes_keeps_no_trail_unless_asked():
    r = replay_bytes(make_schedule("revolve", 9, 3), 9, 10, 5)
    assert r.action_bytes == ()
    assert max(replay_bytes(make_schedule("revolve", 9, 3), 9, 10, 5, per_action=True)
               .action_bytes) == r.peak_bytes  # fmt: skip
