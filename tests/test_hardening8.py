"""Session of 2026-11-29 (no GPU): points the earlier audits left open, each with a test that
fails on the code before it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Case, CaseError


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("text", ["\u0665%", "1_0%", "nan", "inf", "-1%", "5%%", "0x5"])
def test_a_fraction_is_ascii_digits(text):
    """`--memory-tolerance` with an Arabic-Indic five and a % read as 5%: float() takes any Unicode
    digit, underscores, 'nan' and 'inf'."""
    from ckptbench.results.units import parse_fraction_text

    with pytest.raises(ValueError, match=r"is not a fraction like 5% or 0\.05"):
        parse_fraction_text(text)
    res = _invoke("check", "nothing-here", "--memory-tolerance", text)
    assert res.exit_code == 2, res.output
    assert "is not a fraction" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (" 5 % ", 0.05), ("0.05", 0.05),
                                             ("1e-2", 0.01), ("150%", 1.5)])  # fmt: skip
def test_a_fraction_as_people_type_it(text, value):
    from ckptbench.results.units import parse_fraction_text

    assert parse_fraction_text(text) == pytest.approx(value)


def test_threads_are_bounded():
    """`--threads 100000` was accepted and handed to every worker's BLAS."""
    from ckptbench.results.schema import MAX_THREADS

    res = _invoke("run", "--steps", "10", "--snaps", "2", "--threads", "100000")
    assert res.exit_code == 2, res.output
    assert "--threads" in res.output and str(MAX_THREADS) in res.output
    with pytest.raises(CaseError, match="threads must be at most"):
        Case(model="rnn", steps=10, snaps=2, threads=MAX_THREADS + 1)
    assert Case(model="rnn", steps=10, snaps=2, threads=MAX_THREADS).threads == MAX_THREADS


def test_schedule_repeat_is_bounded():
    """`schedule --time --repeat 1000000000` ran for hours before printing a line."""
    res = _invoke("schedule", "--steps", "10", "--snaps", "2", "--time", "--repeat", "10**9")
    assert res.exit_code == 2
    res = _invoke("schedule", "--steps", "10", "--snaps", "2", "--time", "--repeat", "1000000000")
    assert res.exit_code == 2, res.output
    assert "--repeat" in res.output


def test_an_error_at_once_is_not_said_to_have_waited(monkeypatch):
    """`tls://` without its settings fails at once; the line said 'within 10 s' as if it
    had waited (a refused port is retried by Dask until the limit: that one waits). Such an
    address is refused by its scheme now (test_hardening23_edges); taken as configured here,
    Dask refuses it at once."""
    import socket

    pytest.importorskip("distributed")
    monkeypatch.setattr("ckptbench.sweep.cluster._tls_settings", lambda: True)
    from ckptbench.sweep.cluster import DaskError, connect

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DaskError, match="cannot reach Dask scheduler") as caught:
        connect(f"tls://127.0.0.1:{port}", [Case(steps=5, snaps=2)], timeout_s=30.0)
    assert "within" not in str(caught.value)


def test_a_silent_listener_is_said_to_have_been_waited_for():
    import socket

    pytest.importorskip("distributed")
    from ckptbench.sweep.cluster import DaskError, connect

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with pytest.raises(DaskError, match=r"within 1 s"):
            connect(f"tcp://127.0.0.1:{port}", [Case(steps=5, snaps=2)], timeout_s=1.0)


@pytest.mark.parametrize("made", [False, True])
def test_a_dask_sweep_stopped_before_any_cell_says_what_is_left(tmp_path, monkeypatch, made):
    """Stopped before a cell was sent, the line said `--resume` measures the rest of a
    folder that was never made (and --resume then refused it)."""
    import ckptbench.sweep.run as sweep_run
    from ckptbench.results.store import MANIFEST_NAME

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_run, "run_sweep", stopped)
    config = tmp_path / "s.toml"
    config.write_text('name = "s"\n[case]\nmodel = "rnn"\nsteps = 10\n[grid]\nsnaps = [2]\n')
    out = tmp_path / "out"
    if made:
        out.mkdir()
        (out / MANIFEST_NAME).write_text("{}")
    res = _invoke("sweep", str(config), "--out", str(out), "--dask", "tcp://127.0.0.1:9", "-q")
    assert res.exit_code == 130, res.output
    assert "before any cell was sent" in res.output
    assert ("--resume" in res.output) is made
    assert ("nothing was measured" in res.output) is not made


def test_schedule_says_store_all_ignores_snaps_and_heads_its_table_with_what_runs():
    """`schedule --strategy store-all --steps 10000000 --snaps 3` headed its closed-form
    table '3 snaps' beside 'peak snapshots 10000000', and neither form said --snaps was
    unused. Since the headline says every state is stored, not one snapshot per step."""
    for steps in ("6", "10000000"):
        res = _invoke("schedule", "--strategy", "store-all", "--steps", steps, "--snaps", "3")
        assert res.exit_code == 0, res.output
        assert "--snaps 3 is not used" in res.output
        assert f"{steps} steps, every state stored (--snaps not used)" in res.output
        assert "3 snaps" not in res.output and f"{steps} snaps" not in res.output


def test_the_recomputation_factor_is_exact_for_any_size():
    """1e29 steps at one slot printed 49999999999999995716575428608.000 (a float)."""
    res = _invoke("schedule", "--steps", "1" + "0" * 29, "--snaps", "1")
    assert res.exit_code == 0, res.output
    assert "4" + "9" * 28 + ".500" in res.output
    res = _invoke("schedule", "--steps", "1000", "--snaps", "31")
    assert "2.439" in res.output


def test_profile_says_when_it_clamps_snaps(monkeypatch):
    """`profile --steps 3 --snaps 10` clamped silently; run and schedule say it."""
    import ckptbench.measure.tasks as tasks

    monkeypatch.setattr(tasks, "profile_lines", lambda case, job: {"lines": [], "job": job})
    monkeypatch.setattr(tasks, "check_plugin", lambda case: None)
    res = _invoke("profile", "--steps", "3", "--snaps", "10", "--hidden", "8")
    assert "--snaps 10 clamped to 3" in res.output


def test_a_cell_measured_again_keeps_the_tries_an_earlier_sweep_recorded(tmp_path, monkeypatch):
    """`--resume` of a Dask sweep whose cell was lost on two workers: the manifest kept only
    the new try, so who lost it (and why) was gone."""
    import json

    from _synthetic import make_result

    import ckptbench.sweep.cluster as cluster_module
    import ckptbench.sweep.dask as dask_module
    from ckptbench.results.store import MANIFEST_NAME
    from ckptbench.sweep.cells import Attempt
    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "dk"\n[case]\nmodel = "rnn"\nsteps = 40\nhidden = 8\n[grid]\nsnaps = [2, 4]\n',
        source="dk.toml",
    )

    class FakeCluster:
        def __init__(self):
            self.workers = {"tcp://10.0.0.9:1": None}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def fake_dask(cluster, run_cell, jobs, starting, done, retrying=None, poll_s=0.2):
        for index, case in jobs:
            starting(index, 1)
            now = Attempt("tcp://10.0.0.9:1", "node9", 3.0, None)
            done(index, make_result(case, seed=index), None, (now,), False)
        return None

    monkeypatch.setattr(cluster_module, "connect", lambda *a, **k: FakeCluster())
    monkeypatch.setattr(dask_module, "run_dask", fake_dask)
    run_sweep(config, tmp_path, dask_address="tcp://10.0.0.9:8786")
    manifest = tmp_path / MANIFEST_NAME
    doc = json.loads(manifest.read_text())
    lost = [Attempt(f"tcp://10.0.0.{n}:1", f"node{n}", 5.0, "worker left").to_dict()
            for n in (7, 8)]  # fmt: skip
    doc["cells"][1].update(state="error", attempts=lost)
    manifest.write_text(json.dumps(doc))
    (tmp_path / f"{config.cases[1].key}.json").unlink()
    run_sweep(config, tmp_path, resume=True, dask_address="tcp://10.0.0.9:8786")
    kept, again = json.loads(manifest.read_text())["cells"]
    assert again["state"] == "measured"
    assert [a["worker"] for a in again["attempts"]] == [
        "tcp://10.0.0.7:1", "tcp://10.0.0.8:1", "tcp://10.0.0.9:1"
    ]  # fmt: skip
    assert again["attempts"][-1]["error"] is None and len(kept["attempts"]) == 1


@pytest.mark.parametrize("payload", [{"result": ["a", "list"]}, {"result": "text"}, ["no", "dict"],
                                     {"no result": 1}])  # fmt: skip
def test_whatever_a_dask_worker_returned_is_kept(payload):
    """A worker that returned a list or a string (not a result document): the cell was an
    error and what came back was dropped; only a dict was kept beside."""
    from ckptbench.sweep.dask import _collect

    class Future:
        def result(self):
            return payload

    class Cluster:
        def host(self, worker):
            return "h"

    calls = []
    case = Case(model="rnn", steps=20, snaps=3, hidden=8)
    got = _collect(Future(), 0, case, "tcp://w:1", 1.0, Cluster(), {},
                   lambda *a, **k: calls.append((a, k)))  # fmt: skip
    assert got is None
    ((args, kwargs),) = calls
    assert args[1] is None and args[2]
    has_result = isinstance(payload, dict) and "result" in payload
    assert kwargs["raw"] == (payload["result"] if has_result else payload)


def test_a_port_that_answers_in_http_is_said_to_be_no_dask_scheduler():
    """A server that sends 'HTTP/1.0 426 ...' on connect: the line read 'MemoryError: Unable
    to allocate 3.01 EiB' (the bytes taken as a frame's length)."""
    pytest.importorskip("distributed")
    from _listener import listener

    from ckptbench.sweep.cluster import DaskError, connect

    http = b"HTTP/1.0 426 Upgrade Required\r\nContent-Length: 0\r\n\r\n"
    with listener(http) as address, pytest.raises(DaskError, match="Dask's protocol") as caught:
        connect(address, [Case(steps=5, snaps=2)], timeout_s=5.0)
    assert "MemoryError" not in str(caught.value) and "EiB" not in str(caught.value)


def test_plan_and_profile_bound_a_plugin_that_hangs(tmp_path, monkeypatch):
    """plugins.md: the plug-in check is bounded by --timeout; plan and profile had none, so
    a plug-in that hangs at import held them for the case's 15 minutes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(3600)\n")
    for command in (["plan", "--budget", "1MiB"], ["profile"]):
        res = _invoke(*command, "--model", "hang.py:make", "--steps", "10", "--timeout", "2s")
        assert res.exit_code == 2, res.output
        assert "did not finish within 2 s" in res.output


def test_an_unused_costs_file_is_not_judged(tmp_path, monkeypatch):
    """`run --strategy revolve --costs cnn.json` (24 layers' costs, 10 steps): 'has costs
    for 24 steps, not 10'; refused for the strategy instead, as --budget is (usage.md)."""
    import json

    from _fake import FAKE
    from test_hardening2 import TINY

    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(FAKE))
    costs = tmp_path / "cnn.json"
    per_layer = {"forward_time_s": [1e-3] * 24, "taped_time_s": [3e-3] * 24,
                 "state_bytes": [4096] * 24, "tape_bytes": [65536] * 24}  # fmt: skip
    costs.write_text(json.dumps(per_layer))
    res = _invoke("run", "--model", "rnn", "--strategy", "revolve", "--snaps", "4", *TINY,
                  "--costs", str(costs), "--out", str(tmp_path / "r.json"))  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "is only used by strategy 'optimal', not 'revolve'" in res.output
    assert "has costs for" not in res.output


def test_a_reader_that_leaves_early_is_141_not_a_failure():
    """`schedule --actions | head -1` exited 1, a failed measurement's status, with nothing
    said; a process that SIGPIPE ends reports 141 (128 + 13)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "ckptbench", "schedule", "--steps", "100000", "--snaps", "50",
         "--actions"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout.readline().startswith(b"TAKESHOT")
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == b""


def test_compare_refuses_a_folder_against_itself_or_its_copy(tmp_path):
    """`compare results/ci --against results/ci` printed 'no change' for every cell, exit 0;
    `check` refuses the same inputs."""
    import shutil

    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    folder = tmp_path / "a"
    folder.mkdir()
    save_result(make_result(), folder / "r.json")
    shutil.copytree(folder, tmp_path / "copy")
    for against in (folder, tmp_path / "copy"):
        res = _invoke("compare", str(folder), "--against", str(against))
        assert res.exit_code == 2, res.output
        assert "the very measurements being compared" in res.output
    other = tmp_path / "b"
    other.mkdir()
    save_result(make_result(seed=7), other / "r.json")
    res = _invoke("compare", str(other), "--against", str(folder))
    assert "the very measurements" not in res.output


def test_a_mode_cut_by_a_stop_signal_is_no_failure_and_the_rounds_are_the_complete_ones():
    """After SIGTERM in round 4 of `run`: 'failed checkpointed: interrupted ...' on stderr
    (usage.md: the interruption is a note, never a failure) and 'across 4 rounds' beside
    '3 complete rounds'."""
    from dataclasses import replace

    from _synthetic import make_result

    from ckptbench.render import failure_lines
    from ckptbench.render.run import explain_lines
    from ckptbench.results.schema import Mode, Status

    whole = make_result(rounds=4)
    modes = tuple(
        replace(m, status=Status.INTERRUPTED, iterations=(), warmup=(), counters={},
                error="stopped by SIGTERM")
        if m.round == 3 and m.mode is Mode.CHECKPOINTED else m
        for m in whole.modes
    )  # fmt: skip
    cut = replace(whole, modes=modes)
    assert cut.rounds_complete == 3 and cut.interruption == "interrupted in round 4"
    assert failure_lines(cut) == []
    lines = " ".join(explain_lines(cut))
    assert "across 4 rounds" not in lines
    assert "across 3 rounds" in lines
