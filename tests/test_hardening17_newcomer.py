"""A newcomer's first ten minutes (session N2): what they typed, what ckptbench answered,
and what it answers now.

1. A torch (or JAX) that is installed but raises on import passed ``run``'s up-front check
   (the package is findable), then every worker failed and a result file was written (exit
   1); ``plan`` said "measuring the step costs failed". The framework is now imported once
   in a disposable worker before anything is measured: one line naming the import error and
   the install command, exit 2, no file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from _cli import one_line_error

TINY = ["--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1"]
CUDART = "libcudart.so.12: cannot open shared object file"


def broken_package(tmp_path: Path, monkeypatch, name: str, raises: str) -> None:
    """A package ``name`` on the workers' PYTHONPATH whose import raises ``raises``, also
    found (never imported) by ckptbench's own up-front check where the real one is not
    installed (CI's first step has neither torch nor JAX)."""
    (tmp_path / "fake" / name).mkdir(parents=True)
    (tmp_path / "fake" / name / "__init__.py").write_text(f"raise {raises}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    path = os.pathsep.join(p for p in (str(tmp_path / "fake"), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.chdir(tmp_path)


# ------------------------------------------------------- 1: a framework broken on import


@pytest.mark.parametrize(
    ("backend", "raises", "shown"),
    [
        ("torch", f"ImportError({CUDART!r})", CUDART),
        ("torch", "OSError('fbgemm.dll: the specified module could not be found')", "fbgemm"),
        ("jax", f"ImportError({CUDART!r})", CUDART),
    ],
    ids=["torch-importerror", "torch-oserror", "jax-importerror"],
)
@pytest.mark.parametrize("command", ["run", "plan"])
def test_a_framework_that_raises_on_import_is_one_line_before_anything_is_measured(
    tmp_path, monkeypatch, capsys, backend, raises, shown, command
) -> None:
    broken_package(tmp_path, monkeypatch, backend, raises)
    extra = ["--budget", "1MiB"] if command == "plan" else [*TINY[4:], "--out", "r.json"]
    err = one_line_error(capsys, [command, "--backend", backend, *TINY[:4], *extra])
    assert f"--backend {backend} needs" in err and "cannot be imported" in err, err
    assert shown in err and f"pip install 'ckptbench[{backend}]'" in err, err
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "results").exists()


def test_a_sweep_over_a_framework_that_raises_on_import_is_one_line(
    tmp_path, monkeypatch, capsys
) -> None:
    broken_package(tmp_path, monkeypatch, "torch", f"ImportError({CUDART!r})")
    config = tmp_path / "grid.toml"
    config.write_text('[case]\nbackend = "torch"\nmodel = "rnn"\nsteps = 20\nrounds = 1\n')
    err = one_line_error(capsys, ["sweep", str(config), "--out", str(tmp_path / "out")])
    assert "--backend torch needs PyTorch" in err and CUDART in err, err
    assert "pip install 'ckptbench[torch]'" in err, err


# ------------------------------------- 2: intervals from two rounds on a noisy machine


#: an interval's end in exponent form, '[6.9e-36, 2.8e+34]'
EXPONENT_END = re.compile(r"[\[ ][0-9.]+e[+-][0-9]+[,\]]")


def noisy_two_rounds():
    """Two rounds whose checkpointed times differ 300 000-fold: a true, absurd interval."""
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    result = make_result(CI_CASE, seed=3, rounds=2, time_cv=0.0)
    modes = []
    for m in result.modes:
        if m.mode.value == "checkpointed":
            f = 1e-3 if m.round == 0 else 300.0
            m = replace(m, iterations=tuple(
                replace(i, wall_time_s=i.wall_time_s * f, cpu_time_s=i.cpu_time_s * f)
                for i in m.iterations
            ))  # fmt: skip
        modes.append(m)
    return replace(result, modes=tuple(modes))


def test_interval_ends_far_off_the_estimate_read_as_bounds() -> None:
    from ckptbench.results.units import half_width_text, interval_text, relative_text

    assert interval_text(0.0000012, 512539.87, 2, center=0.8) == ("<0.008", ">80")
    assert interval_text(0.5, 512539.87, 2, center=1.31) == ("0.50", ">100")
    assert interval_text(1.25, 1.37, 2, center=1.31) == ("1.25", "1.37")
    assert interval_text(0.0000012, 512539.87, 2) == ("0.0000012", "512539.87")  # no estimate
    assert half_width_text(643697.473) == "wider than +/-1000%"
    assert half_width_text(0.046) == "within +/-4.6%"
    assert relative_text(6.3e34) == ">1000%" and relative_text(0.1) == "10.0%"


def test_run_and_compare_print_a_hopeless_interval_readably_and_keep_it_exact(tmp_path) -> None:
    import json

    from ckptbench.analysis import compare
    from ckptbench.render import compare_report, warning_lines
    from ckptbench.render.formats import get_format
    from ckptbench.render.reports import run_report
    from ckptbench.results.schema import result_to_dict

    result = noisy_two_rounds()
    low, high = result.summary.slowdown.interval
    assert low < 1e-30 and high > 1e30  # the exact ends, as computed
    text = get_format("text").render(run_report(result), 200)
    assert "0.44x [<0.005, >40]" in text and not EXPONENT_END.search(text), text
    assert "<x, >y: an end more than 100x off the estimate" in text, text
    warned = " ".join(warning_lines(result))
    assert "(up to >1000%)" in warned and "00000000" not in warned, warned
    compared = get_format("text").render(compare_report(compare([result])), 200)
    assert "0.44x [<0.005, >40]" in compared and not EXPONENT_END.search(compared), compared
    doc = json.loads(get_format("json").render(run_report(result), None))
    assert doc == json.loads(json.dumps(result_to_dict(result)))
    assert doc["summary"]["slowdown_ci"] == [low, high]


# ------------------------------- 3: compare's narrow table keeps a failed cell's status


def test_a_narrow_compare_keeps_the_status_of_failed_cells_and_no_column_of_one_host() -> None:
    from dataclasses import replace

    from _synthetic import CI_CASE, make_result

    from ckptbench.analysis import compare
    from ckptbench.render import compare_report
    from ckptbench.render.formats import get_format
    from ckptbench.results.schema import Status

    failed = {m: Status.FAILED for m in ("baseline", "normal", "checkpointed")}
    results = [
        make_result(replace(CI_CASE, hidden=32), seed=1, rounds=2, status=failed),
        make_result(CI_CASE, seed=2, rounds=2),
    ]
    text = get_format("text").render(compare_report(compare(results)), 100)
    table = text.split("\n\n")[0]
    header = table.splitlines()[1]
    assert "status" in header and "base, normal, ckpt failed" in table, table
    assert "host" not in header and "on host host-a" in table, table
    assert "not shown at this width" not in table or "host" not in table.split("width:")[1]
    wide = get_format("text").render(compare_report(compare(results)), 250).split("\n\n")[0]
    assert "baseline: failed, normal: failed, checkpointed: failed" in wide, wide
    assert "host" not in wide.splitlines()[1], wide  # the note names it
    # several hosts: a column again, kept like the figures
    two = [results[0], replace(results[1], host="host-b")]
    wide = get_format("text").render(compare_report(compare(two)), 250).split("\n\n")[0]
    assert "host" in wide.splitlines()[1], wide


# ------------------------------------------- 4: a choice mistyped gets a suggestion


@pytest.mark.parametrize(
    ("argv", "near"),
    [
        (["run", "--backend", "pytorch"], "torch"),
        (["run", "--backend", "Torch"], "torch"),
        (["plan", "--backend", "jaxlib", "--budget", "8MiB"], "jax"),
        (["run", "--strategy", "revolv"], "revolve"),
        (["run", "--strategy", "binomial"], "revolve"),
        (["run", "--device", "cuda:0"], "cuda"),
        (["run", "--dtype", "fp32"], "float32"),
        (["run", "--format", "jsn"], "json"),
        (["compare", ".", "--format", "htm"], "html"),
        (["compare", ".", "--format", "md"], "markdown"),
        (["profile", "--mode", "checkpoint"], "checkpointed"),
    ],
)
def test_a_mistyped_choice_is_answered_with_the_nearest(capsys, argv, near) -> None:
    err = one_line_error(capsys, argv)
    assert f"(Did you mean '{near}'?)" in err, err


def test_a_choice_with_nothing_near_gets_no_guess(capsys) -> None:
    err = one_line_error(capsys, ["run", "--backend", "tensorflow"])
    assert "is not one of" in err and "Did you mean" not in err, err


# ----------------------------- 5: --format table, the old name of text, not offered


@pytest.mark.parametrize("command", ["run", "plan", "compare", "check"])
def test_help_offers_the_formats_by_their_names_and_still_takes_the_old_one(
    capsys, command
) -> None:
    from _cli import run_cli

    from ckptbench.cli.outputs import FormatChoice
    from ckptbench.render.reports import RUN_SECTIONS

    code, out, _ = run_cli(capsys, [command, "--help"])
    assert code == 0
    # the option's own line (other options' help may name '--format markdown')
    metavar = re.search(r"^\s+--format\s+(\S+)", out, re.MULTILINE).group(1)
    assert "text" in metavar and "table" not in metavar, metavar
    assert FormatChoice(lambda: RUN_SECTIONS).convert("table", None, None) == "table"


# --------------------- 6: plan's and profile's columns said under their tables, as run's


def test_plan_says_what_tapes_kept_and_its_peak_are(tmp_path, capsys) -> None:
    import json

    from _cli import run_cli

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"forward_time_s": 0.0004, "taped_time_s": 0.0026,
                                 "state_bytes": 65536, "tape_bytes": 450000}))  # fmt: skip
    argv = ["plan", "--steps", "300", "--budget", "4MiB", "--costs", str(costs)]
    code, out, err = run_cli(capsys, argv)
    assert code == 0, err
    assert "tapes kept (peak)" in out
    assert "tapes kept (peak): steps taped ahead and kept until their reverse" in out, out


def test_profile_says_what_a_negative_increment_is() -> None:
    from ckptbench.render.profile import profile_table
    from ckptbench.render.table import to_text

    row = {"file": "m.py", "line": 3, "function": "step", "occurrences": 50, "source": "x = 1"}
    doc = {"rows": [{**row, "increment_mib": 12.5}, {**row, "line": 4, "increment_mib": -3.0}]}
    text = to_text(profile_table(doc, 10), 120)
    assert "-3.00" in text and "increment MiB: " in text and "negative: " in text, text
