"""The recomputation floor of the peers (audit, 2026-11-30): torch counts a peer's step or
layer calls, forward and recomputation alike, so ``torch-checkpoint``,
``checkpoint-sequential`` and ``torch-every-layer`` get the floor ours get, by the same
computation; the JAX peers count nothing and ``torch-selective`` recomputes parts of a
layer, so they get none, and ``run`` says why (``StrategySpec.no_floor``)."""

from __future__ import annotations

import json
import statistics

import pytest
from _cli import run_cli
from _synthetic import make_result

from ckptbench.frame import read_results
from ckptbench.render.run import explain_lines
from ckptbench.results.schema import Case, Mode, save_result
from ckptbench.schedules import STRATEGIES, Setting, StrategySpec

TORCH_STACK = Case(model="mlp-stack", steps=6, snaps=2, hidden=8, backend="torch",
                   strategy="checkpoint-sequential", repeats=3)  # fmt: skip
LSTM = Case(model="lstm", steps=20, snaps=4, hidden=8, repeats=3)


def _median_times(result, k: int) -> dict[Mode, float]:
    return {
        m.mode: statistics.median(it.wall_time_s for it in m.iterations)
        for m in result.modes
        if m.round == k
    }


def _floor_lines(result) -> list[str]:
    return [x for x in explain_lines(result) if x.startswith("recomputation floor")]


@pytest.mark.parametrize(
    ("case", "calls"),
    [
        (TORCH_STACK, 9),  # 6 layers + the first segment's 3 again
        (TORCH_STACK.with_(strategy="torch-every-layer", snaps=6), 12),
        (LSTM.with_(backend="torch", strategy="torch-checkpoint"), 40),
    ],
)
def test_a_torch_peer_with_counted_calls_gets_the_floor_of_the_formula(case, calls):
    result = make_result(case, rounds=3, time_cv=0.0, counters={"step_calls": calls})
    s = result.summary
    steps = case.steps
    assert s.step_evaluations == calls and s.floor_note is None
    want = []
    for k in range(3):
        t = _median_times(result, k)
        floor = t[Mode.NORMAL] + (calls - steps) * t[Mode.BASELINE] / steps
        want.append(t[Mode.CHECKPOINTED] / floor)
    assert s.floor_ratio.per_round == pytest.approx(want, rel=1e-12)
    base, plain = s.mode(Mode.BASELINE).time.median, s.mode(Mode.NORMAL).time.median
    assert s.floor_time_s == pytest.approx(plain + (calls - steps) * base / steps, rel=1e-12)
    doc = s.as_dict()
    assert doc["floor_time_s"] == s.floor_time_s and doc["vs_floor"] == s.vs_floor
    assert doc["floor_note"] is None
    (line,) = _floor_lines(result)
    assert f"+ {calls - steps} extra evaluations x" in line and "x the floor [" in line


@pytest.mark.parametrize(
    ("case", "counters"),
    [
        # the JAX peers count nothing (step_calls None: inside XLA)
        (
            TORCH_STACK.with_(backend="jax", strategy="jax-every-layer", snaps=6),
            {"step_calls": None},
        ),
        (LSTM.with_(backend="jax", strategy="jax-checkpoint"), {}),
        # counted, but not whole layers: selective AC reruns a layer's call, not its matmuls
        (TORCH_STACK.with_(strategy="torch-selective", snaps=6), {"step_calls": 12}),
    ],
)
def test_a_peer_without_whole_counted_evaluations_gets_no_floor_and_says_why(case, counters):
    result = make_result(case, rounds=2, time_cv=0.0, counters=counters)
    s = result.summary
    reason = STRATEGIES[case.strategy].no_floor
    assert reason
    assert s.floor_time_s is None and s.vs_floor is None and s.floor_ratio is None
    assert s.floor_note == reason and s.as_dict()["floor_note"] == reason
    (line,) = _floor_lines(result)
    assert line == f"recomputation floor: none for {case.strategy}: {reason}"


def test_ours_keep_their_floor_and_cannot_declare_none():
    result = make_result(TORCH_STACK.with_(strategy="revolve", snaps=2), rounds=2)
    assert result.summary.floor_time_s is not None and result.summary.floor_note is None
    with pytest.raises(ValueError, match="ours counts"):
        StrategySpec(name="x", label="x", marker="o", setting=Setting.SNAPS, help="x",
                     stream=lambda steps, snaps: iter(()), no_floor="no")  # fmt: skip


def test_compare_and_read_results_carry_a_torch_peers_floor(tmp_path, capsys):
    result = make_result(TORCH_STACK, rounds=3, counters={"step_calls": 9})
    assert result.summary.vs_floor is not None
    path = tmp_path / "r.json"
    save_result(result, path)
    tidy = read_results([path]).set_index("mode")
    assert tidy.loc["checkpointed", "vs_floor"] == pytest.approx(result.summary.vs_floor)
    code, out, _ = run_cli(capsys, ["compare", str(path), "--format", "json"])
    assert code == 0
    (row,) = json.loads(out)
    assert row["vs_floor"] == pytest.approx(result.summary.vs_floor)
    assert row["floor_time_s"] == pytest.approx(result.summary.floor_time_s)


@pytest.mark.torch
def test_a_real_checkpoint_sequential_run_prints_its_floor(tmp_path, capsys):
    pytest.importorskip("torch")
    out_file = tmp_path / "r.json"
    argv = ["run", "--backend", "torch", "--model", "mlp-stack", "--steps", "6",
            "--hidden", "8", "--strategy", "checkpoint-sequential", "--snaps", "2",
            "--rounds", "1", "--repeats", "2", "--out", str(out_file)]  # fmt: skip
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    doc = json.loads(out_file.read_text())
    calls = {m["mode"]: m["counters"]["step_calls"] for m in doc["modes"]}
    assert calls == {"baseline": 6, "normal": 6, "checkpointed": 9}
    assert doc["summary"]["floor_time_s"] > 0 and doc["summary"]["vs_floor"] > 0
    (line,) = [x for x in out.splitlines() if x.startswith("recomputation floor")]
    assert "+ 3 extra evaluations x" in line and "x the floor" in line
