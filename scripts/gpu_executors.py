"""Issue 22's GPU figures in one process, about two minutes: JAX's executors against plain
``jax.grad``, the forward-only floor and ``jax.checkpoint``; torch's executor against its
floor and ``torch.utils.checkpoint``. Run by scripts/gpu-check.sh (docs/gpu.md).

Every gradient is built (and compiled) as the worker builds it, run once as a warm-up, then
timed ``--repeats`` times to the end of its result (block_until_ready / cuda.synchronize,
inside ``gradient``); the median is printed with the floor: plain + (evaluations - steps)
x the baseline's time per step. Also works on the CPU (``--device cpu``), for comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from ckptbench.backends import registry
from ckptbench.results.schema import Case, Mode

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


def _row_span(item: str, default_span: int) -> tuple[int, int, bool | None, bool]:
    row, span, fold, rest, *_ = (*item.split(":"), "", "", "")
    return (
        int(row), int(span) if span else default_span,
        None if fold == "" else fold != "0", rest != "0",
    )  # fmt: skip


def main() -> None:
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
    args = ap.parse_args()
    import ckptbench.backends.jax.dispatch as jax_dispatch

    default_span = jax_dispatch.DEFAULT_SPAN
    todo = [_row_span(i, default_span) for i in args.only.split(",") if i]
    todo = todo or [(k, default_span, None, True) for k in range(len(ROWS))]
    plain: dict[tuple, tuple[float, float]] = {}
    t_begin = time.perf_counter()
    for k, span, fold, rest in todo:
        backend, dtype, h, b, strategy, snaps, executor, budget = ROWS[k]
        jax_dispatch.JaxEngineLoop.span_on = lambda _self, _platform, span=span: span
        jax_dispatch.JaxEngineLoop.fold_runs = fold
        jax_dispatch.JaxEngineLoop.fuse_rest = rest
        case = Case(
            backend=backend, device=args.device, dtype=dtype, hidden=h, batch=b,
            steps=args.steps, snaps=min(snaps, args.steps), strategy=strategy,
            executor=executor if backend == "jax" else None, budget_bytes=budget,
        )  # fmt: skip
        size = (backend, dtype, h, b)
        t_start = time.perf_counter()
        if size not in plain:
            base = _time(registry.build(case, Mode.BASELINE), args.repeats)
            normal = _time(registry.build(case, Mode.NORMAL), args.repeats)
            plain[size] = (base, normal)
            print(json.dumps({"row": "plain", "size": size, "baseline_s": base, "plain_s": normal}))
        base, normal = plain[size]
        measured = registry.measure_costs(case) if strategy == "optimal" else {}
        costs = measured.get("costs")
        built = registry.build(case, Mode.CHECKPOINTED, costs)
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
        print(json.dumps({
            "row": k, "size": size, "strategy": strategy, "snaps": snaps, "budget": budget,
            "executor": case.executor_used if strategy in ("revolve", "optimal") else None,
            "time_s": t, "vs_plain": t / normal, "evaluations": evals, "floor_s": floor,
            "vs_floor": None if floor is None else t / floor, "predicted_s": predicted,
            "dispatches": built.counters().get("dispatches"), "torch_peak_bytes": peak,
            "span": span if executor == "engine" else None, "fold": fold, "rest": rest,
            "taped_method": measured.get("taped_method"), "costs": costs,
            **{c: built.counters().get(c) for c in ("fused_programs", "fused_temp_bytes")},
            "compile_s": (built.counters().get("compile_time_ns") or 0) / 1e9,
            "wall_s": time.perf_counter() - t_start, "since_start_s": time.perf_counter() - t_begin,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
