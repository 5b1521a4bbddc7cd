"""A new user's first slips, each one line that says what to type instead: a memory limit
without a unit, a precision typed as a percentage without '%', a budget without the strategy
that uses it, --dtype float32 on autograd's built-in models, and --dtype's help about plug-ins."""

from __future__ import annotations

import click
from _cli import one_line_error
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.cli.values import BYTES


def test_a_memory_limit_without_a_unit_is_refused_as_a_slip(capsys, tmp_path):
    """'--memory-limit 2000' ran every mode out of memory at 2000 B (no worker starts in
    under 1 MiB), where '--budget 8' was already refused as a slip for 8MiB."""
    small = ["--steps", "5", "--hidden", "4", "--batch", "2", "--modes", "baseline",
             "--rounds", "1", "--warmup", "0", "--out", str(tmp_path / "r.json")]  # fmt: skip
    err = one_line_error(capsys, ["run", "--memory-limit", "2000", *small])
    from ckptbench.cli.values import LIMIT_BYTES

    assert "2000 would be 2000 bytes (a size without a unit is bytes): write 2000MiB" in err
    assert LIMIT_BYTES.convert("2000B", None, None) == 2000  # said in bytes: taken as such
    assert LIMIT_BYTES.convert(str(2**20), None, None) == 2**20
    assert BYTES.convert("2000", None, None) == 2000  # --budget keeps its 1 KiB threshold


def test_a_precision_typed_without_percent_says_what_to_write(capsys):
    """'--precision 5' said only 'e.g. 5%'; it now says 'write 5% (or 0.05)', and a value no
    reading of which is in range keeps the example."""
    err = one_line_error(capsys, ["run", "--precision", "5", "--steps", "5"])
    assert err.rstrip().endswith("below 100%: write 5% (or 0.05)"), err
    err = one_line_error(capsys, ["run", "--precision", "2.5", "--steps", "5"])
    assert err.rstrip().endswith("write 2.5% (or 0.025)"), err
    for value in ("100", "abc"):
        err = one_line_error(capsys, ["run", "--precision", value, "--steps", "5"])
        assert err.rstrip().endswith("below 100% (e.g. 5%)"), err


def test_a_budget_without_strategy_optimal_names_the_strategy_in_use(capsys):
    """'run --budget 8MiB' (the default strategy, revolve) said only that a budget is
    optimal's; it now names the strategy the run would use."""
    err = one_line_error(capsys, ["run", "--budget", "8MiB", "--steps", "5"])
    assert "only used by strategy 'optimal', not 'revolve'" in err


def test_dtype_on_autograd_speaks_of_its_built_in_models(capsys):
    """An autograd plug-in keeps its own arrays' dtype (float32 included): the refusal of
    --dtype float32 on a built-in model and --dtype's help no longer say autograd computes
    in float64 only."""
    err = one_line_error(capsys, ["run", "--dtype", "float32", "--steps", "5"])
    assert "(autograd's built-in models compute in float64 only)" in err
    for command in ("run", "plan"):
        (option,) = [p for p in cli.commands[command].params if p.name == "dtype"]
        assert isinstance(option, click.Option) and option.help
        assert "autograd: float64 only" not in option.help
        assert "a plug-in: its own arrays' dtype" in option.help
    res = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200)
    assert "a plug-in: its own arrays' dtype" in res.output
