"""A twentieth audit (2026-11-30): a value echoed twice or whole, a config key echoed whole,
check's words for a file saved mid-run, a path echoed otherwise than typed, and a missing
file said three ways. Each test failed on the code before its fix."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli

LONG = "lstm" + "X" * 5000
CHUNK = "X" * 40  # in the error once per echo of LONG

# ------------------------------------------------ 1. --model echoed once, cut when long


@pytest.mark.parametrize("command", ["run", "plan", "profile"])
def test_an_unknown_model_is_echoed_once_and_cut(capsys, command):
    """`run --model <5000 characters>` echoed the whole value twice ('--model lstmX...:
    unknown workload 'lstmX...': expected one of ...'), 10 KB on one line."""
    extra = ["--budget", "1MiB"] if command == "plan" else []
    err = one_line_error(capsys, [command, "--model", LONG, "--steps", "50", *extra])
    assert err.count(CHUNK) == 1 and len(err) < 400, err
    assert "(5004 characters)" in err and "unknown workload" in err, err


def test_a_mistyped_model_is_named_once_with_the_fix(capsys):
    """'--model lstn: unknown workload 'lstn' (did you mean lstm?)' named it twice."""
    err = one_line_error(capsys, ["run", "--model", "lstn", "--steps", "50"])
    assert err.startswith("ckptbench: error: --model: unknown workload 'lstn' (did you mean "), err
    assert err.count("lstn") == 1, err


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        (LONG + ".py:make", "workload file 'lstmX"),  # a name too long: a traceback
        ("x/" + LONG + ".py:make", "workload file 'x/lstmX"),
        (LONG + ":make", "no workload module 'lstmX"),  # a traceback too (the module's folder)
        (LONG + ".py", "a plug-in file names its factory after a colon: FILE.py:NAME"),
    ],
)
def test_a_long_plugin_spec_is_echoed_once_and_cut(capsys, spec, said):
    err = one_line_error(capsys, ["run", "--model", spec, "--steps", "50"])
    assert said in err and err.count("lstmX") == 1 and len(err) < 500, err


def test_a_missing_plugin_file_is_named_once_as_typed(capsys):
    """'--model nope.py/:make: workload file 'nope.py' not found': twice, the '/' dropped,
    and not the words every other missing file gets."""
    err = one_line_error(capsys, ["run", "--model", "gone/x.py/:make", "--steps", "50"])
    assert err == "ckptbench: error: --model: workload file 'gone/x.py/': no such file or folder\n"


def test_a_missing_plugin_module_is_named_once(capsys):
    """'--model nopemod:make: cannot import workload module 'nopemod': ModuleNotFoundError:
    No module named 'nopemod'' named it three times."""
    err = one_line_error(capsys, ["run", "--model", "nopemod_xyz:make", "--steps", "50"])
    assert err == "ckptbench: error: --model: no workload module 'nopemod_xyz'\n", err


@pytest.mark.parametrize(
    "option", ["--backend", "--strategy", "--device", "--executor", "--dtype", "--budget"]
)
def test_a_long_value_of_any_run_option_is_echoed_once_and_cut(capsys, option):
    """Kept: the choices and sizes already cut their value (``cli.values.not_a_choice``)."""
    err = one_line_error(capsys, ["run", option, LONG, "--steps", "50"])
    assert err.count("lstmX") == 1 and len(err) < 500, err


# --------------------------------------------- 2. a config key: one printable line, cut


@pytest.mark.parametrize(
    "text",
    [
        "[case]\n{key} = 1\n",
        "{key} = 1\n",
        "[case]\nmodel = 'lstm'\n[grid]\n{key} = [1]\n",
        "[case]\nmodel = 'lstm'\n[expect]\n{key} = 1\n",
        "[case]\nmodel = 'lstm'\n[expect.{key}]\nslowdown_max = 2\n",
        "name = '{key}'\n[case]\nmodel = 'lstm'\n",
    ],
)
def test_a_long_config_key_is_cut(tmp_path: Path, capsys, text):
    """An unknown key of 3000 characters was echoed whole ('case.kkkk...: unknown case
    key')."""
    (tmp_path / "c.toml").write_text(text.format(key="k" * 3000))
    err = one_line_error(capsys, ["sweep", str(tmp_path / "c.toml"), "--dry-run"])
    assert err.count("k" * 40) == 1 and "(3000 characters)" in err and len(err) < 600, err


def test_a_quoted_config_key_with_escapes_is_one_quoted_line(tmp_path: Path, capsys):
    r"""A quoted key '"a\nb\u001b[31m"' read 'case.a\nb\x1b[31m: ...', the key's end unclear."""
    (tmp_path / "c.toml").write_text('[case]\n"a\\nb\\u001b[31mred" = 1\n')
    err = one_line_error(capsys, ["sweep", str(tmp_path / "c.toml"), "--dry-run"])
    assert ": case.'a\\nb\\x1b[31mred': unknown case key" in err, err  # the line: [case]
    assert "\x1b" not in err


# ------------------------------------------ 3. check says a file saved mid-run as compare


def _kept(rounds_kept: int, environment: dict):
    from _synthetic import CI_CASE, make_result

    r = make_result(CI_CASE.with_(rounds=3), rounds=3, seed=19)
    modes = tuple(m for m in r.modes if m.round < rounds_kept)
    return replace(r, modes=modes, environment={**r.environment, **environment})


def test_check_words_a_file_saved_mid_run_as_compare_does(tmp_path: Path, capsys, monkeypatch):
    """check said 'saved mid-run and never finished (killed outright, or still running),
    before round 2 (1 complete round kept)' where compare's status says 'never finished (1
    complete round)'; and 'interrupted before round 3 (2 complete rounds kept)' where
    compare's says 'interrupted before round 3 (2 complete rounds)'."""
    from ckptbench.frame import cells_frame
    from ckptbench.results.schema import save_result

    mid = _kept(1, {"finished": False})
    stopped = _kept(2, {"finished": False, "interrupted": {"by": "SIGTERM", "round": 3}})
    monkeypatch.setenv("COLUMNS", "300")
    lines = {}
    for name, result in (("mid", mid), ("stopped", stopped)):
        save_result(result, tmp_path / f"{name}.json")
        status = cells_frame([result]).iloc[0]["status"]
        code, out, _ = run_cli(capsys, ["check", str(tmp_path / f"{name}.json")])
        (lines[name],) = [s for s in out.splitlines() if " status: " in s]
        assert code == 1 and f" status: {status}" in lines[name], (status, lines[name])
        assert "kept" not in lines[name], lines[name]
    assert (
        " status: never finished (1 complete round), saved mid-run: killed outright, or "
        in (lines["mid"])
    )
    assert " status: interrupted before round 3 (2 complete rounds)" in lines["stopped"]


# ------------------------------------------------------- 4. a path echoed as typed


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "{d}/gone/"],
        ["check", "{d}/gone/"],
        ["check", "{d}/r.json", "--config", "{d}/gone/"],
        ["sweep", "{d}/gone/"],
        ["plan", "--steps", "50", "--budget", "1MiB", "--costs", "{d}/gone/"],
    ],
)
def test_a_path_ending_in_a_slash_is_echoed_as_typed(tmp_path: Path, capsys, argv):
    """'compare nope/' said 'nope: no such file or folder' (pathlib drops the '/')."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=3), tmp_path / "r.json")
    err = one_line_error(capsys, [a.format(d=tmp_path) for a in argv])
    assert err.endswith(f"{tmp_path}/gone/: no such file or folder\n"), err


def test_a_folder_option_naming_a_file_is_echoed_as_typed(tmp_path: Path, capsys):
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=3), tmp_path / "r.json")
    err = one_line_error(capsys, ["compare", str(tmp_path / "r.json"), "--plots",
                                  f"{tmp_path}/r.json/"])  # fmt: skip
    assert f"--plots {tmp_path}/r.json/: exists and is not a folder" in err, err
    (tmp_path / "d").mkdir()
    err = one_line_error(capsys, ["compare", f"{tmp_path}/d/"])
    assert err.endswith(f"{tmp_path}/d/: no result files in this folder\n"), err


# ------------------------------------------- 5. every missing file: no such file or folder


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{d}/r.json", "--config", "{d}/gone.toml"],
        ["sweep", "{d}/gone.toml"],
        ["plan", "--steps", "50", "--budget", "1MiB", "--costs", "{d}/gone.json"],
        ["run", "--steps", "50", "--strategy", "optimal", "--budget", "1MiB", "--costs",
         "{d}/gone.json"],
    ],
)  # fmt: skip
def test_a_missing_input_file_says_no_such_file_or_folder(tmp_path: Path, capsys, argv):
    """'--config nope.toml' said 'nope.toml: cannot read (No such file or directory)' where
    a result file said 'no such file or folder'."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=3), tmp_path / "r.json")
    err = one_line_error(capsys, [a.format(d=tmp_path) for a in argv])
    assert err.endswith(": no such file or folder\n") and "cannot read" not in err, err
    assert str(tmp_path / "gone.") in err


def test_a_folder_given_for_a_file_says_so_alike(tmp_path: Path, capsys):
    """'--config d' said 'd: cannot read (Is a directory)', '--costs d' 'is a folder, not a
    file ckptbench reads'."""
    (tmp_path / "d").mkdir()
    err = one_line_error(capsys, ["sweep", str(tmp_path / "d")])
    assert err.endswith("/d: is a folder, not a file ckptbench reads\n"), err


# --------------------------------------------- 6. a newcomer's first ten minutes (Task B)


def test_the_floor_line_says_a_step_in_the_unit_the_time_line_uses():
    """'95 untaped steps x 5.33 ms' above '95 extra evaluations x 3875.0 µs': one step's time
    in two units, one line apart."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.render.expected import floor_line
    from ckptbench.render.format import fmt_per_step
    from ckptbench.results.schema import Mode

    result = make_result(CI_CASE, seed=3)
    base = result.summary.mode(Mode.BASELINE).time.median / result.case.steps
    line = floor_line(result)
    assert line is not None and f" extra evaluations x {fmt_per_step(base)}, the " in line, line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--help"], "a layer stack"),  # it said 'the same RNN, LSTM or plug-in gradient'
        (["plan", "--help"], "(--model cnn-stack, ...)"),  # it showed ``--model cnn-stack``
        (["sweep", "--help"], "(default: results/NAME, NAME the config's name)"),
        (["profile", "--help"], "changed the most"),  # not 'the lines that hold the most'
    ],
)
def test_the_help_says_what_a_newcomer_reads_it_for(capsys, monkeypatch, argv, said):
    monkeypatch.setenv("COLUMNS", "400")
    code, out, _ = run_cli(capsys, argv)
    assert code == 0 and said in " ".join(out.split()) and "``" not in out, out


def test_a_run_of_one_round_does_not_promise_an_interval_from_round_2():
    """`run --rounds 1` printed 'slowdown 1.09x (the rounds' interval from round 2)' where
    no round 2 would run."""
    from types import SimpleNamespace

    from ckptbench.measure.runner import Precision
    from ckptbench.render.console import JobClock
    from ckptbench.results.schema import Case, Mode

    for rounds, precision, said in (
        (1, None, "slowdown 1.09x (one round: no interval)"),
        (3, None, "slowdown 1.09x (the rounds' interval from round 2)"),
        (1, Precision(0.05, 30, 240.0), "slowdown 1.09x (the rounds' interval from round 2)"),
    ):
        clock = JobClock(Case(rounds=rounds), (Mode.NORMAL,), precision, guess_round_s=1.0)
        clock.done_rounds, clock.estimate = {0}, {"slowdown": SimpleNamespace(value=1.09)}
        assert said in clock.summary(), clock.summary()


def test_before_after_says_what_its_n_column_counts(tmp_path: Path, capsys, monkeypatch):
    """compare --against showed a column 'n' of '1v1' that nothing explained."""
    from _synthetic import CI_CASE, make_result

    from ckptbench.results.schema import save_result

    save_result(make_result(CI_CASE, seed=3), tmp_path / "old.json")
    save_result(make_result(CI_CASE, seed=4), tmp_path / "new.json")
    monkeypatch.setenv("COLUMNS", "250")
    argv = ["compare", str(tmp_path / "new.json"), "--against", str(tmp_path / "old.json")]
    code, out, _ = run_cli(capsys, argv)
    assert code == 0 and "n: measured iterations, before v after" in out, out


# ------------------------------------------------ a planned run says it measures costs first


def test_a_planned_run_says_it_measures_its_step_costs_first(capsys, tmp_path):
    """`run --strategy optimal` without --costs measured the step costs in a worker of its
    own before it said anything (seconds to minutes of silence on a large case, beside an
    estimate that leaves them out); the plan line now says them first, in its estimate
    (tests/test_costs_estimate.py); with --costs nothing is measured, nor said."""
    tiny = ["--model", "rnn", "--steps", "12", "--hidden", "4", "--batch", "2", "--input", "4"]
    budget = ["--strategy", "optimal", "--budget", "16KiB"]
    once = ["--rounds", "1", "--warmup", "0", "--repeats", "1"]
    code, _, err = run_cli(capsys, ["run", *tiny, *budget, *once, "--out", str(tmp_path / "a")])
    assert code == 0, err
    said = "the plan's step costs first, in a worker of their own"
    assert said in err and err.index("measuring rnn 12 steps") < err.index(said), err
    costs = tmp_path / "costs.json"
    code, _, err = run_cli(capsys, ["plan", *tiny, "--budget", "16KiB", "--save-costs", str(costs)])
    assert code == 0, err
    code, _, err = run_cli(
        capsys, ["run", *tiny, *budget, *once, "--costs", str(costs), "--out", str(tmp_path / "b")]
    )
    assert code == 0 and said not in err, err
