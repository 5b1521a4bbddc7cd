"""Synthetic RunResults with realistic noise, for sweep/compare/gate tests (no workers run).

Noise model (docs/architecture.md, "Noise"): each mode's exact peak is stable to ~0.03 MiB
from process to process (one Gaussian offset per mode per invocation, plus page-sized jitter
per iteration); iteration times vary with a coefficient of variation of 10-25%.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ckptbench.results.schema import MODES, Case, Iteration, Mode, ModeResult, RunResult, Status
from ckptbench.schedules import make_schedule, replay

MIB = 2**20
PAGE = 4096
MEMORY_SD_BYTES = int(0.03 * MIB)

CI_CASE = Case(model="lstm", steps=256, snaps=12, hidden=64, batch=16, input=32, repeats=3)

#: overhead over baseline (bytes) and median iteration time (s) of each mode
DEFAULT_OVERHEAD = {"baseline": 0, "normal": 44 * MIB, "checkpointed": int(2.5 * MIB)}
DEFAULT_TIME = {"baseline": 0.10, "normal": 1.00, "checkpointed": 0.80}
BASE_PEAK = 42 * MIB
#: A three-cell sweep of a tiny RNN (sweep and manifest tests)
TINY_SWEEP_TEXT = """
name = "tiny"
[case]
model = "rnn"
steps = 20
hidden = 8
repeats = 3
[grid]
snaps = [2, 3, 4]
"""

#: One cell of a tiny RNN with an ``[expect]`` the gate checks (check and sweep tests)
GATED_SWEEP_TEXT = (
    'name = "tiny"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\nbatch = 2\ninput = 4\n'
    "warmup = 0\nrepeats = 1\nrounds = 1\n[[grid]]\nsnaps = [4]\n"
    "[expect]\nmemory_savings_min = 1.5\n"
)


def make_result(
    case: Case = CI_CASE,
    *,
    seed: int | None = 0,
    host: str = "host-a",
    memory_sd_bytes: float = MEMORY_SD_BYTES,
    time_cv: float = 0.15,
    overhead: dict[str, int] | None = None,
    times: dict[str, float] | None = None,
    memory_scale: dict[str, float] | None = None,
    time_scale: dict[str, float] | None = None,
    status: dict[str, Status] | None = None,
    modes: tuple[Mode, ...] = MODES,
    grad_err: float = 1e-15,
    timeline: bool = True,
    rounds: int = 1,
    counters: dict[str, int] | None = None,
) -> RunResult:
    """A RunResult for ``case`` as the runner would save it, with seeded noise.

    ``memory_scale``/``time_scale`` multiply a mode's overhead / times (inject regressions);
    ``status`` overrides a mode's status (failed cells). ``rounds``: how many rounds of
    fresh workers (each mode once a round, its own noise). ``counters``: the checkpointed
    mode's counters (a peer's: it has no stream to replay), else its replayed stream's.
    """
    rng = np.random.default_rng(seed)
    over = {**DEFAULT_OVERHEAD, **(overhead or {})}
    tmed = {**DEFAULT_TIME, **(times or {})}
    mscale = memory_scale or {}
    tscale = time_scale or {}
    stats = (
        None
        if counters is not None
        else replay(make_schedule(case.strategy, case.steps, case.snaps), case.steps, case.snaps)
    )
    results = []
    for k in range(rounds):
        for mode in modes:
            name = mode.value
            st = (status or {}).get(name, Status.OK)
            peak0 = BASE_PEAK + over[name] * mscale.get(name, 1.0) + rng.normal(0, memory_sd_bytes)
            iters = []
            for _ in range(case.warmup + case.repeats):
                wall = tmed[name] * tscale.get(name, 1.0) * max(0.2, 1 + rng.normal(0, time_cv))
                peak = int(peak0 + rng.integers(0, 2) * PAGE)
                iters.append(Iteration(wall, wall * 0.98, peak, BASE_PEAK))
            mode_counters = {"step_calls": case.steps}
            if mode is Mode.CHECKPOINTED and stats is None:
                mode_counters = dict(counters or {})
            elif mode is Mode.CHECKPOINTED:
                mode_counters = {
                    "step_calls": stats.evaluations,
                    "steps_advanced": stats.advances,
                    "steps_taped": stats.taped,
                    "peak_stored_bytes": int(over[name]),
                }
            line = ()
            if timeline:
                top = iters[-1].peak_rss_bytes
                line = tuple(
                    (0.01 * k, int(BASE_PEAK + (top - BASE_PEAK) * (k % 10) / 9)) for k in range(40)
                )
            ok = st is Status.OK
            results.append(
                ModeResult(
                    mode=mode,
                    status=st,
                    iterations=tuple(iters[case.warmup :]) if ok else (),
                    warmup=tuple(iters[: case.warmup]) if ok else (),
                    peak_method="vmhwm",
                    sampled_peak_rss_bytes=max(p for _, p in line) if line else None,
                    sample_count=len(line),
                    timeline=line,
                    counters=mode_counters if ok else {},
                    loss=0.5,
                    grad_max_rel_err=grad_err if mode is Mode.CHECKPOINTED else None,
                    error=None if ok else "simulated failure",
                    round=k,
                )
            )
    return RunResult(
        case=case,
        modes=tuple(results),
        environment={"synthetic": True},
        created="2025-01-01T00:00:00+00:00",
        host=host,
        tool_version="test",
    )


def with_case(result: RunResult, **changes: object) -> RunResult:
    case = result.case.with_(**changes)
    return replace(result, case=case)
