"""The up-front estimate of a planned run counts the step-cost measurement it runs first.

`run --strategy optimal` (and a sweep's dry run and start line) estimated the rounds alone:
the step costs the planner needs, measured first in a worker of their own, were left out,
and a note said they came first instead. The estimate now counts that measurement's step
evaluations, priced as the rounds' are (``sweep.progress``), and its worker's start-up; what
no estimate knows ahead (JAX's compilations) is said beside it.

Every count below is computed here from the measuring code's constants
(``measure.costwork``, which ``measure.stepcosts`` and ``measure.layercosts`` take their
defaults from), not copied from the estimator.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from _cli import run_cli

from ckptbench.backends.registry import spec
from ckptbench.measure import costwork
from ckptbench.results.schema import Case
from ckptbench.sweep import progress

#: The reference LSTM of the estimate's price (hidden 256, batch 16, input 32): a unit costs
#: ``progress.SECONDS_PER_UNIT`` on the CPU.
LSTM = dict(model="lstm", steps=200, hidden=256, batch=16, input=32, rounds=1)


def _recurrence_units(steps: int, *, samples: int, sloped: bool, gradients: int = 1) -> int:
    """The step evaluations of ``stepcosts.measure_step_costs`` over ``steps`` steps, read off
    its loop: per sample an untaped loop over the timed steps and ``gradients`` store-all
    gradients over them; then the tape slopes (tape-all gradients of k1 and k2 steps) or
    one taped step where the framework counts tapes."""
    k = min(max(steps, 2), costwork.TIME_STEPS)
    store_all = (k - 1) + costwork.TAPED_UNITS * k
    timed = samples * (k + gradients * store_all)
    if not sloped:
        return timed + costwork.TAPED_UNITS
    k2 = min(costwork.TAPE_STEPS[1], max(steps, 2))
    k1 = max(1, min(costwork.TAPE_STEPS[0], k2 // 4))
    return timed + min(samples, costwork.TAPE_SAMPLES) * costwork.TAPED_UNITS * (k1 + k2)


def test_the_optimal_estimate_exceeds_revolves_by_the_step_cost_measurement():
    """The same LSTM case at the same snaps: optimal's estimate is revolve's plus at least
    the step-cost measurement's step evaluations at the estimate's price per step (the
    rounds of the two differ by their planned advances only)."""
    optimal, _ = Case(**LSTM, strategy="optimal", budget_bytes=2**20).effective()
    revolve, _ = Case(**LSTM, strategy="revolve", snaps=optimal.snaps).effective()
    units = _recurrence_units(200, samples=costwork.SAMPLES, sloped=True)
    price = progress.SECONDS_PER_UNIT  # the reference LSTM's sizes
    extra = progress.estimated_seconds(optimal) - progress.estimated_seconds(revolve)
    assert extra >= units * price
    # and exactly that measurement, with its own worker's start-up, on top of the rounds
    start_s = spec("autograd").worker_start_s
    assert progress.costs_seconds(optimal) == pytest.approx(units * price + start_s)
    assert progress.estimated_seconds(optimal) == pytest.approx(
        progress.costs_seconds(optimal) + progress.rounds_seconds(optimal)
    )
    assert progress.costs_seconds(revolve) == 0.0


def test_each_backend_is_counted_as_it_measures():
    """torch counts its tapes (no slopes) and on CUDA times two whole store-all gradients a
    sample; JAX times every step at once, each quantity compiled, run once, then timed
    ``samples`` times, and leaves its compilations out, said after the total."""
    base, _ = Case(**LSTM, strategy="optimal", budget_bytes=2**20).effective()
    torch = replace(base, backend="torch")
    price = progress.SECONDS_PER_UNIT
    start = spec("torch").worker_start_s
    units = _recurrence_units(200, samples=costwork.SAMPLES, sloped=False)
    assert progress.costs_seconds(torch) == pytest.approx(units * price + start)
    cuda = replace(torch, device="cuda")
    cuda_units = _recurrence_units(200, samples=costwork.SAMPLES, sloped=False, gradients=2)
    per_unit, start_gpu = progress.unit_price(cuda)
    assert progress.costs_seconds(cuda) == pytest.approx(cuda_units * per_unit + start_gpu)

    jax = replace(base, backend="jax", executor="compiled")
    work = spec("jax").costs_work
    runs = work.warmups + work.samples
    steps = 1000
    store_all = (steps - 1) + costwork.TAPED_UNITS * steps
    jax_units = runs * (2 * steps + store_all) + costwork.TAPED_UNITS
    long = replace(jax, steps=steps)
    assert progress.costs_seconds(long) == pytest.approx(
        jax_units * price + spec("jax").worker_start_s
    )
    assert progress.left_out([long]) == f" plus {work.unknown}"
    assert progress.left_out([replace(long, strategy="revolve", snaps=31, budget_bytes=None)]) == ""


def test_a_chain_is_counted_per_layer():
    """A built-in stack's costs are measured per layer (``layercosts``): an untaped pass,
    then per layer its untaped and taped-and-reversed call, each once then ``SAMPLES``
    samples of as many repetitions as fill ``SAMPLE_S``, and its tape slopes."""
    stack, _ = Case(model="mlp-stack", steps=8, strategy="optimal", budget_bytes=2**20).effective()
    per_unit, start = progress.unit_price(stack)
    reps = max(1, min(costwork.MAX_REPEATS, math.ceil(costwork.SAMPLE_S / per_unit)))
    calls = 1 + costwork.SAMPLES * reps
    slopes = costwork.TAPE_SAMPLES * (1 + costwork.TRACEMALLOC_TAPES)
    units = 8 + 8 * (calls + costwork.TAPED_UNITS * calls + slopes)
    assert progress.costs_seconds(stack) == pytest.approx(units * per_unit + start)


def test_a_planned_run_says_its_step_costs_in_the_estimate_before_measuring_them(
    capsys, tmp_path, monkeypatch
):
    """The plan line comes before the step costs are measured, names them with their rough
    time and counts them in its total; the note that stood in for them is gone. With
    --costs nothing is measured, and the line says no step costs."""
    from ckptbench.measure import runner
    from ckptbench.render.format import fmt_duration

    tiny = ["--model", "rnn", "--steps", "12", "--hidden", "4", "--batch", "2", "--input", "4"]
    budget = ["--strategy", "optimal", "--budget", "16KiB"]
    once = ["--rounds", "1", "--warmup", "0", "--repeats", "1"]
    before = {}
    measured = runner.measure_costs

    def spy(case, **kw):
        before["err"] = capsys.readouterr().err  # what was said before they are measured
        return measured(case, **kw)

    monkeypatch.setattr(runner, "measure_costs", spy)
    code, _, err = run_cli(capsys, ["run", *tiny, *budget, *once, "--out", str(tmp_path / "a")])
    assert code == 0, err
    said = before["err"]
    assert "measuring rnn 12 steps" in said and "measured first" not in said + err, said
    case, _ = Case(model="rnn", steps=12, hidden=4, batch=2, input=4, rounds=1, warmup=0,
                   strategy="optimal", budget_bytes=16384).effective()  # fmt: skip
    costs_s = progress.costs_seconds(case)
    assert costs_s > 0
    assert (
        f"the plan's step costs first, in a worker of their own (~{fmt_duration(costs_s)}" in said
    )
    rounds_s = progress.rounds_seconds(case)
    assert f"about {fmt_duration(costs_s + rounds_s)}." in said, said

    costs = tmp_path / "costs.json"
    code, _, err = run_cli(capsys, ["plan", *tiny, "--budget", "16KiB", "--save-costs", str(costs)])
    assert code == 0, err
    monkeypatch.setattr(runner, "measure_costs", lambda *a, **k: pytest.fail("measured"))
    argv = ["run", *tiny, *budget, *once, "--costs", str(costs), "--out", str(tmp_path / "b")]
    code, _, err = run_cli(capsys, argv)
    assert code == 0 and "step costs first" not in err, err
    assert f"about {fmt_duration(rounds_s)}." in err, err


def test_a_sweeps_dry_run_totals_the_step_costs_of_its_planned_cells(
    tmp_path: Path, capsys, monkeypatch
):
    """The dry run's total (and so the start line's) is the cells' estimates with each
    optimal cell's step-cost measurement in it."""
    from ckptbench.render.sweepplan import total_estimate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "b.toml").write_text(
        "name = 'b'\n[case]\nmodel = 'lstm'\nsteps = 200\nrounds = 1\n"
        "[[grid]]\nstrategy = ['optimal']\nbudget_bytes = [1048576]\n"
        "[[grid]]\nstrategy = ['revolve']\nsnaps = [31]\n"
    )
    code, out, err = run_cli(capsys, ["sweep", "b.toml", "--dry-run"])
    assert code == 0, err
    optimal, _ = Case(model="lstm", steps=200, rounds=1, strategy="optimal",
                      budget_bytes=2**20).effective()  # fmt: skip
    revolve, _ = Case(model="lstm", steps=200, rounds=1, snaps=31).effective()
    with_costs = [progress.estimated_seconds(c) for c in (optimal, revolve)]
    assert progress.costs_seconds(optimal) > 1
    total = total_estimate(with_costs)
    assert f", {total} -> " in out, out
    assert total != total_estimate([progress.rounds_seconds(c) for c in (optimal, revolve)])


def test_a_sweeps_running_eta_counts_the_step_costs_as_its_total_does():
    """The running ETA weighted each cell by its rounds alone (``cell_cost``), while the
    total said before the sweep counts a planned cell's step-cost measurement too: after a
    revolve cell, the optimal cell left was priced as its rounds, its costs left out. Now
    both read one estimate (``estimated_seconds``): a sweep going at the estimate's pace
    has the up-front estimate of its cells left as its ETA."""
    import time

    from ckptbench.sweep.cells import CellOutcome, CellState
    from ckptbench.sweep.progress import ProgressTracker

    optimal, _ = Case(**LSTM, strategy="optimal", budget_bytes=2**20).effective()
    revolve, _ = Case(**LSTM, strategy="revolve", snaps=optimal.snaps).effective()
    assert progress.costs_seconds(optimal) > 0.2 * progress.rounds_seconds(optimal)
    took = progress.estimated_seconds(revolve)
    for workers in (1, 2):  # the elapsed time, or the finished cells' own durations
        events = []
        tracker = ProgressTracker(
            events.append, [revolve, optimal], time.monotonic() - took, workers=workers
        )
        tracker.cell_start(revolve)
        tracker.cell_done(CellOutcome(revolve, Path("r.json"), CellState.MEASURED, duration_s=took))
        done = events[-1]
        pace = (done.elapsed_s if workers == 1 else took) / took  # 1: the estimate's pace
        assert done.eta_s == pytest.approx(pace * progress.estimated_seconds(optimal))
        assert done.eta_s > 1.2 * pace * progress.rounds_seconds(optimal)  # costs counted
