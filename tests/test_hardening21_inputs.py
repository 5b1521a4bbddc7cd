"""The twenty-first audit, hostile, on input handling: the size limit said as its rule, '-' as
an output file, a sample interval no sampler keeps, integers of thousands of digits, a FIFO
or a byte-order mark as a sweep config, and store-all's repetition number for one step.
Nothing is measured; nothing is timed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import make_result

from ckptbench.results.schema import save_result

CONFIG = '[case]\nmodel = "rnn"\nsteps = 20\nsnaps = 4\n'


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


# ------------------------------------------------------------- 1. the size limit, as a rule


def test_the_size_limit_is_said_as_the_rule_it_is(capsys) -> None:
    """'4EiB' is exactly 2**62 and refused: "the limit is 2**62 bytes" read as if 2**62 were
    taken. The rule is "below 2**62", for every size option and a config's size keys."""
    from ckptbench.results.units import MAX_BYTES, parse_size

    assert parse_size(str(MAX_BYTES - 1)) == MAX_BYTES - 1
    for text in ("4EiB", str(MAX_BYTES), "1" * 50):
        with pytest.raises(ValueError, match=r"must be below 2\*\*62 bytes \(4 EiB\)"):
            parse_size(text)
    err = one_line_error(capsys, ["plan", "--budget", "4EiB"])
    assert "'4EiB' is too large: a size must be below 2**62 bytes (4 EiB)" in err
    assert "the limit is" not in err
    err = one_line_error(capsys, ["run", "--memory-limit", "4EiB"])
    assert "must be below 2**62 bytes" in err


def test_a_config_size_key_says_the_same_rule(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("s.toml").write_text(CONFIG + "memory_limit_bytes = '4EiB'\n")
    err = one_line_error(capsys, ["sweep", "s.toml", "--dry-run"])
    assert "s.toml:5" in err and "must be below 2**62 bytes (4 EiB)" in err


# ------------------------------------------------------------- 2. '-' as an output file


def test_compare_dash_output_is_stdout_as_without_it(tmp_path: Path, capsys, monkeypatch):
    """`compare r.json -o -` wrote a file named '-'; it is stdout, as without -o."""
    monkeypatch.chdir(tmp_path)
    save_result(make_result(), tmp_path / "r.json")
    code, plain, err = run_cli(capsys, ["compare", "r.json"])
    assert code == 0, err
    code, dashed, err = run_cli(capsys, ["compare", "r.json", "-o", "-"])
    assert code == 0, err
    assert dashed == plain and "wrote" not in dashed + err
    assert not (tmp_path / "-").exists()
    # a file named '-' stays reachable
    code, _, err = run_cli(capsys, ["compare", "r.json", "-o", "./-"])
    assert code == 0, err
    assert (tmp_path / "-").read_text().strip() == plain.strip()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["plan", "--budget", "8MiB", "--save-costs", "-"], "--json prints the costs there"),
        (["check", "r.json", "--summary", "-"], "--format markdown prints the summary there"),
        (["check", "r.json", "--junit", "-"], "--format junit prints the JUnit XML there"),
        (["run", "--steps", "20", "--out", "-"], "--json prints the result document on stdout"),
    ],
)
def test_dash_where_stdout_carries_the_output_is_refused(
    argv, says, fake, tmp_path: Path, capsys, monkeypatch
) -> None:
    """`--save-costs -`, `--summary -`, `--junit -` and `run --out -` wrote a file named '-'
    in the current folder; stdout already carries each command's own output there. (The
    fake worker: the old code measured before it wrote '-'.)"""
    monkeypatch.chdir(tmp_path)
    save_result(make_result(), tmp_path / "r.json")
    err = one_line_error(capsys, argv)
    assert "'-' is not stdout here" in err and says in err
    assert "./- names a file called '-'" in err
    assert not (tmp_path / "-").exists()


def test_the_dash_rule_is_in_each_options_help(capsys) -> None:
    for command, words in (
        ("compare", "'-' is stdout, as without -o"),
        ("plan", "Not '-': stdout carries the plan"),
        ("check", "Not '-': --format junit prints"),
        ("run", "Not '-': --json prints the result"),
    ):
        code, out, _ = run_cli(capsys, [command, "--help"])
        assert code == 0 and words in " ".join(out.split()), command


# ------------------------------------------------------------- 3. the sample interval's floor


def test_a_sample_interval_below_a_millisecond_is_refused(fake, tmp_path, capsys, monkeypatch):
    """`--sample-interval 0.0001ms` (100 ns) was taken: the sampler never waits then and keeps
    a core busy (43% measured) beside the worker it measures."""
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--model", "rnn", "--steps", "20", "--sample-interval", "0.0001ms"]
    err = one_line_error(capsys, [*argv, "--out", "a.json"])
    assert "--sample-interval 1e-07 s is below the shortest it takes, 1 ms" in err
    assert "keep a core busy" in err
    assert not list(tmp_path.iterdir())
    Path("s.toml").write_text(CONFIG + "sample_interval_s = '0.5ms'\n")
    err = one_line_error(capsys, ["sweep", "s.toml", "--dry-run"])
    assert "s.toml:5: sample_interval_s 0.0005 s is below the shortest it takes, 1 ms" in err
    from ckptbench.measure.sampling import MIN_SAMPLE_INTERVAL_S, sample_interval_problem

    assert sample_interval_problem(MIN_SAMPLE_INTERVAL_S, None) is None
    assert sample_interval_problem(0.0009, None) is not None


# ------------------------------------------------------------- 4. integers of 5000 digits


@pytest.mark.parametrize(
    ("argv", "option", "takes"),
    [
        (["schedule", "--snaps", "2", "--steps"], "--steps", "a whole number from 1 up"),
        (["run", "--hidden"], "--hidden", "a whole number from 1 up"),
        (["run", "--rounds"], "--rounds", "a whole number from 1 up"),
        (["run", "--seed"], "--seed", "a whole number from 0 up"),
        (["run", "--threads"], "--threads", "a whole number from 1 to 1024"),
        (["run", "--output"], "--output", "a whole number from 1 up"),
    ],
)
def test_an_integer_of_thousands_of_digits_is_cut_and_its_range_said(argv, option, takes, capsys):
    """A 5000-digit --steps was echoed whole (5080 characters) and called "not a valid integer
    range": Python reads at most 4300 digits as an int."""
    err = one_line_error(capsys, [*argv, "1" * 5000])
    assert len(err) < 300, len(err)
    assert "... (5000 characters)" in err and f"{option} takes {takes}" in err
    assert "not a valid integer range" not in err
    assert "too long a number to read (over 4300 digits)" in err


def test_a_long_number_out_of_a_bounded_range_is_cut_too(capsys) -> None:
    err = one_line_error(capsys, ["run", "--threads", "1" * 4000])
    assert len(err) < 300, len(err)
    assert "is out of range: --threads takes a whole number from 1 to 1024" in err
    err = one_line_error(capsys, ["run", "--steps", "abc"])
    assert "'abc' is not a number: --steps takes a whole number from 1 up" in err
    err = one_line_error(capsys, ["run", "--steps", "0"])  # short: click's own words
    assert "0 is not in the range x>=1" in err


def test_a_config_integer_of_thousands_of_digits_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("s.toml").write_text("[case]\nsteps = " + "1" * 5000 + "\n")
    err = one_line_error(capsys, ["sweep", "s.toml", "--dry-run"])
    assert "s.toml: a number of more than 4300 digits" in err
    assert "set_int_max_str_digits" not in err


# ------------------------------------------------------------- 5. a FIFO, a byte-order mark


def test_a_named_pipe_as_a_sweep_config_is_not_a_regular_file(tmp_path, capsys, monkeypatch):
    """A FIFO nobody writes to read as empty: "nothing to measure: give a [case] table"."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo.toml")
    err = one_line_error(capsys, ["sweep", "fifo.toml", "--dry-run"])
    assert "fifo.toml: is a FIFO (named pipe), not a file ckptbench reads" in err
    assert "nothing to measure" not in err
    from ckptbench.results.inputs import named_pipe

    assert named_pipe("fifo.toml") and not named_pipe("none.toml")
    read, write = os.pipe()
    try:
        assert not named_pipe(f"/dev/fd/{read}")  # a pipe the shell hands over: below
    finally:
        os.close(read)
        os.close(write)


def test_a_pipe_the_shell_hands_over_is_still_read() -> None:
    """`sweep <(...)` and `sweep /dev/stdin` pass a pipe as /dev/fd/N: read like a file
    (unchanged: a guard for the FIFO refusal above)."""
    from ckptbench.sweep.config import load_config

    read, write = os.pipe()
    try:
        os.write(write, CONFIG.encode())
        os.close(write)
        assert len(load_config(f"/dev/fd/{read}").cases) == 1
    finally:
        os.close(read)


def test_a_config_with_a_byte_order_mark_is_read(tmp_path: Path, capsys, monkeypatch) -> None:
    """Windows editors write a UTF-8 BOM; tomllib refused it as "Invalid statement"."""
    monkeypatch.chdir(tmp_path)
    Path("bom.toml").write_bytes(b"\xef\xbb\xbf" + CONFIG.encode())
    code, out, err = run_cli(capsys, ["sweep", "bom.toml", "--dry-run"])
    assert code == 0, err
    assert "1 cell" in out + err and "Invalid statement" not in err
    Path("bad.toml").write_bytes(b"\xef\xbb\xbf[case]\nsteps = 'x'\n")
    err = one_line_error(capsys, ["sweep", "bad.toml", "--dry-run"])
    assert "bad.toml:2" in err  # lines count as the editor shows them


# ------------------------------------------------------------- 6. store-all with one step


def test_store_all_of_one_step_has_repetition_number_zero(capsys) -> None:
    """r(l, s) = min{r : C(s + r, s) >= l} is 0 for l = 1 (C(s, s) = 1): no step is advanced,
    as the schedule's "max advances 0" beside it said; store-all printed r = 1."""
    from ckptbench.schedules import get_strategy
    from ckptbench.schedules.revolve import repetition_number

    form = get_strategy("store-all").closed_form
    assert form.repetitions(1, 1) == 0 == repetition_number(1, 1)
    assert form.repetitions(2, 2) == 1 == repetition_number(2, 2)
    code, out, err = run_cli(capsys, ["schedule", "--strategy", "store-all", "--steps", "1",
                                      "--snaps", "1"])  # fmt: skip
    assert code == 0, err
    rows = {" ".join(line.split()[:-1]): line.split()[-1] for line in out.splitlines()[1:]}
    assert rows["repetition number r(l, s)"] == "0" == rows["max advances of one step"]
