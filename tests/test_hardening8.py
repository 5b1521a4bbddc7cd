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


def test_an_error_at_once_is_not_said_to_have_waited():
    """`tls://` without its settings fails at once; the line said 'within 10 s' as if it
    had waited (a refused port is retried by Dask until the limit: that one waits)."""
    import socket

    pytest.importorskip("distributed")
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
