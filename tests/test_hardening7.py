"""Session of 2026-11-28/29 (no GPU): a fourth audit's findings (hostile command lines),
each with a test that fails on the code before it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptbench.cli import cli

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "autograd_rnn.py"
TINY = ["--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4"]


def _invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("form", ["file", "package"])
def test_save_costs_never_replaces_the_plugins_own_source(tmp_path, monkeypatch, form):
    """`plan --model plug.py:make --save-costs plug.py --force` wrote the costs over the
    plug-in (exit 0); `run --out` refused the file form only."""
    monkeypatch.chdir(tmp_path)
    if form == "file":
        source, model = tmp_path / "plug.py", "plug.py:make"
    else:
        (tmp_path / "mypkg").mkdir()
        (tmp_path / "mypkg" / "__init__.py").write_text("")
        source, model = tmp_path / "mypkg" / "mod.py", "mypkg.mod:make"
    shutil.copy(EXAMPLE, source)
    before = source.read_bytes()
    res = _invoke("plan", "--model", model, *TINY, "--budget", "64KiB",
                  "--save-costs", str(source), "--force")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "is an input of this command" in res.output
    assert source.read_bytes() == before
    res = _invoke("run", "--model", model, *TINY, "--snaps", "3", "--out", str(source), "--force")
    assert res.exit_code == 2, res.output
    assert source.read_bytes() == before


def _sweep_folder(tmp_path: Path) -> Path:
    """A two-cell sweep folder with an [expect] table, measured by a fake cell runner."""
    from _synthetic import make_result

    from ckptbench.sweep.config import parse_config
    from ckptbench.sweep.run import run_sweep

    config = parse_config(
        'name = "t"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[grid]\nsnaps = [2, 3]\n'
        "[expect]\nslowdown_max = 9.0\n",
        source="t.toml",
    )
    out = tmp_path / "sweep"
    run_sweep(config, out, run_cell=lambda case, **_: make_result(case))
    return out


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda m: "{bad", "not JSON"),
        (lambda m: {**m, "cells": None}, "cells is null, not a list"),
        (lambda m: {**m, "cells": [{**m["cells"][0], "file": 5}]}, "cells[0].file is not a file"),
        (lambda m: {**m, "cells": [{**m["cells"][0], "file": "../x.json"}]}, "not a file name"),
        (
            lambda m: {**m, "config": {**m["config"], "expect": {"slowdown_max": "x"}}},
            "config.expect.slowdown_max is 'x', not a positive number",
        ),
    ],
)
def test_a_damaged_manifest_is_one_line_for_check_and_compare(tmp_path, edit, said):
    """`check` on a manifest that was not JSON, or whose cells, files or thresholds had the
    wrong types, raised a traceback (exit 1); `compare` read the folder as loose files and
    said the manifest was 'not a result; pass its folder'."""
    import json

    out = _sweep_folder(tmp_path)
    manifest = out / "sweep.json"
    edited = edit(json.loads(manifest.read_text()))
    manifest.write_text(edited if isinstance(edited, str) else json.dumps(edited))
    for command in ("check", "compare"):
        res = _invoke(command, str(out))
        assert res.exit_code == 2, (command, res.output)
        assert "Traceback" not in res.output and said in res.output, (command, res.output)
        assert len(res.output.strip().splitlines()) == 1, res.output


@pytest.mark.parametrize("value", [2**63, 10**19, -(2**63) - 1])
def test_an_integer_beyond_int64_is_refused_by_every_reader(tmp_path, value):
    """20-digit integers passed the reader: `compare` raised OverflowError (pandas' int64),
    `check` passed the same file."""
    import json

    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    path = tmp_path / "r.json"
    save_result(make_result(), path)
    doc = json.loads(path.read_text())
    doc["modes"][0]["iterations"][0]["peak_rss_bytes"] = value
    path.write_text(json.dumps(doc))
    for command in ("compare", "check"):
        res = _invoke(command, str(path))
        assert res.exit_code == 2, (command, res.output)
        assert "peak_rss_bytes is an integer of" in res.output and "beyond 2**63" in res.output
        assert "Traceback" not in res.output


def test_the_largest_int64_still_reads(tmp_path):
    """The bound is int64's: 2**63 - 1 (a case field's largest value) reads back."""
    import json

    from ckptbench.results.files import read_json_limited

    path = tmp_path / "x.json"
    path.write_text(json.dumps({"a": 2**63 - 1, "b": -(2**63)}))
    assert read_json_limited(path, 10_000, "result") == {"a": 2**63 - 1, "b": -(2**63)}


def test_check_side_outputs_are_probed_before_the_verdict(tmp_path):
    """`check --summary nod/x.md` printed PASSED (and a JUnit file with no failure, a JSON
    exit_code 0), then failed to write and exited 2; --junit made its missing folder."""
    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    result = tmp_path / "r.json"
    save_result(make_result(), result)
    summary = tmp_path / "missing" / "deeper" / "summary.md"
    res = _invoke("check", str(result), "--summary", str(summary))
    assert res.exit_code == 0, res.output
    assert "PASSED" in summary.read_text()  # its folder made, as for --junit and -o
    if Path("/proc/version").is_file():  # a file that opens but takes no new file beside it
        res = _invoke("check", str(result), "--summary", "/proc/version", "--format", "json")
        assert res.exit_code == 2, res.output
        assert "PASSED" not in res.output and '"exit_code"' not in res.output
        assert "--summary /proc/version: cannot write there" in res.output


def test_an_output_that_is_also_a_timeline_or_plot_folder_is_refused_first(tmp_path):
    """`run --mprof mp --out mp/<a timeline's name>` measured, saved the result under the
    timeline's name and then failed (the timeline lost); `compare -o r.html --plots r.html`
    wrote three plots into r.html/ and then failed to write -o."""
    from _synthetic import make_result

    from ckptbench.render.mprof import mprof_name
    from ckptbench.results.schema import Case, save_result

    case = Case(model="lstm", steps=20, snaps=3, hidden=8, batch=2, input=4, rounds=1)
    mp = tmp_path / "mp"
    out = mp / mprof_name(case.key, "checkpointed", None)
    res = _invoke("run", *TINY, "--snaps", "3", "--rounds", "1", "--mprof", str(mp),
                  "--out", str(out))  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "is also one of --mprof's timeline files; nothing measured" in res.output
    assert not out.exists()

    result = tmp_path / "r.json"
    save_result(make_result(), result)
    for option in ("--plots", "--mprof"):
        target = tmp_path / f"report{option}.html"
        res = _invoke("compare", str(result), "--format", "html", "-o", str(target),
                      option, str(target))  # fmt: skip
        assert res.exit_code == 2, res.output
        assert "is also a file this command writes; nothing written" in res.output
        assert not target.exists()


def test_a_mode_the_reference_lacks_is_never_ok_in_the_gate(tmp_path):
    """A reference whose normal mode ran out of memory (or was never run) let any growth of
    normal's memory pass: the line read 'ok ... the reference has no normal overhead'."""
    from _synthetic import make_result

    from ckptbench.results.schema import Status, save_result

    ref, new = tmp_path / "ref.json", tmp_path / "new.json"
    save_result(make_result(seed=1, status={"normal": Status.OUT_OF_MEMORY}), ref)
    save_result(make_result(seed=2, memory_scale={"normal": 3.0}), new)
    res = _invoke("check", str(new), "--against", str(ref))
    assert res.exit_code == 1, res.output
    line = next(x for x in res.output.splitlines() if "memory:normal" in x)
    assert line.startswith("FAIL") and "not gated; measure the reference again" in line


def test_a_sweeps_thresholds_hold_its_own_cells_only(tmp_path):
    """`check loose.json sweep/` (and compare's report) held the loose file to the sweep's
    [expect] table; `check loose.json` alone said there were no thresholds."""
    from _synthetic import make_result

    from ckptbench.results.schema import Case, save_result

    out = _sweep_folder(tmp_path)
    loose_case = Case(model="lstm", steps=30, snaps=4, hidden=8)
    loose = tmp_path / "loose.json"
    save_result(make_result(loose_case), loose)
    res = _invoke("check", str(loose), str(out))
    assert res.exit_code == 0, res.output
    gated = [x for x in res.output.splitlines() if "slowdown_max" in x]
    assert len(gated) == 2 and not any(loose_case.key in x for x in gated), res.output


def test_retry_failed_without_resume_is_refused(tmp_path):
    """`sweep --retry-failed` without `--resume` was accepted and did nothing it named."""
    config = tmp_path / "t.toml"
    config.write_text('name = "t"\n[case]\nmodel = "rnn"\nsteps = 20\n[grid]\nsnaps = [2]\n')
    res = _invoke("sweep", str(config), "--out", str(tmp_path / "o"), "--retry-failed")
    assert res.exit_code == 2 and "--resume" in res.output, res.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("answer", [None, b"HTTP/1.0 400 Bad Request\r\n\r\n"])
def test_a_port_that_is_no_dask_scheduler_is_one_line_not_a_hang(answer):
    """An HTTP server, or a listener that never answers, at the --dask address hung
    `sweep` without a limit (distributed's Client waited on its handshake)."""
    pytest.importorskip("distributed")
    from _listener import listener

    from ckptbench.results.schema import Case
    from ckptbench.sweep.cluster import DaskError, connect

    with listener(answer) as address, pytest.raises(DaskError, match="cannot reach Dask"):
        connect(address, [Case(steps=5, snaps=2)], timeout_s=1.0)


def test_an_inproc_address_is_refused_as_it_is_parsed():
    """`--dask inproc://x` can never work from a command line; it waited 20 s and printed
    a traceback after its error line."""
    from ckptbench.sweep.cluster import DaskError, parse_address

    with pytest.raises(DaskError, match="unknown scheme 'inproc'"):
        parse_address("inproc://x")


def test_a_manifest_that_stops_being_writable_mid_sweep_loses_nothing(tmp_path, monkeypatch):
    """The folder went read-only (or full) mid-sweep: the manifest's write raised a
    traceback, a finished result went to the temporary folder unannounced and the cells
    after it were never measured."""
    import errno

    from _synthetic import make_result

    from ckptbench.results.store import load_result
    from ckptbench.sweep import run as sweep_run
    from ckptbench.sweep.config import parse_config

    config = parse_config(
        'name = "t"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[grid]\nsnaps = [2, 3, 4]\n',
        source="t.toml",
    )
    real, calls = sweep_run.write_manifest, []

    def full_after_three(out, body):
        calls.append(1)
        if len(calls) > 3:  # the start, cell 1 running, cell 1 done; then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(out, body)

    monkeypatch.setattr(sweep_run, "write_manifest", full_after_three)
    out = tmp_path / "out"
    outcome = sweep_run.run_sweep(config, out, run_cell=lambda case, **_: make_result(case))
    assert outcome.exit_code == 1
    assert [c.state.value for c in outcome.cells] == ["measured"] * 3
    for cell in outcome.cells:  # every measurement saved where the folder still took it
        assert load_result(cell.path).case == cell.case
    lines = outcome.summary_lines()
    assert any("could not be updated (No space left on device)" in x for x in lines), lines


def test_a_dask_result_for_another_cell_is_kept_beside_with_its_attempt(tmp_path):
    """A worker that returned a well-formed result of another cell: the earlier partial file
    was moved aside though nothing replaced it, the document was dropped and the manifest
    lost the worker and its attempts."""
    from _synthetic import make_result

    from ckptbench.results.schema import Case, result_to_dict
    from ckptbench.sweep.dask import _collect

    other = make_result(Case(model="rnn", steps=20, snaps=7, hidden=8))

    class Future:
        def result(self):
            return {"result": result_to_dict(other), "worker": "tcp://w:1"}

    class Cluster:
        def host(self, worker):
            return "h"

    calls, tries = [], {}
    case = Case(model="rnn", steps=20, snaps=3, hidden=8)
    got = _collect(Future(), 0, case, "tcp://w:1", 1.0, Cluster(), tries,
                   lambda *a, **k: calls.append((a, k)))  # fmt: skip
    assert got is None
    ((args, kwargs),) = calls
    assert args[1] is None and f"a result for another cell, {other.case.key}" in args[2]
    assert kwargs["raw"] == result_to_dict(other)  # kept beside the cell, never saved as it
    assert [a.worker for a in args[3]] == ["tcp://w:1"] and tries[0] == list(args[3])


def test_a_mode_listed_many_times_is_one_short_line(tmp_path):
    """A result listing a mode thousands of times was refused in one line of 32 KB (every
    mode named)."""
    import json

    from _synthetic import make_result

    from ckptbench.results.schema import save_result

    path = tmp_path / "r.json"
    save_result(make_result(), path)
    doc = json.loads(path.read_text())
    doc["modes"] = doc["modes"] * 2000
    path.write_text(json.dumps(doc))
    res = _invoke("compare", str(path))
    assert res.exit_code == 2 and "lists a mode twice (baseline in round 1" in res.output
    assert len(res.output) < 400, len(res.output)


def test_schedule_says_when_it_clamps_snaps():
    """`schedule --steps 10 --snaps 50` showed a 10-snap table without a word (`run` says)."""
    res = CliRunner().invoke(cli, ["schedule", "--steps", "10", "--snaps", "50"])
    assert res.exit_code == 0 and "--snaps 50 clamped to 10" in res.output
    res = CliRunner().invoke(cli, ["schedule", "--steps", "10", "--snaps", "5"])
    assert "clamped" not in res.output
