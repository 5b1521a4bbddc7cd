"""Third hardening round (issue 26): result inputs read by one bounded rule, cells told
apart by what they are, writers that never lose a measurement, and messages in the
user's own units. Every input problem is one line and exit 2."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result

from ckptbench.cli import main
from ckptbench.results import result_to_dict, save_result
from ckptbench.store import StoreError, load_result, load_results


def run_cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def one_line_error(capsys, argv: list[str]) -> str:
    code, _, err = run_cli(capsys, argv)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _doc() -> dict:
    return result_to_dict(make_result(CI_CASE))


# --------------------------------------------------------------------------- item 2: reading


def _in_thread(fn, timeout: float = 20.0):
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it blocks."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as err:
            box["error"] = err

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "blocked on a FIFO"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_a_fifo_is_refused_without_blocking(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    with pytest.raises(StoreError, match="FIFO"):
        _in_thread(lambda: load_result(fifo))
    for command in (["compare", str(fifo)], ["check", str(fifo)]):
        err = _in_thread(lambda c=command: one_line_error(capsys, c))
        assert str(fifo) in err and "FIFO" in err


def test_a_fifo_in_a_folder_and_as_a_manifest_is_refused(tmp_path: Path, capsys) -> None:
    save_result(make_result(CI_CASE), tmp_path / "a.json")
    os.mkfifo(tmp_path / "b.json")
    err = _in_thread(lambda: one_line_error(capsys, ["compare", str(tmp_path)]))
    assert "b.json" in err and "FIFO" in err
    sweep = tmp_path / "sw"
    sweep.mkdir()
    os.mkfifo(sweep / "sweep.json")
    err = _in_thread(lambda: one_line_error(capsys, ["check", str(sweep)]))
    assert "sweep.json" in err


def test_a_device_is_refused_before_reading(capsys) -> None:
    err = one_line_error(capsys, ["compare", "/dev/zero"])
    assert "/dev/zero" in err and "device" in err


def test_an_oversized_file_is_refused(tmp_path: Path, monkeypatch) -> None:
    import ckptbench.store as store

    path = tmp_path / "big.json"
    path.write_text(json.dumps(_doc()))
    monkeypatch.setattr(store, "MAX_RESULT_BYTES", 1000)
    with pytest.raises(StoreError, match="more than"):
        load_result(path)


def test_deep_nesting_is_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"schema_version": 3, "case": ' + "[" * 200000 + "]" * 200000 + "}")
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "nested" in err
    with pytest.raises(StoreError, match="nested"):
        load_results([path])


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    doc = _doc()
    doc["modes"][0]["stderr_tail"] = "[" * 500 + '\\"{'
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert load_result(path).modes[0].stderr_tail.startswith("[[[")


@pytest.mark.parametrize("digits", [401, 5001])
def test_a_huge_integer_names_the_file_and_field(tmp_path: Path, capsys, digits: int) -> None:
    text = json.dumps(_doc())
    doc = json.loads(text)
    doc["modes"][0]["iterations"][0]["peak_rss_bytes"] = 12345
    text = json.dumps(doc).replace("12345", "1" + "0" * (digits - 1), 1)
    path = tmp_path / "bigint.json"
    path.write_text(text)
    err = one_line_error(capsys, ["compare", str(path)])
    assert str(path) in err and "modes[0].iterations[0].peak_rss_bytes" in err
    assert f"{digits} digits" in err


def test_json_that_is_not_a_result_says_so(tmp_path: Path, capsys) -> None:
    path = tmp_path / "hello.json"
    path.write_text('{"hello": 1}')
    err = one_line_error(capsys, ["compare", str(path)])
    assert "not a ckptbench result" in err and "schema_version None" not in err
    path.write_text("[1, 2]")
    assert "not a ckptbench result" in one_line_error(capsys, ["check", str(path)])


def test_an_empty_path_is_refused(tmp_path: Path, monkeypatch) -> None:
    from ckptbench.frame import read_results

    monkeypatch.chdir(tmp_path)
    save_result(make_result(CI_CASE), tmp_path / "a.json")
    with pytest.raises(StoreError, match="empty path"):
        read_results("")
    with pytest.raises(StoreError, match="empty path"):
        load_result("")
