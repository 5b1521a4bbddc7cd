"""The engine-driven JAX executor (``--executor engine``): what only a GPU would show,
guarded on the CPU.

A gradient performs no device-to-host transfer before it returns (the schedule never
depends on data, so the host never waits for the device), the executable calls per
gradient are a recorded counter and few (runs of advances in one call per set bit), and
the executor is chosen per case and recorded.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from _frameworks import needs

from ckptbench.results.schema import Case, CaseError, Mode, default_executor

pytestmark = needs("jax")

SMALL = {"hidden": 5, "batch": 2, "input": 3, "output": 2}
#: Steps of the fused-window tests: 8 to 10 windows, 14 kept tapes and 10 folded runs in the
#: plan, as at 90 steps (9-11 windows) in half the compilation time.
FUSED_STEPS = 45


def _problem(steps: int):
    from ckptbench.backends.jax import require_jax

    jax = require_jax()
    from ckptbench.backends.jax.workloads import JaxLSTM

    wl = JaxLSTM(**SMALL)
    return jax, wl, *jax.device_put(wl.init(steps, np.random.default_rng(0)))


@contextlib.contextmanager
def no_host_reads(jax):
    """JAX's device-to-host transfer guard (which bites on a GPU; on the CPU a device array
    already is host memory, so it never fires there) and, so the CPU checks nearly the same,
    the paths by which a ``jax.Array``'s value reaches Python counted (``_value``, behind
    ``float``, ``bool``, ``item``, ``tolist``, ``device_get``, and ``__array__``; numpy's
    buffer protocol on a CPU array is not seen)."""
    from jax._src.array import ArrayImpl

    reads: list[tuple] = []
    value, array = ArrayImpl._value, ArrayImpl.__array__

    def read_value(self):
        reads.append(self.shape)
        return value.fget(self)

    def read_array(self, *args, **kwargs):
        reads.append(self.shape)
        return array(self, *args, **kwargs)

    ArrayImpl._value, ArrayImpl.__array__ = property(read_value), read_array
    try:
        with jax.transfer_guard_device_to_host("disallow"):
            yield reads
    finally:
        ArrayImpl._value, ArrayImpl.__array__ = value, array


def _plan(state0):
    """A plan of FUSED_STEPS that keeps tapes (in runs, which fused windows fold)."""
    from ckptbench.schedules.optimal.planner import Costs, plan_optimal

    sb = sum(a.nbytes for a in state0)
    return plan_optimal(Costs(1.0, 3.0, sb, 4 * sb), FUSED_STEPS, 6 * sb + 8 * sb)


#: The two streams the fused-window tests run: Revolve's and a plan's that keeps tapes.
STREAMS = ("revolve", "plan")


@pytest.fixture(scope="module")
def loops():
    """The engine loops of FUSED_STEPS (Revolve with 6 snapshots, the plan) unfused (span
    0) and fused (span 16), each compiled by one gradient, for the tests that only run
    them again: compiling them is most of this file's time. ``segments[stream, span]``:
    the runs of kept tapes :func:`~ckptbench.backends.jax.fusion.tape_runs` folded while
    compiling the loop's windows. A test that compiles more into a loop (another variant)
    puts the loop's compiled windows back afterwards (``monkeypatch``)."""
    from ckptbench.backends.jax import fusion
    from ckptbench.backends.jax.dispatch import engine_checkpoint

    jax, wl, params, state0, inputs = _problem(FUSED_STEPS)
    plan = _plan(state0)
    real, built, segments = fusion.tape_runs, {}, {}
    with pytest.MonkeyPatch.context() as patch:
        for stream in STREAMS:
            kwargs = {"plan": plan} if stream == "plan" else {"snaps": 6, "strategy": "revolve"}
            for span in (0, 16):
                folded: list = []

                def counting(nodes, wanted, folded=folded):
                    grouped = real(nodes, wanted)
                    folded.extend(g for g in grouped if g[0] == "segment")
                    return grouped

                patch.setattr(fusion, "tape_runs", counting)
                loop = engine_checkpoint(wl.step, wl.post, FUSED_STEPS, fuse_span=span, **kwargs)
                jax.block_until_ready(loop.value_and_grad(wl.loss, params, state0, inputs))
                built[stream, span], segments[stream, span] = loop, len(folded)
    return SimpleNamespace(
        jax=jax, wl=wl, args=(params, state0, inputs), plan=plan, loop=built, segments=segments
    )


def test_a_gradient_reads_nothing_back_before_it_returns(loops):
    jax, wl = loops.jax, loops.wl
    assert loops.plan.prediction.tapes_kept > 0  # kept tapes held as device arrays, too
    for (_, span), loop in loops.loop.items():  # unfused and fused windows, both streams
        assert bool(loop._ex.fused) == (span > 0)
        with no_host_reads(jax) as reads:  # compiled by the fixture (it read shapes only)
            value, (gp, gs, gx) = loop.value_and_grad(wl.loss, *loops.args)
            assert reads == []
            jax.block_until_ready((value, gp, gs, gx))
            assert reads == []
            # the check itself sees a read: counted on the CPU, refused by the guard on a GPU
            try:
                float(value)
            except jax.errors.JaxRuntimeError as refused:
                assert "Disallowed device-to-host transfer" in str(refused)
            else:
                assert len(reads) == 1
        assert np.isfinite(float(value))


def test_the_dispatches_per_gradient_are_counted_and_few():
    from ckptbench.backends.jax.dispatch import engine_checkpoint
    from ckptbench.backends.jax.step_ops import pieces as _pieces
    from ckptbench.schedules import ActionKind, make_schedule

    assert _pieces(1000) == [512, 256, 128, 64, 32, 8]
    assert _pieces(1) == [1] and _pieces(0) == []
    _, wl, params, state0, inputs = _problem(200)
    loop = engine_checkpoint(wl.step, wl.post, 200, 9, "revolve", fuse_span=0)
    loop.value_and_grad(wl.loss, params, state0, inputs)
    # unfused: setup + loss, one call per set bit of every advance, one per turn,
    # FIRSTURN's tape and reverse
    want = 2 + 2
    for act in make_schedule("revolve", 200, 9):
        if act.kind is ActionKind.ADVANCE:
            want += len(_pieces(act.stop - act.start))
        elif act.kind is ActionKind.YOUTURN:
            want += 1
    assert loop.dispatches == want
    assert loop.dispatches < loop.stats.step_evaluations


def test_the_executor_is_chosen_per_case_recorded_and_refused_where_it_cannot_run():
    assert default_executor("jax", "cpu") == "compiled"
    assert default_executor("jax", "cuda") == "engine"
    assert default_executor("torch", "cpu") == "engine"
    base = Case(backend="jax")
    assert base.executor_used == "compiled"
    # the default executor does not change a case's key (results from before it exist)
    assert Case(backend="jax", executor="compiled").key == base.key
    engine = Case(backend="jax", executor="engine")
    assert engine.key != base.key and "-engine-" in engine.key
    assert Case.from_dict(engine.to_dict()).executor_used == "engine"
    with pytest.raises(CaseError, match="--executor compiled needs --backend jax"):
        Case(backend="torch", executor="compiled")
    with pytest.raises(CaseError, match="unknown executor 'fast'"):
        Case(backend="jax", executor="fast")


def _unfused_dispatches(actions) -> int:
    from ckptbench.backends.jax.step_ops import pieces as _pieces
    from ckptbench.schedules import ActionKind

    calls = 0
    for act in actions:
        if act.kind is ActionKind.ADVANCE:
            calls += len(_pieces(act.stop - act.start))
        elif act.kind in (ActionKind.YOUTURN, ActionKind.TAPE, ActionKind.REVERSE):
            calls += 1
    return calls


@pytest.mark.parametrize("span", [1, 4, 16])
def test_fused_windows_give_the_unfused_gradient_counters_and_bytes_in_fewer_calls(loops, span):
    from ckptbench.backends.jax.dispatch import engine_checkpoint
    from ckptbench.backends.jax.fusion import fusion_windows
    from ckptbench.schedules import make_schedule

    jax, wl = loops.jax, loops.wl
    for stream in STREAMS:
        kwargs = {"plan": loops.plan} if stream == "plan" else {"snaps": 6, "strategy": "revolve"}
        plain = loops.loop[stream, 0]
        fused = loops.loop.get((stream, span))
        if fused is None:
            fused = engine_checkpoint(wl.step, wl.post, FUSED_STEPS, fuse_span=span, **kwargs)
        want = plain.value_and_grad(wl.loss, *loops.args)
        got = fused.value_and_grad(wl.loss, *loops.args)
        leaves = zip(jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True)
        for w, g in leaves:
            w, g = np.asarray(w), np.asarray(g)
            assert np.max(np.abs(g - w)) <= 1e-12 * max(1.0, float(np.max(np.abs(w))))
        # the engine's bookkeeping runs unchanged (its host clocks aside)
        untimed = {"advance_time_s": 0.0, "taped_time_s": 0.0, "bookkeeping_time_s": 0.0}
        assert replace(fused.stats, **untimed) == replace(plain.stats, **untimed)
        actions = list(fused.schedule.actions())
        first, windows = fusion_windows(actions, FUSED_STEPS, span)
        assert windows and first < min(windows)
        inside = {k for start, end in windows.items() for k in range(start, end + 1)}
        outside = [a for k, a in enumerate(actions) if k > first and k not in inside]
        # setup, the first sweep, the loss, FIRSTURN's reverse, each window, the rest
        assert fused.dispatches == 4 + len(windows) + _unfused_dispatches(outside)
        assert fused.dispatches < plain.dispatches
        # a second gradient compiles nothing more and gives the same
        compiled = len(fused._ex.fused)
        again = fused.value_and_grad(wl.loss, *loops.args)
        assert len(fused._ex.fused) == compiled <= len(windows) + 1  # + the first sweep
        np.testing.assert_array_equal(np.asarray(again[0]), np.asarray(got[0]))
    assert make_schedule  # the stream the windows were read from is the strategy's own


def _compiled_programs(loop) -> list:
    """Every executable the engine loop compiled: the fused windows and the step pieces."""
    from ckptbench.backends.jax import dispatch

    found = list(loop._ex.fused.values())
    for value in vars(loop._ex).values():
        pieces = value.values() if isinstance(value, dict) else [value]
        for piece in pieces:
            if isinstance(piece, dispatch._Aot):
                found += piece.compiled.values()
    return found


@pytest.mark.parametrize("span", [0, 16])
def test_every_loop_the_engine_compiles_has_a_known_trip_count_and_nothing_branches(loops, span):
    """What a GPU would pay for: XLA copies the predicate of a while loop whose trip count
    it cannot prove back to the host at every iteration, and a conditional's too. Every
    program the engine runs (the step pieces, every fused window) is read in its optimised
    HLO: each while loop carries XLA's known trip count, and there is no conditional."""
    import re

    whiles = 0
    for stream in STREAMS:
        loop = loops.loop[stream, span]  # compiled by one gradient
        programs = _compiled_programs(loop)
        assert len(programs) > 5 and (span == 0) == (not loop._ex.fused)
        for program in programs:
            text = program.as_text()
            found = re.findall(r"= .*\bwhile\(.*", text)
            assert all("known_trip_count" in line for line in found), found
            assert not re.search(r"= .*\bconditional\(", text)
            whiles += len(found)
    assert whiles > 0  # the scans are loops the check saw


def _optimal_stream(steps: int):
    from ckptbench.schedules.optimal.planner import Costs, plan_optimal

    # a plan that keeps tapes in long runs (what the cut every span reversals is for)
    return list(plan_optimal(Costs(1.0, 6.0, 1000, 5000), steps, 300 * 1000).actions())


@pytest.mark.parametrize(
    ("strategy", "steps", "snaps", "span"),
    [("revolve", 300, 7, 8), ("revolve", 1000, 31, 32), ("optimal", 400, None, 16)],
)
def test_fusion_windows_cover_the_reverse_sweep_in_few_calls_that_repeat(
    strategy, steps, snaps, span
):
    from ckptbench.backends.jax.fusion import fusion_windows
    from ckptbench.schedules import ActionKind, make_schedule, replay

    if strategy == "optimal":
        actions = _optimal_stream(steps)
        assert sum(a.kind is ActionKind.REVERSE for a in actions) > steps // 2
    else:
        actions = list(make_schedule(strategy, steps, snaps))
        replay(actions, steps, snaps)
    first, windows = fusion_windows(actions, steps, span)
    assert actions[first].kind is ActionKind.FIRSTURN
    assert fusion_windows(actions, steps, 0) == (first, {})
    reversing = (ActionKind.YOUTURN, ActionKind.REVERSE)
    covered: list[int] = []
    signatures = set()
    window_of = {k: start for start, end in windows.items() for k in range(start, end + 1)}
    longest = 0
    for k, act in enumerate(actions):  # every run of kept tapes (tape a..b-2, turn b-1,
        m = 0  # reverse b-2..a, one after the other) lies in one window: it can be folded
        while k > first and actions[k + m].kind is ActionKind.TAPE:
            m += 1
        run = actions[k : k + 2 * m + 1]
        if m and [(a.kind, a.step) for a in run] == [
            *((ActionKind.TAPE, act.step + q) for q in range(m)),
            (ActionKind.YOUTURN, act.step + m),
            *((ActionKind.REVERSE, act.step + m - 1 - q) for q in range(m)),
        ]:
            assert window_of.get(k) == window_of.get(k + 2 * m) is not None
            longest = max(longest, m + 1)
    for start, end in sorted(windows.items()):
        assert covered == [] or start > covered[-1]  # disjoint, in stream order
        covered += range(start, end + 1)
        turns = [a.step for a in actions[start : end + 1] if a.kind in reversing]
        assert len(turns) <= span + longest  # a cut waits for the end of a run
        assert turns == list(range(turns[0], turns[-1] - 1, -1)) if turns else True
        low = min(a.step for a in actions[start : end + 1] if a.step is not None)
        signatures.add(
            tuple(
                (a.kind, None if a.step is None else a.step - low) for a in actions[start : end + 1]
            )
        )
    # every action that tapes or reverses is inside a window (a stretch of advances alone
    # runs unfused); every step is reversed once
    outside = [a for k, a in enumerate(actions) if k > first and k not in set(covered)]
    assert {a.kind for a in outside} <= {
        ActionKind.RESTORE,
        ActionKind.TAKESHOT,
        ActionKind.ADVANCE,
        ActionKind.TERMINATE,
    }
    for start, end in windows.items():
        assert any(a.kind in (*reversing, ActionKind.TAPE) for a in actions[start : end + 1])
    reversed_steps = [a.step for k in covered for a in [actions[k]] if a.kind in reversing]
    assert sorted(reversed_steps) == list(range(steps - 1))
    assert len(windows) <= 2 * steps // span  # few calls
    assert len(signatures) < len(windows)  # that repeat


@pytest.mark.parametrize("span", [None, 8])
def test_the_worker_runs_the_engine_executor_and_counts_its_dispatches(monkeypatch, span):
    from ckptbench.backends import registry
    from ckptbench.backends.jax.dispatch import JaxEngineLoop

    if span is not None:  # fusion is on by default on an accelerator only: force it here
        monkeypatch.setattr(JaxEngineLoop, "span_on", lambda self, platform: span)
    case = Case(backend="jax", executor="engine", steps=20, snaps=5, seed=3, **SMALL)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    normal = registry.build(case, Mode.NORMAL)
    want = normal.flatten(normal.gradient(normal.params)[1])
    got = ckpt.flatten(ckpt.gradient(ckpt.params)[1])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
    counters = ckpt.counters()
    assert 0 < counters["dispatches"] < ckpt.calls[0]
    assert counters["steps_advanced"] + counters["steps_taped"] == ckpt.calls[0]
    assert (counters["fused_programs"] > 0) == (span is not None)
    assert ckpt.phases() == {}  # host clocks around asynchronous dispatches: left out


def test_fusion_is_on_by_default_on_an_accelerator_only():
    from ckptbench.backends.jax.dispatch import JaxEngineLoop
    from ckptbench.backends.jax.fusion import DEFAULT_SPAN

    loop = JaxEngineLoop(lambda p, s, x: s, lambda p, s: s, 40, 5, "revolve")
    assert loop.span_on("cpu") == 0 and loop.span_on("gpu") == DEFAULT_SPAN > 0
    forced = JaxEngineLoop(lambda p, s, x: s, lambda p, s: s, 40, 5, "revolve", fuse_span=4)
    assert forced.span_on("cpu") == 4 and forced.span_on("gpu") == 4


def _record(nodes: list[tuple]) -> list[tuple]:
    return [(kind, static, tuple(refs), offset) for kind, static, refs, offset in nodes]


def _tape_run_record(m: int) -> list[tuple]:
    """A window's record: an advance, ``m`` kept tapes from its state, the next step's
    turn, the tapes reversed last first (what a plan keeping tapes records)."""
    p, xs, g, inv, sbar, pbar, xsbar = (("in", k) for k in range(7))
    nodes = [("advance", (3, False), (p, ("in", 7), xs), 0)]
    for k in range(m):
        state = ("node", k, 0) if k == 0 else ("node", k, 1)
        nodes.append(("tape", (False, False), (p, state, xs), 3 + k))
    nodes.append(("turn", (), (p, ("node", m, 1), xs, g, sbar, pbar, xsbar), 3 + m))
    for k in range(m - 1, -1, -1):
        last = len(nodes) - 1
        cot = tuple(("node", last, q) for q in range(3))
        nodes.append(("reverse", (), (p, ("node", 1 + k, 0), inv, xs, g, *cot), 3 + k))
    return _record(nodes)


def test_a_window_folds_each_run_of_kept_tapes_it_reverses_into_one_segment():
    from ckptbench.backends.jax.fusion import tape_runs

    nodes = _tape_run_record(4)
    last = len(nodes) - 1
    wanted = [("node", last, q) for q in range(3)]
    grouped = tape_runs(nodes, wanted)
    assert [g[0] for g in grouped] == ["advance", "segment"]
    static, refs, offset, named = grouped[1][1:]
    # five steps from the advance's state, named after the last reverse's outputs
    assert static == (5,) and offset == 3 and named == last
    assert refs == (
        ("in", 0),
        ("node", 0, 0),
        ("in", 1),
        ("in", 2),
        ("in", 4),
        ("in", 5),
        ("in", 6),
    )
    # a tape the window must hand out (still held by the engine) is not folded: the run
    # after it is (steps 5-7: two tapes and the turn), the rest stays operation by operation
    kept = tape_runs(nodes, [*wanted, ("node", 2, 0)])
    assert [g[0] for g in kept] == ["advance", "tape", "tape", "segment", "reverse", "reverse"]
    assert kept[3][1] == (3,) and kept[3][3] == 5 and kept[3][2][1] == ("node", 2, 1)
    # a tape reversed outside the window stays a tape; the run after it is folded
    cut = tape_runs(nodes[:-1], [("node", 1, 0), *(("node", last - 1, q) for q in range(3))])
    assert [g[0] for g in cut] == ["advance", "tape", "segment"] and cut[2][1] == (4,)


@pytest.mark.parametrize("inputs_grad", [True, False])
def test_folded_runs_give_the_unfolded_gradient(monkeypatch, loops, inputs_grad):
    from ckptbench.backends.jax import fusion

    jax, wl = loops.jax, loops.wl
    loop = loops.loop["plan", 16]  # its folded windows compiled (with the input cotangent)
    monkeypatch.setattr(loop._ex, "fused", dict(loop._ex.fused))  # what this test compiles
    folded = []
    real = fusion.tape_runs

    def counting(nodes, wanted):
        grouped = real(nodes, wanted)
        folded.extend(g for g in grouped if g[0] == "segment")
        return grouped

    monkeypatch.setattr(fusion, "tape_runs", counting)
    results = {}
    for fold in (True, False):
        folded.clear()
        monkeypatch.setattr(loop, "fold_runs", fold)
        results[fold] = loop.value_and_grad(wl.loss, *loops.args, inputs_grad=inputs_grad)
        compiled_before = fold and inputs_grad  # by the fixture, counted there
        assert bool(loops.segments["plan", 16] if compiled_before else folded) == fold
        assert any(key[1] == fold for key in loop._ex.fused)  # folded or not: two programs
    pairs = zip(*(jax.tree_util.tree_leaves(results[f]) for f in (True, False)), strict=True)
    for a, b in pairs:
        a, b = np.asarray(a), np.asarray(b)
        assert np.max(np.abs(a - b)) <= 1e-12 * max(1.0, float(np.max(np.abs(b))))
    assert (results[True][1][2] is None) == (not inputs_grad)


@pytest.mark.parametrize(("executor", "span", "method"), [
    ("engine", 4, "plain-gradient"), ("engine", 0, "store-all"), ("compiled", 0, "store-all"),
])  # fmt: skip
def test_fused_engine_costs_come_from_the_plain_gradient(monkeypatch, executor, span, method):
    from ckptbench.backends.jax.costs import measure_jax_costs
    from ckptbench.backends.jax.dispatch import JaxEngineLoop
    from ckptbench.schedules.optimal import Costs

    monkeypatch.setattr(JaxEngineLoop, "span_on", lambda self, platform: span)
    case = Case(model="lstm", steps=12, snaps=3, backend="jax", executor=executor, **SMALL)
    doc = measure_jax_costs(case, samples=1)
    assert doc["taped_method"] == method and doc["executor"] == executor
    costs = Costs.from_dict(doc["costs"])
    # a taped step + reverse is never charged less than an untaped step
    assert costs.taped_time_s >= costs.forward_time_s > 0


_COMPILES: list[list[str]] = []


def _count_compiles(name: str, _secs: float, **_kw) -> None:
    if _COMPILES and "backend_compile" in name:
        _COMPILES[-1].append(name)


@pytest.mark.parametrize("kind", ["recurrence", "fused", "chain"])
def test_a_gradient_compiles_nothing_once_its_pieces_are_compiled(loops, kind):
    """The worker compiles every piece in one gradient, then calls ``jax.clear_caches()``:
    a later gradient that compiled anything (an eager op outside the pieces) would put
    compilation into a measured iteration's time and peak (it did for chains: 0.27 s and
    12 MiB in the first iteration of a 6-layer mlp-stack)."""
    jax = loops.jax
    if kind == "chain":
        from ckptbench.backends.jax.chain import chain_checkpoint
        from ckptbench.backends.jax.workloads import load_jax_workload
        from ckptbench.workloads import Sizes

        wl = load_jax_workload("mlp-stack", Sizes(hidden=8, batch=4, input=5, output=3), "float64")
        layers, x0 = wl.init(6, np.random.default_rng(0))
        loop = chain_checkpoint(wl.layer, 6, 2, "revolve")

        def gradient():
            return loop.value_and_grad(wl.loss, layers, x0)
    else:  # Revolve's stream unfused or in fused windows, compiled by the fixture's gradient
        recurrence = loops.loop["revolve", 16 if kind == "fused" else 0]

        def gradient():
            return recurrence.value_and_grad(loops.wl.loss, *loops.args)

    jax.monitoring.register_event_duration_secs_listener(_count_compiles)
    jax.block_until_ready(gradient())
    jax.clear_caches()
    _COMPILES.append([])
    try:
        jax.block_until_ready(gradient())
    finally:
        compiled = _COMPILES.pop()
    assert compiled == []
