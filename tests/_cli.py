"""Test helpers: ``ckptbench ARGV`` run as the console script runs it, and the one-line
input error every bad input must give."""

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
