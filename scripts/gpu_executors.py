"""Issue 22's GPU figures in one process, about two minutes: JAX's executors against plain
``jax.grad``, the forward-only floor and ``jax.checkpoint``; torch's executor against its
floor and ``torch.utils.checkpoint`` (row 9: its one-call executor). Run by scripts/gpu-check.sh
(docs/gpu.md).

Every gradient is built (and compiled) as the worker builds it, run once as a warm-up, then
timed ``--repeats`` times to the end of its result (block_until_ready / cuda.synchronize,
inside ``gradient``); the median is printed with the floor: plain + (evaluations - steps)
x the baseline's time per step. Also works on the CPU (``--device cpu``), for comparison.

Optimal rows of one size plan from one set of step costs (measured by the first such row,
or read from ``--costs FILE``), so rows that differ only in the executor's settings run the
same plan (each row prints its plan's fingerprint). ``--profile`` adds, for each JAX engine
row, one gradient run call by call, each call waited for: its device time beside what the
step costs predict for the operations it ran (where the time a plan takes beyond its
prediction goes, window by window); for each torch row, one checkpointed and one plain
gradient under ``torch.profiler``: the operations and runtime calls that take the most
host time, with their counts.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import statistics
import time
from pathlib import Path

from ckptbench.backends import registry
from ckptbench.engine.trace_time import predicted_seconds
from ckptbench.results.schema import Case, Mode
from ckptbench.schedules import Action, ActionKind
from ckptbench.schedules.optimal import Costs, costs_from_json

ROWS = [
    # backend, dtype, hidden, batch, strategy, snaps, executor, budget
    ("jax", "float64", 256, 16, "revolve", 31, "engine", None),
    ("jax", "float64", 256, 16, "revolve", 31, "compiled", None),
    ("jax", "float64", 256, 16, "optimal", 1000, "engine", 19988480),
    ("jax", "float64", 256, 16, "jax-checkpoint", 31, None, None),
    ("jax", "float64", 1024, 64, "revolve", 31, "engine", None),
    ("jax", "float64", 1024, 64, "jax-checkpoint", 31, None, None),
    ("torch", "float32", 1024, 64, "revolve", 31, None, None),
    ("torch", "float32", 1024, 64, "optimal", 1000, None, 109060096),
    ("torch", "float32", 1024, 64, "torch-checkpoint", 31, None, None),
    ("torch", "float32", 1024, 64, "revolve", 31, "one-call", None),
]


def _time(built, repeats: int) -> float:
    built.gradient(built.params)  # warm-up
    times = []
    for _ in range(repeats):
        built.calls[0] = 0  # one gradient's step evaluations, as the worker counts them
        t0 = time.perf_counter()
        built.gradient(built.params)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: A recorded operation's action (an advance's is ADVANCE, with its steps).
_TAPED_KIND = {"tape": ActionKind.TAPE, "turn": ActionKind.YOUTURN, "reverse": ActionKind.REVERSE}


def _window_actions(nodes: list, indices: list) -> list[Action]:
    """A fused window's recorded operations as the schedule actions they ran."""
    out = []
    for (kind, static, _), i in zip(nodes, indices, strict=True):
        if kind == "advance":
            out.append(Action(ActionKind.ADVANCE, start=i, stop=i + static[0]))
        else:
            out.append(Action(_TAPED_KIND[kind], step=i))
    return out


@contextlib.contextmanager
def _call_by_call(costs: dict, steps: int):
    """The JAX engine's step operations, each call waited for and timed: yields the list
    the records go to (``[what, operations, reversals, measured s, predicted s, key]``; a
    window's key names its program, so repetitions can be grouped). A call's prediction is
    what the cost model charges its actions, as ``run --trace`` does
    (:func:`ckptbench.engine.trace_time.predicted_seconds`: an untaped step its forward
    cost, a tape or turn its taped cost, a reverse nothing; the readouts and the loss are
    the plan's fixed time, charged to no call). The loop's set-up and loss calls are not
    hooked: their time falls to the next call."""
    import jax

    from ckptbench.backends.jax.step_ops import JaxStepOps

    priced = Costs.from_dict(costs)
    records: list[list] = []
    real = {n: getattr(JaxStepOps, n) for n in ("flush", "advance", "tape", "_reverse")}

    def timed(what: str, actions: list[Action], key: str, call) -> object:
        t0 = time.perf_counter()
        out = call()
        jax.block_until_ready(out)
        took = time.perf_counter() - t0
        turns = sum(a.kind in (ActionKind.YOUTURN, ActionKind.REVERSE) for a in actions)
        predicted = math.fsum(predicted_seconds(actions, priced, steps))
        records.append([what, len(actions), turns, took, predicted, key])
        return out

    def flush(self) -> None:
        w = self.window
        if w is None or not w.nodes:
            return real["flush"](self)
        outputs, actions = w.live(), _window_actions(w.nodes, w.indices)
        key = hashlib.sha1(repr(w.program_key(outputs)).encode()).hexdigest()[:8]

        def call() -> list:
            real["flush"](self)
            return [o.value for o in outputs]

        timed("window", actions, key, call)
        return None

    def eager(name: str, action):  # one unfused operation, timed alone
        def op(self, *args):
            if self.window is not None:
                return real[name](self, *args)
            act = action(args)
            what = act.kind.value
            return timed(what, [act], what, lambda: real[name](self, *args))

        return op

    JaxStepOps.flush = flush
    # advance(state, start, stop, outputs); tape(state, i, outputs); _reverse(kind, fn,
    # args, i) runs a reverse or a turn
    JaxStepOps.advance = eager(
        "advance", lambda a: Action(ActionKind.ADVANCE, start=a[1], stop=a[2])
    )
    JaxStepOps.tape = eager("tape", lambda a: Action(ActionKind.TAPE, step=a[1]))
    JaxStepOps._reverse = eager("_reverse", lambda a: Action(_TAPED_KIND[a[0]], step=a[3]))
    try:
        yield records
    finally:
        for name, fn in real.items():
            setattr(JaxStepOps, name, fn)


def _profile(built, costs: dict, steps: int, gradient_s: float) -> dict:
    """One gradient call by call (see :func:`_call_by_call`), summed and grouped."""
    built.gradient(built.params)  # nothing left in flight
    t0 = time.perf_counter()
    with _call_by_call(costs, steps) as records:
        built.gradient(built.params)
    serial = time.perf_counter() - t0
    by_key: dict[str, list] = {}
    for what, ops, turns, took, pred, key in records:
        group = by_key.setdefault(key, [what, ops, turns, 0, 0.0, 0.0])
        group[3] += 1
        group[4] += took
        group[5] += pred
    return {
        "gradient_s": gradient_s, "serial_s": serial, "calls_timed": len(records),
        "measured_sum_s": sum(r[3] for r in records),
        "predicted_sum_s": sum(r[4] for r in records),
        "by_program": sorted(
            ([k, *g] for k, g in by_key.items()), key=lambda g: g[5] - g[6], reverse=True
        ),  # [key, what, operations, reversals, calls, measured s, predicted s]
        "calls": [[*r[:3], round(r[3], 7), round(r[4], 7), r[5]] for r in records],
    }  # fmt: skip


def _torch_profile(built, top: int = 30) -> list:
    """One torch gradient under ``torch.profiler`` (host and, on CUDA, device activity): the
    ``top`` operations and runtime calls by self host time, each [name, calls, self host
    µs, self device µs]: where a torch gradient's host time goes, and how much of the
    device's time its kernels take."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    built.gradient(built.params)
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    with profile(activities=acts) as prof:
        built.gradient(built.params)
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    return [
        [e.key, e.count, round(e.self_cpu_time_total, 1),
         round(getattr(e, "self_device_time_total", 0.0) or 0.0, 1)]
        for e in rows[:top]
    ]  # fmt: skip


def _fingerprint(actions) -> str:
    return hashlib.sha1(repr([tuple(a) for a in actions]).encode()).hexdigest()[:12]


def _row_span(item: str, default_span: int) -> tuple[int, int, bool | None, bool]:
    row, span, fold, rest, *_ = (*item.split(":"), "", "", "")
    return (
        int(row), int(span) if span else default_span,
        None if fold == "" else fold != "0", rest != "0",
    )  # fmt: skip


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--only", default="",
        help="comma-separated rows in the order to run, each ROW[:SPAN[:FOLD[:REST]]]: the "
        "JAX engine executor's fused-window span (0: unfused; default: the executor's), "
        "whether runs of kept tapes are folded (1/0, default: the executor's) and whether "
        "the reverse sweep outside Revolve's segments is fused (1/0, default 1)",
    )  # fmt: skip
    ap.add_argument(
        "--costs", type=Path, default=None,
        help="a costs file (docs/planner.md) every optimal row plans from, instead of the "
        "costs the first optimal row of each size measures",
    )  # fmt: skip
    ap.add_argument(
        "--profile", action="store_true",
        help="for each JAX engine row, one more gradient call by call (each call waited "
        "for); for each torch row, one checkpointed and one plain gradient under "
        "torch.profiler (the operations that take the most host time)",
    )  # fmt: skip
    args = ap.parse_args()
    args.costs_doc = None
    if args.costs is not None:
        try:  # one line and exit status 2, as the CLI's --costs
            args.costs_doc = costs_from_json(args.costs.read_text()).as_dict()
        except (OSError, ValueError) as err:
            ap.error(f"--costs {args.costs}: {err}")
    return args


def main() -> None:
    args = _args()
    import ckptbench.backends.jax.dispatch as jax_dispatch

    default_span = jax_dispatch.DEFAULT_SPAN
    todo = [_row_span(i, default_span) for i in args.only.split(",") if i]
    todo = todo or [(k, default_span, None, True) for k in range(len(ROWS))]
    given = args.costs_doc
    plain: dict[tuple, tuple[float, float]] = {}
    measured: dict[tuple, dict] = {}  # the step costs of each size, measured once
    t_begin = time.perf_counter()
    for k, span, fold, rest in todo:
        backend, dtype, h, b, strategy, snaps, executor, budget = ROWS[k]
        jax_dispatch.JaxEngineLoop.span_on = lambda _self, _platform, span=span: span
        jax_dispatch.JaxEngineLoop.fold_runs = fold
        jax_dispatch.JaxEngineLoop.fuse_rest = rest
        case = Case(
            backend=backend, device=args.device, dtype=dtype, hidden=h, batch=b,
            steps=args.steps, snaps=min(snaps, args.steps), strategy=strategy,
            executor=executor, budget_bytes=budget,
        )  # fmt: skip
        size = (backend, dtype, h, b)
        t_start = time.perf_counter()
        if size not in plain:
            base = _time(registry.build(case, Mode.BASELINE), args.repeats)
            normal = _time(registry.build(case, Mode.NORMAL), args.repeats)
            plain[size] = (base, normal)
            print(json.dumps({"row": "plain", "size": size, "baseline_s": base, "plain_s": normal}))
        base, normal = plain[size]
        engine = backend == "jax" and case.executor_used == "engine"
        wants_costs = strategy == "optimal" or (args.profile and engine)
        if wants_costs and given is None and size not in measured:
            measured[size] = registry.measure_costs(case)
        doc = {"costs": given, "taped_method": "--costs"} if given else measured.get(size, {})
        costs = doc.get("costs") if strategy == "optimal" else None
        built = registry.build(case, Mode.CHECKPOINTED, costs)
        fingerprint = None
        if strategy == "optimal":
            from ckptbench.schedules import plan_from

            fingerprint = _fingerprint(
                plan_from(strategy, args.steps, costs=costs, budget_bytes=budget).actions()
            )
        if backend == "torch" and args.device == "cuda":
            import torch

            torch.cuda.reset_peak_memory_stats()
        t = _time(built, args.repeats)
        peak = None
        if backend == "torch" and args.device == "cuda":
            peak = torch.cuda.max_memory_allocated()
        evals = built.calls[0]
        floor = None if evals is None else normal + (evals - args.steps) * base / args.steps
        predicted = built.plan().get("predicted_time_s") if strategy == "optimal" else None
        counters = built.counters()
        print(json.dumps({
            "row": k, "size": size, "strategy": strategy, "snaps": snaps, "budget": budget,
            "executor": case.executor_used if strategy in ("revolve", "optimal") else None,
            "time_s": t, "vs_plain": t / normal, "evaluations": evals, "floor_s": floor,
            "vs_floor": None if floor is None else t / floor, "predicted_s": predicted,
            "plan": fingerprint, "dispatches": counters.get("dispatches"),
            "torch_peak_bytes": peak,
            "span": span if executor == "engine" else None, "fold": fold, "rest": rest,
            "taped_method": doc.get("taped_method") if costs else None, "costs": costs,
            **{c: counters.get(c) for c in ("fused_programs", "fused_temp_bytes")},
            "compile_s": (counters.get("compile_time_ns") or 0) / 1e9,
            "wall_s": time.perf_counter() - t_start, "since_start_s": time.perf_counter() - t_begin,
        }), flush=True)  # fmt: skip
        if args.profile and engine and strategy in ("revolve", "optimal"):
            profile = _profile(built, doc["costs"], args.steps, t)
            print(json.dumps({"row": k, "profile": profile}), flush=True)
        if args.profile and backend == "torch":
            plain_built = registry.build(case, Mode.NORMAL)
            print(json.dumps({"row": k, "torch_profile": {
                "checkpointed": _torch_profile(built), "plain": _torch_profile(plain_built),
            }}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
