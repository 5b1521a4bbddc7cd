"""A sweep config refuses what the command line refuses, in its own one-line form
('c.toml:N: case.timeout_s: ...'), from one definition of each bound: ``timeout_s =
9223372036854775807`` ran a sweep where ``run --timeout`` of that many seconds is refused
(``results.units.MAX_SECONDS``). ``sweep --dry-run`` says an ``--out`` name past the system's
limit as every other command does, and ``profile`` says bad input in one line, before the
notes on what it clamped. Nothing real is measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import run_cli
from click.testing import CliRunner

from ckptbench.cli import cli

BIG = 2**63  # past every whole-number field (Case: below 2**63)


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")

    def measured(*args, **kwargs):  # a run past its checks fails here, measuring nothing
        raise AssertionError("taken: run went past its checks")

    monkeypatch.setattr("ckptbench.cli.run.checked_in_worker", measured)


def invoke(args: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(cli, args, catch_exceptions=False)
    return res.exit_code, res.stdout, res.stderr


#: (config key, its value as TOML, the run option and its value as typed): each refused.
REFUSED = [
    ("steps", str(2**31 + 1), "--steps", str(2**31 + 1)),
    ("snaps", str(BIG), "--snaps", str(BIG)),
    ("hidden", str(BIG), "--hidden", str(BIG)),
    ("batch", str(BIG), "--batch", str(BIG)),
    ("input", str(BIG), "--input", str(BIG)),
    ("output", str(BIG), "--output", str(BIG)),
    ("seed", str(BIG), "--seed", str(BIG)),
    ("warmup", str(BIG), "--warmup", str(BIG)),
    ("repeats", str(BIG), "--repeats", str(BIG)),
    ("rounds", str(BIG), "--rounds", str(BIG)),
    ("rounds", "0", "--rounds", "0"),
    ("rounds", "10001", "--rounds", "10001"),  # results.schema.MAX_ROUNDS
    ("repeats", "10001", "--repeats", "10001"),
    ("warmup", "10001", "--warmup", "10001"),
    ("threads", "1025", "--threads", "1025"),
    ("timeout_s", str(2**63 - 1), "--timeout", str(2**63 - 1)),
    ("timeout_s", "1e300", "--timeout", "1" + "0" * 300),
    ("timeout_s", "1e12", "--timeout", "1000000000000"),
    ("timeout_s", '"9223372036854775807"', "--timeout", "9223372036854775807"),
    ("sample_interval_s", "11", "--sample-interval", "11s"),
    ("sample_interval_s", "1e300", "--sample-interval", "1" + "0" * 300),
]


@pytest.mark.parametrize(("key", "toml", "option", "typed"), REFUSED)
def test_config_refuses_what_run_refuses(
    capsys, key: str, toml: str, option: str, typed: str
) -> None:
    code, _, err = run_cli(capsys, ["run", "--model", "lstm", "--steps", "20", option, typed])
    assert code == 2 and err.startswith("ckptbench: error: ") and err.count("\n") == 1, err
    other = "seed = 1" if key != "seed" else "batch = 2"  # the key on line 4
    Path("c.toml").write_text(f'[case]\nmodel = "lstm"\n{other}\n{key} = {toml}\n')
    code, out, err = invoke(["sweep", "c.toml", "--dry-run"])
    assert code == 2, out + err
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"Error: c.toml:4: case.{key}: ") or (
        err.startswith("Error: c.toml:4: ") and key in err
    ), err
    assert "Traceback" not in err and "sweep c:" not in out


@pytest.mark.parametrize("option", ["--rounds", "--repeats", "--warmup", "--max-rounds"])
@pytest.mark.parametrize("typed", ["10001", "9223372036854775807"])
def test_counts_are_refused_past_the_one_bound_naming_it(capsys, option: str, typed: str) -> None:
    """``--rounds 9223372036854775807`` was taken (run stopped at --max-time; a sweep has no
    cap); every count of rounds or iterations is held to ``schema.MAX_ROUNDS``, said."""
    code, out, err = run_cli(capsys, ["run", "--model", "lstm", "--steps", "20", option, typed])
    assert code == 2 and out == "", out
    name = option if option == "--max-rounds" else option[2:]
    least = 0 if option == "--warmup" else 1
    assert err == (
        f"ckptbench: error: {name} must be >= {least} and at most 10,000 (more is a typo, not "
        f"a measurement), got {typed}\n"
    ), err


def test_max_rounds_is_bounded_when_unused_too(capsys) -> None:
    argv = ["run", "--steps", "20", "--precision", "off", "--max-rounds", "10001"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2 and "--max-rounds must be >= 1 and at most 10,000" in err, err


def test_a_sweep_at_the_bound_is_taken_and_its_estimate_said_in_days() -> None:
    """10 000 rounds of a 2000-step LSTM: days, said as days, not '112 h 30 min'."""
    Path("c.toml").write_text('[case]\nmodel = "lstm"\nsteps = 2000\nrounds = 10000\n')
    code, out, err = invoke(["sweep", "c.toml", "--dry-run"])
    assert code == 0, err
    roughly = out.splitlines()[-1].split("roughly ")[1].split(" -> ")[0]
    assert roughly.endswith(" h") and " d " in roughly, out


def test_config_timeout_in_a_grid_is_bounded_too() -> None:
    Path("c.toml").write_text('[case]\nmodel = "lstm"\nsteps = 20\n[grid]\ntimeout_s = [1, 1e13]\n')
    code, _, err = invoke(["sweep", "c.toml", "--dry-run"])
    assert code == 2
    assert err == (
        "Error: c.toml:5: grid.timeout_s: '10000000000000.0' is too long a "
        "duration (below 1e+12 s)\n"
    )


@pytest.mark.parametrize("value", ["999999999999", "600", "0.5", '"10m"'])
def test_config_timeout_below_the_bound_is_taken(value: str) -> None:
    Path("c.toml").write_text(f'[case]\nmodel = "lstm"\nsteps = 20\ntimeout_s = {value}\n')
    code, out, err = invoke(["sweep", "c.toml", "--dry-run"])
    assert code == 0, err
    assert "dry run: nothing measured" in out


def test_dry_run_says_a_long_out_name_as_the_rest_of_ckptbench() -> None:
    Path("c.toml").write_text('[case]\nmodel = "lstm"\nsteps = 20\n')
    code, out, err = invoke(["sweep", "c.toml", "--out", "x" * 300, "--dry-run"])
    assert code == 2, out + err
    assert len(err.splitlines()) == 1, err
    assert "Errno" not in err and "File name too long" not in err
    assert err.startswith("ckptbench: error: 'xxx")
    assert err.endswith(
        "... (311 characters): name too long (a name may have 255 bytes, a path 4096)\n"
    ), err


def test_profile_bad_input_is_one_line_before_its_notes(capsys) -> None:
    Path("noplug.py").write_text("x = 1\n")
    argv = ["profile", "--steps", "5", "--snaps", "10", "--model", "noplug.py"]
    code, _, err = run_cli(capsys, argv)
    assert code == 2
    assert err.splitlines() == [
        "ckptbench: error: --model: a plug-in file names its factory after a colon: "
        "noplug.py:NAME (e.g. noplug.py:make; docs/plugins.md)"
    ]


def test_profile_still_says_its_notes_when_it_runs(monkeypatch) -> None:
    import ckptbench.measure.tasks as tasks

    monkeypatch.setattr(tasks, "profile_lines", lambda case, job: {"rows": []})
    code, out, err = invoke(["profile", "--steps", "5", "--snaps", "10", "--json"])
    assert code == 0, err
    assert "note: --snaps 10 clamped to 5: never more slots than steps" in err
    assert '"rows"' in out
