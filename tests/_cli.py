"""Test helpers: ``ckptbench ARGV`` run as the console script runs it, the one-line input
error every bad input must give, and a ``python`` command line that runs ckptbench with the
stop signals a terminal gives it."""

from __future__ import annotations

import pytest

from ckptbench.cli import main


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """``ckptbench ARGV`` as the console script runs it: (exit status, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line_error(capsys, argv: list[str]) -> str:
    """The stderr of ``ckptbench ARGV``, which must exit 2 with one line and no traceback."""
    code, _, err = run_cli(capsys, argv)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


#: ``python -c MAIN_AS_IN_A_TERMINAL ARGV`` runs ``ckptbench ARGV`` with SIGINT, SIGTERM and
#: SIGHUP at their defaults, whatever the test run inherited: a shell without job control
#: starts a background job with SIGINT ignored, nohup starts one with SIGHUP ignored, and
#: ckptbench (as Python does for SIGINT) keeps a signal ignored that it was started with
#: ignored. A test that sends one of these signals to ckptbench starts it this way.
MAIN_AS_IN_A_TERMINAL = (
    "import runpy, signal\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "for s in (signal.SIGTERM, signal.SIGHUP):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "runpy.run_module('ckptbench', run_name='__main__', alter_sys=True)\n"
)
