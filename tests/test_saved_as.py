"""Where a runner saved a result when not at the path it was given: the result it returns
says so (``RunResult.saved_as``), and so does the partial result a stop carries
(``Interrupted.result``); a sweep reads it from there, whatever its cell runner's signature,
and names that one file. The fake worker (``tests/fake_worker.py``) measures; nothing is
timed."""

from __future__ import annotations

import json
import pickle
import signal
from pathlib import Path

import pytest
from _synthetic import make_result

from ckptbench.measure.launch import Interrupted, RunEvent
from ckptbench.measure.recording import Recording
from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case, Mode, SavedAs, result_to_dict
from ckptbench.results.store import cell_path, load_result
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

CASE = Case(model="rnn", steps=20, snaps=4, hidden=8, batch=2, input=4, warmup=0, repeats=1,
            rounds=1)  # fmt: skip


def _config():
    return parse_config(
        'name = "sw"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\n[grid]\nsnaps = [2]\n',
        source="t.toml",
    )


def _dangling(tmp_path: Path) -> tuple[Path, Path]:
    """A sweep folder whose one cell's path is a dangling link: no save goes there."""
    out = tmp_path / "sw"
    out.mkdir()
    path = cell_path(out, _config().cases[0])
    path.symlink_to(tmp_path / "nowhere.json")
    return out, path


def test_run_case_returns_where_it_saved_a_result_it_could_not_save_at_its_path(fake, tmp_path):
    out = tmp_path / "r.json"
    out.symlink_to(tmp_path / "nowhere.json")
    told: list[tuple[str, str]] = []
    result = run_case(CASE, out_path=out, saved_elsewhere=lambda at, why: told.append((at, why)))
    (copy,) = tmp_path.glob("r.*.json")
    assert result.saved_as == SavedAs(copy, result.saved_as.why)
    assert "is a symbolic link" in result.saved_as.why
    assert told == [(str(copy), result.saved_as.why)]  # the live notice says the same, once
    assert load_result(copy) == result and "saved_as" not in result_to_dict(result)
    assert out.is_symlink() and not out.exists()


def test_run_case_at_its_path_says_nothing_and_a_stop_carries_where(fake, tmp_path):
    assert run_case(CASE, out_path=tmp_path / "a.json").saved_as is None
    out = tmp_path / "r.json"
    out.symlink_to(tmp_path / "nowhere.json")

    def stop(event: RunEvent) -> None:
        if event.phase == "done" and event.mode is Mode.NORMAL:
            raise Interrupted(signal.SIGTERM)

    with pytest.raises(Interrupted) as caught:
        run_case(CASE.with_(rounds=2), out_path=out, progress=stop)
    (copy,) = tmp_path.glob("r.*.json")
    assert caught.value.result is not None and caught.value.result.saved_as.path == copy
    back = pickle.loads(pickle.dumps(caught.value))  # it travels as it is (typed fields)
    assert back.signum == signal.SIGTERM and back.result.saved_as == caught.value.result.saved_as


def _recording_runner(stop_after_first: bool = False):
    """A cell runner that saves as ``run_case`` does and takes no ``saved_elsewhere``:
    only its result (or the stop's) says where it saved."""

    def run_cell(case, *, out_path=None, progress=None):
        made = make_result(case)
        rec = Recording(case, dict(made.environment), out_path, False)
        for mode in made.modes[: 1 if stop_after_first else None]:
            rec.results.append(mode)
            rec.save((0, None))
        if stop_after_first:
            err = Interrupted(signal.SIGTERM)
            err.result = rec.snapshot()
            raise err
        rec.finish(case.rounds, len(made.modes), False)
        return rec.snapshot()

    return run_cell


def test_a_sweep_names_the_one_file_its_runner_says_it_saved_in(tmp_path):
    out, path = _dangling(tmp_path)
    outcome = run_sweep(_config(), out, run_cell=_recording_runner())
    (copy,) = out.glob(f"{path.stem}.*.json")  # never saved a second time
    (cell,) = outcome.errors
    assert cell.error.startswith(f"measured, but saved as {copy} ("), cell.error
    manifest = (out / "sweep.json").read_text()
    assert manifest.count(copy.name) == 1 and not any(copy.name in n for n in outcome.notes)


def test_a_stopped_sweep_cell_names_the_file_its_stop_says_it_saved_in(tmp_path):
    out, path = _dangling(tmp_path)
    with pytest.raises(Interrupted):
        run_sweep(_config(), out, run_cell=_recording_runner(stop_after_first=True))
    (copy,) = out.glob(f"{path.stem}.*.json")
    (cell,) = json.loads((out / "sweep.json").read_text())["cells"]
    assert cell["error"].startswith(f"stopped by SIGTERM; measured, but saved as {copy} (")
