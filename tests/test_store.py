"""The results folder and the reading side under careless and hostile input (issue 7, items
4, 5, 11, 12, 14): validated loading, pairing on the full case, unique output files, safe
sweep names, and the gate's exit status when a summary cannot be written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _cli import one_line_error, run_cli
from _synthetic import CI_CASE, MIB, make_result

from ckptbench.analysis import compare, pair
from ckptbench.results.schema import Case, result_to_dict, save_result
from ckptbench.results.store import StoreError, load_result, load_results, open_folder

LONG = "plugins/" + "a_rather_long_folder_name_for_models/" * 2


# --------------------------------------------------------------------------- item 11


def _doc() -> dict:
    return result_to_dict(make_result(CI_CASE))


def _broken(name: str) -> dict:
    doc = _doc()
    if name == "null-peak":
        doc["modes"][1]["iterations"][0]["peak_rss_bytes"] = None
    elif name == "null-counters":
        doc["modes"][2]["counters"] = None
    elif name == "string-number":
        doc["modes"][0]["iterations"][1]["wall_time_s"] = "fast"
    elif name == "no-modes":
        doc["modes"] = []
    elif name == "ok-without-iterations":
        doc["modes"][2]["iterations"] = []
    elif name == "negative-bytes":
        doc["modes"][0]["iterations"][0]["peak_rss_bytes"] = -4096
    elif name == "mode-twice":
        doc["modes"].append(doc["modes"][0])
    elif name == "case-null":
        doc["case"]["steps"] = None
    return doc


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("null-peak", "modes[1].iterations[0].peak_rss_bytes must be an integer, got null"),
        ("null-counters", "modes[2].counters must be an object, got null"),
        ("string-number", 'wall_time_s must be a number, got "fast"'),
        ("no-modes", "modes is empty"),
        ("ok-without-iterations", "mode checkpointed has status ok but no measured iterations"),
        ("negative-bytes", "peak_rss_bytes must be a finite number >= 0"),
        ("case-null", "steps must be an integer"),
        ("mode-twice", "modes lists a mode twice"),
    ],
)
def test_malformed_results_are_one_line_exit_2_naming_file_and_field(
    tmp_path: Path, capsys, name: str, words: str
) -> None:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_broken(name)))
    with pytest.raises(StoreError) as info:
        load_result(path)
    assert str(path) in str(info.value) and words in str(info.value)
    for command in (["compare", str(path)], ["check", str(path)]):
        err = one_line_error(capsys, command)
        assert str(path) in err and words in err


def test_a_signed_difference_reads_where_a_negative_peak_does_not(tmp_path: Path) -> None:
    # an H200 sweep wrote program_rss_bytes = -10915840 (the compile's heap trim returned
    # more than the program holds) and compare refused the whole folder
    doc = _doc()
    doc["modes"][2]["counters"]["program_rss_bytes"] = -10915840
    path = tmp_path / "signed.json"
    path.write_text(json.dumps(doc))
    assert load_result(path).modes[2].counters["program_rss_bytes"] == -10915840
    doc["modes"][2]["counters"]["peak_stored_bytes"] = -1
    path.write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="peak_stored_bytes must be a finite number >= 0"):
        load_result(path)


def test_binary_content_names_the_file(tmp_path: Path, capsys) -> None:
    path = tmp_path / "core.json"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe")
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "binary content" in err


def test_a_valid_result_round_trips_and_pooled_loading_reads_each_file_once(
    tmp_path: Path,
) -> None:
    result = make_result(CI_CASE)
    save_result(result, tmp_path / "r.json")
    assert load_result(tmp_path / "r.json") == result
    assert len(load_results([tmp_path / "r.json", tmp_path / "r.json", tmp_path])) == 1


def test_sweep_out_must_be_a_folder_that_can_be_made(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "tiny.toml"
    cfg.write_text('[case]\nmodel = "rnn"\nsteps = 8\n[grid]\nsnaps = [2]\n')
    existing = tmp_path / "a-file"
    existing.write_text("not a folder")
    err = one_line_error(capsys, ["sweep", str(cfg), "--out", str(existing)])
    assert str(existing) in err and "not a folder" in err
    assert existing.read_text() == "not a folder"
    impossible = existing / "under-a-file"
    err = one_line_error(capsys, ["sweep", str(cfg), "--out", str(impossible)])
    assert str(impossible) in err and "cannot create" in err
    with pytest.raises(StoreError, match="not a folder"):
        open_folder(existing)


# --------------------------------------------------------------------------- item 12


def test_a_config_name_cannot_escape_the_results_folder(tmp_path: Path, capsys) -> None:
    work = tmp_path / "deep" / "work"
    work.mkdir(parents=True)
    cfg = work / "evil.toml"
    cfg.write_text('name = "../../escaped"\n[case]\nmodel = "rnn"\nsteps = 8\n')
    cwd = os.getcwd()
    os.chdir(work)
    try:
        err = one_line_error(capsys, ["sweep", str(cfg)])
    finally:
        os.chdir(cwd)
    assert "name" in err and "safe folder name" in err
    assert not (tmp_path / "escaped").exists() and not (work / "results").exists()


# --------------------------------------------------------------------------- item 4


def _plugin_pair() -> tuple[Case, Case]:
    one = CI_CASE.with_(model=f"{LONG}one.py:make")
    two = CI_CASE.with_(model=f"{LONG}two.py:make")
    return one, two


def test_cells_whose_full_cases_differ_never_pair(tmp_path: Path, capsys) -> None:
    one, two = _plugin_pair()
    ref = make_result(one, seed=1)
    cur = make_result(two, seed=2, memory_scale={"checkpointed": 1.5})
    save_result(ref, tmp_path / "ref.json")
    save_result(cur, tmp_path / "cur.json")
    # today the keys collide (the model cut to 40 characters) and this is a false regression
    err = one_line_error(capsys, ["check", str(tmp_path / "cur.json"), "--against",
                                  str(tmp_path / "ref.json")])  # fmt: skip
    assert "no cell of the results matches the reference" in err
    assert "model" in err and "one.py" in err and "two.py" in err
    # with both plug-ins on both sides each pairs with itself
    both = pair([make_result(one, seed=3), make_result(two, seed=4)], [ref, cur])
    assert sorted((b.case.model, a.case.model) for b, a in both.pairs()) == [
        (one.model, one.model),
        (two.model, two.model),
    ]


def test_run_settings_still_pair_with_a_note() -> None:
    comparison = compare([make_result(CI_CASE.with_(repeats=5))], [make_result(CI_CASE)])
    assert len(comparison.cells) == 1 and "repeats [3, 5]" in comparison.notes[0]
    with pytest.raises(ValueError, match="hosts differ"):
        compare([make_result(CI_CASE, host="ci")], [make_result(CI_CASE, host="laptop")])


# --------------------------------------------------------------------------- item 5


def _grid(tmp_path: Path) -> Path:
    folder = tmp_path / "grid"
    folder.mkdir()
    for k, (hidden, batch) in enumerate([(32, 8), (32, 16), (64, 8), (64, 16)]):
        case = CI_CASE.with_(hidden=hidden, batch=batch)
        save_result(make_result(case, seed=k), folder / f"cell{k}.json")
    return folder


def test_labels_show_every_field_that_differs(tmp_path: Path, capsys) -> None:
    folder = _grid(tmp_path)
    code, out, _ = run_cli(capsys, ["compare", str(folder)])
    assert code == 0
    for hidden, batch in [(32, 8), (32, 16), (64, 8), (64, 16)]:
        assert f"lstm l=256 s=12 revolve h={hidden} b={batch}" in out
    code, out, _ = run_cli(capsys, ["compare", str(folder), "--format", "markdown"])
    assert out.split("## Warnings")[0].count("h=64 b=16") == 1  # warnings may name cells too


def test_every_plot_file_is_unique_and_a_second_write_is_an_error(tmp_path: Path, capsys) -> None:
    folder = _grid(tmp_path)
    plots = tmp_path / "plots"
    code, _, err = run_cli(capsys, ["compare", str(folder), "--plots", str(plots)])
    assert code == 0, err
    written = [line.split(" ", 1)[1] for line in err.splitlines() if line.startswith("wrote ")]
    assert len(written) == len(set(written)) == 4 + 1 + 4  # trade-offs, evaluations, timelines
    assert sorted(p.name for p in plots.iterdir()) == sorted(Path(w).name for w in written)
    clash = tmp_path / "again"
    err = one_line_error(
        capsys,
        ["compare", str(folder), "--plots", str(clash), "-o", str(clash / "evaluations.png")],
    )
    assert "twice" in err and not clash.exists()


# --------------------------------------------------------------------------- item 14


def test_a_summary_that_cannot_be_written_is_refused_before_any_verdict(
    tmp_path: Path, capsys
) -> None:
    ref = make_result(CI_CASE, seed=1)
    cur = make_result(CI_CASE, seed=2, memory_scale={"checkpointed": 1.5})
    save_result(ref, tmp_path / "ref.json")
    save_result(cur, tmp_path / "cur.json")
    args = ["check", str(tmp_path / "cur.json"), "--against", str(tmp_path / "ref.json")]
    code, out, err = run_cli(capsys, [*args, "--summary", str(tmp_path)])  # a folder
    assert code == 2 and "FAILED" not in out and "PASSED" not in out
    assert "--summary" in err and str(tmp_path) in err
    code, out, err = run_cli(capsys, args)  # the same gate without it: failed, exit 1
    assert code == 1 and "FAILED" in out


def test_no_match_says_whether_hosts_or_cases_differ(tmp_path: Path, capsys) -> None:
    save_result(make_result(CI_CASE, host="laptop"), tmp_path / "ref.json")
    save_result(make_result(CI_CASE, host="ci"), tmp_path / "cur.json")
    save_result(make_result(CI_CASE.with_(hidden=128), host="ci"), tmp_path / "other.json")
    base = ["check", "--against", str(tmp_path / "ref.json")]
    err = one_line_error(capsys, [*base, str(tmp_path / "cur.json")])
    assert "hosts differ" in err and "laptop" in err and "ci" in err
    err = one_line_error(capsys, [*base, "--any-host", str(tmp_path / "other.json")])
    assert "cases differ" in err and "hidden 64 vs 128" in err
    assert MIB  # the synthetic results are in MiB


def test_a_plot_that_cannot_be_written_whole_leaves_the_old_one(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """--plots files are written like every other output: whole (temp file, fsync, rename)
    or not at all, so a failed write never leaves half a PNG where the old one was."""
    folder = _grid(tmp_path)
    plots = tmp_path / "plots"
    code, _, err = run_cli(capsys, ["compare", str(folder), "--plots", str(plots), "-q"])
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in plots.iterdir()}

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    err = one_line_error(capsys, ["compare", str(folder), "--plots", str(plots), "--force"])
    assert "--plots" in err and "No space left" in err
    assert {p.name: p.read_bytes() for p in plots.iterdir()} == before  # no temp files either
