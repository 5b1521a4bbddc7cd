"""Interrupted runs told truthfully (issue 25, item 2) and the main job's time cap and live
display (item 1): a mode's figures come from its complete rounds, an interruption is a note
and never a mode's failure, and table, headline, JSON, compare, read_results and check
agree. The fake worker (``tests/fake_worker.py``) measures; nothing here is timed."""

from __future__ import annotations

import io
import json
import signal
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ckptbench.analysis.gate import check
from ckptbench.frame import cells_frame, results_frame
from ckptbench.measure.launch import Interrupted, RunEvent
from ckptbench.measure.runner import Precision, run_case
from ckptbench.render import headline, run_table, warning_lines
from ckptbench.render.console import JobClock, mode_progress
from ckptbench.render.run import explain_lines, interruption_line
from ckptbench.render.table import to_text
from ckptbench.results.schema import Case, Mode, Status
from ckptbench.results.store import load_result

CASE = Case(model="rnn", steps=20, snaps=4, hidden=8, batch=2, input=4, warmup=0, repeats=1,
            rounds=4)  # fmt: skip


def _stop_at(round_index: int, mode: Mode, phase: str, signum=signal.SIGTERM):
    def progress(event: RunEvent) -> None:
        if (event.round, event.mode, event.phase) == (round_index, mode, phase):
            raise Interrupted(signum)

    return progress


def test_a_mode_cut_in_round_3_keeps_its_two_complete_rounds_everywhere(fake, tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted):  # round 3 runs checkpointed first (rotated order)
        run_case(CASE, out_path=out, progress=_stop_at(2, Mode.CHECKPOINTED, "iteration"))
    result = load_result(out)
    s = result.summary.as_dict()
    assert s["status"] == {"baseline": "ok", "normal": "ok", "checkpointed": "ok"}
    assert s["rounds_complete"] == 2 and s["interrupted_round"] == 3 and s["ok"] is False
    assert s["overhead_bytes"]["checkpointed"] is not None and s["memory_savings"] is not None
    assert len(result.mode(Mode.CHECKPOINTED).iterations) == 2  # its two complete rounds
    # headline and table: figures, a note, no failure
    line = headline(result)
    assert "2 complete rounds (interrupted in round 3 by SIGTERM)" in line
    assert "FAILED" not in line and "slowdown" in line and "memory savings" in line
    table = to_text(run_table(result), 200)
    ckpt_row = next(r for r in table.splitlines() if r.startswith("checkpointed"))
    assert " ok " in ckpt_row and " - " not in ckpt_row.split("ok", 1)[1][:40]
    assert interruption_line(result) == (
        "interrupted in round 3; 2 complete rounds of every mode kept (3 started, 4 planned)"
    )
    assert interruption_line(result) not in explain_lines(result)  # said by the warning
    assert (
        "ckptbench was stopped: the figures come from the complete rounds: interrupted in "
        "round 3 by SIGTERM, 2 complete rounds" in warning_lines(result)
    )
    # compare's table and read_results say the same
    cells = cells_frame([result])
    assert cells["status"][0] == "interrupted in round 3 (2 complete rounds)"
    assert cells["memory_savings"][0] == pytest.approx(s["memory_savings"])
    tidy = results_frame([result])
    assert set(tidy["status"]) == {"ok"}
    assert set(tidy["rounds_complete"]) == {2} and set(tidy["interrupted_round"]) == {3}
    # the CI gate does not pass an interrupted cell
    (status,) = [line for line in check([result]).lines if line.check == "status"]
    assert not status.passed and "interrupted in round 3 (2 complete rounds)" in status.detail


def test_a_signal_between_modes_of_an_added_round_is_in_the_file(fake, tmp_path):
    # rounds added by --precision: the stop between two modes of round 3 must not leave a
    # file that reads as a complete all-ok run
    out = tmp_path / "r.json"
    case = Case(**{**CASE.__dict__, "rounds": 2})
    target = Precision(0.0001, 10, 1e6)
    with pytest.raises(Interrupted):  # round 3 (index 2): checkpointed, baseline, normal
        run_case(case, out_path=out, precision=target,
                 progress=_stop_at(2, Mode.CHECKPOINTED, "done"))  # fmt: skip
    result = load_result(out)
    cut = [m for m in result.modes if m.status is Status.INTERRUPTED]
    assert [(m.round, m.mode) for m in cut] == [(2, Mode.BASELINE)]
    assert "before this mode started" in cut[0].error
    assert result.summary.ok is False and result.summary.interrupted_round == 3
    assert result.environment["interrupted"] == {"by": "SIGTERM", "round": 3}
    assert "2 complete rounds (interrupted in round 3 by SIGTERM)" in headline(result)


def test_the_time_cap_stops_the_planned_rounds_too_and_says_the_interval(fake, tmp_path):
    out = tmp_path / "r.json"
    case = Case(**{**CASE.__dict__, "rounds": 6})
    result = run_case(case, out_path=out, precision=Precision(0.0001, 30, 0.001))
    prec = result.environment["precision"]
    assert prec["stopped"] == "max-time" and prec["rounds"] == 2 == result.rounds_started
    assert prec["rounds_planned"] == 6
    (line,) = [x for x in explain_lines(result) if x.startswith("stopped at the time cap")]
    assert "(--max-time 0 s) after 2 of 6 planned rounds: slowdown interval within +/-" in line


def _events(clock_modes, rounds):
    from ckptbench.results.schema import Iteration, ModeResult

    for k in range(rounds):
        for m in clock_modes:
            yield RunEvent("start", m, k, rounds)
            yield RunEvent("iteration", m, k, rounds, index=0, planned=1, elapsed_s=1.0)
            peak = 2**20 * (10 + 5 * (m is Mode.NORMAL))
            wall = 1.0 + 0.1 * (m is Mode.CHECKPOINTED) + 0.01 * k
            it = Iteration(wall_time_s=wall, cpu_time_s=1.0, peak_rss_bytes=peak,
                           start_rss_bytes=peak // 2)  # fmt: skip
            res = ModeResult(mode=m, status=Status.OK, round=k, iterations=(it,))
            yield RunEvent("done", m, k, rounds, result=res)


def test_the_live_display_fits_an_80x24_terminal_for_any_number_of_rounds():
    buf = io.StringIO()
    term = Console(file=buf, force_terminal=True, width=80, height=24)
    target = Precision(0.05, 30, 240.0)
    modes = (Mode.BASELINE, Mode.NORMAL, Mode.CHECKPOINTED)
    callback, stop = mode_progress(term, modes, CASE, precision=target, guess_round_s=20.0)
    try:
        for event in _events(modes, 25):
            callback(event)
            shown = Console(file=io.StringIO(), width=80, height=24, record=True)
            shown.print(callback.display.renderable)
            lines = shown.export_text().rstrip("\n").splitlines()
            assert len(lines) <= 4 and all(len(x) <= 80 for x in lines)
    finally:
        stop()
    assert "round 25: baseline 1.24 s, normal 1.24 s, checkpointed 1.34 s" in buf.getvalue()
    summary = callback.clock.summary()
    assert summary.startswith("25 rounds done (plan 4-30) · ") and "left" in summary


def test_the_eta_covers_the_whole_job_and_the_time_cap():
    clock = JobClock(Case(), (Mode.NORMAL,), Precision(0.05, 30, 240.0), guess_round_s=30.0)
    assert clock.eta_s() == pytest.approx(6 * 30.0)  # six planned rounds of the guess
    none = JobClock(Case(rounds=3), (Mode.NORMAL,), None, guess_round_s=10.0)
    assert none.eta_s() == pytest.approx(30.0)


def test_a_signal_between_rounds_is_in_the_summary_and_the_headline(fake, tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted):  # round 2 (index 1) ends with baseline
        run_case(CASE, out_path=out, progress=_stop_at(1, Mode.BASELINE, "done"))
    result = load_result(out)
    assert not [m for m in result.modes if m.status is Status.INTERRUPTED]
    s = result.summary
    assert s.ok is False and s.interrupted_round == 3 and s.rounds_complete == 2
    stored = json.loads(out.read_text())["summary"]
    assert stored["ok"] is False and stored["interrupted_round"] == 3
    assert "2 complete rounds (interrupted before round 3 by SIGTERM)" in headline(result)
    assert interruption_line(result) == (
        "interrupted before round 3; 2 complete rounds of every mode kept (2 started, 4 planned)"
    )
    assert cells_frame([result])["status"][0] == "interrupted before round 3 (2 complete rounds)"


def test_a_sweep_stopped_while_its_plug_ins_are_checked_says_so_and_creates_nothing(tmp_path):
    """A sweep checks its plug-ins (in a disposable worker) before anything is printed or
    created: Ctrl-C there says so in one line, stops the worker, and leaves no --out."""
    import os
    import subprocess
    import time

    from _cli import MAIN_AS_IN_A_TERMINAL

    (tmp_path / "slow.py").write_text(
        "import os, time\n"
        "open('imported', 'w').write(str(os.getpid()))\n"
        "while not os.path.exists('go'):\n"
        "    time.sleep(0.05)\n"
        "from ckptbench.workloads.rnn import rnn\n\n\n"
        "def make(**sizes):\n    return rnn(hidden=8)\n"
    )
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[case]\nmodel = "slow.py:make"\nsteps = 10\nsnaps = 3\n'
        '[grid]\nstrategy = ["revolve"]\n'
    )
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get(
        "PYTHONPATH"))))}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", MAIN_AS_IN_A_TERMINAL, "sweep", "s.toml", "--out", "out"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    marker = tmp_path / "imported"
    while not marker.exists() or not marker.read_text():  # the check's worker imports it
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    worker = int(marker.read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines() == [
        "ckptbench: sweep interrupted by SIGINT (Ctrl-C) while its plug-ins were checked; "
        "nothing was measured"
    ]
    assert not (tmp_path / "out").exists()
    with pytest.raises(ProcessLookupError):  # the worker was stopped with the sweep
        for _ in range(100):
            os.kill(worker, 0)
            time.sleep(0.05)


def test_a_round_line_shows_each_modes_median_iteration():
    """Two iterations a mode: the round line's time is their median, the table's time/iter
    (it showed the slower of the two: 'checkpointed 0.46 s' beside a round slowdown of 1.05x
    whose iterations were 0.24 and 0.46 s against plain's 0.31 and 0.34 s)."""
    from ckptbench.results.schema import Iteration, ModeResult

    buf = io.StringIO()
    callback, stop = mode_progress(Console(file=buf, width=200), (Mode.NORMAL,), CASE)
    walls = (0.2442, 0.4571)
    its = tuple(Iteration(wall_time_s=w, cpu_time_s=w, peak_rss_bytes=2**20,
                          start_rss_bytes=2**19) for w in walls)  # fmt: skip
    res = ModeResult(mode=Mode.NORMAL, status=Status.OK, round=0, iterations=its)
    try:
        callback(RunEvent("start", Mode.NORMAL, 0, 1))
        callback(RunEvent("done", Mode.NORMAL, 0, 1, result=res))
    finally:
        stop()
    assert "round 1: normal 0.35 s" in buf.getvalue()  # median 0.3507, not 0.46
