"""A sweep's watch of a plug-in's imported modules starts at the plug-in check, as ``run``'s.

The check runs once per plug-in before every cell; its worker reports the user's files it
loaded with their SHA-256 (``measure.sources.CheckedSources``). A sweep passed none of it to
its cells, so each cell's watch of a helper module started at the cell's first report: a
helper edited between the check and a cell went unseen, and the cell measured the edited
code with no sign (exit 0). Locally and on Dask every cell now starts from the check's
digests; a Dask worker without one of those files says so in a note.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from _cli import run_cli
from _synthetic import make_result

from ckptbench.measure.sources import CheckedSources
from ckptbench.measure.tasks import PluginChecked
from ckptbench.results.store import MANIFEST_NAME
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

#: An autograd plug-in that imports ``helper`` from the folder named in helpers_dir.txt
#: (beside it by default) and, when imported for the EDIT-th time (0: by the check; 1: by
#: the first cell's first mode, in the current folder), appends to that helper.
USES_HELPER = """\
import os
import sys

import autograd.numpy as np

_where = open("helpers_dir.txt").read().strip() if os.path.exists("helpers_dir.txt") else ""
sys.path.insert(0, os.path.abspath(_where) if _where else os.path.dirname(__file__))
import helper

_n = int(open("count").read()) if os.path.exists("count") else 0
open("count", "w").write(str(_n + 1))
if _n == EDIT:
    with open(helper.__file__, "a") as f:
        f.write("SCALE = 0.5\\n")


class W:
    def init(self, steps, rng):
        p = {"W": rng.standard_normal((8, 8)) * 0.1, "V": rng.standard_normal((8, 1))}
        return p, np.zeros((2, 8)), rng.standard_normal((steps, 2, 8))

    def step(self, p, s, x):
        return np.tanh(helper.SCALE * (s @ p["W"]) + x)

    def post(self, p, s):
        return s @ p["V"]

    def loss(self, ys):
        return np.mean(ys ** 2)


def make(hidden=8, batch=2, input=8, output=1):
    return W()
"""

CONFIG = """\
name = "w"
[case]
model = "uses.py:make"
steps = 10
hidden = 8
warmup = 0
repeats = 1
rounds = 1
[grid]
snaps = SNAPS
"""

OLD = hashlib.sha256(b"SCALE = 1.0\n").hexdigest()
NEW = hashlib.sha256(b"SCALE = 1.0\nSCALE = 0.5\n").hexdigest()


def _folder(where: Path, edit: int, snaps: str = "[3, 4]") -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "uses.py").write_text(USES_HELPER.replace("EDIT", str(edit)))
    (where / "helper.py").write_text("SCALE = 1.0\n")
    (where / "w.toml").write_text(CONFIG.replace("SNAPS", snaps))


def _results(out: Path) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    return [d for d in docs if "modes" in d]


def _edited_between_check_and_cell(results: list[dict]) -> None:
    """Every cell failed from the check's digest: the helper edited after the check."""
    assert results
    for doc in results:
        plugin = doc["environment"]["plugin"]
        assert plugin["imports"] == {"helper.py": OLD}
        assert plugin["watched_since"] == {"uses.py": "check", "helper.py": "check"}
        assert doc["environment"]["plugin_changed"]["sha256"] == NEW
        for mode in doc["modes"]:
            assert mode["status"] == "failed", mode
            assert f"(SHA-256 {OLD[:12]} at the plug-in check, {NEW[:12]} now)" in mode["error"]


# --------------------------------------------------------------------------- fast


def test_a_sweep_gives_each_plugin_cell_the_checks_files(tmp_path: Path) -> None:
    """run_sweep hands the check's files to every cell of that plug-in and to no other."""
    text = (
        'name = "w"\n[case]\nsteps = 10\nhidden = 8\n[grid]\n'
        'model = ["uses.py:make", "rnn"]\nsnaps = [3, 4]\n'
    )
    config = parse_config(text, source="w.toml")
    checked = CheckedSources(((str(tmp_path / "helper.py"), OLD),), total=1)
    given: dict[str, object] = {}

    def run_cell(case, *, out_path=None, progress=None, **watch):
        given[case.key] = watch.get("checked_sources")
        return make_result(case)

    check = PluginChecked(config.cases[0], sources=checked)
    run_sweep(config, tmp_path / "out", run_cell=run_cell,
              plugin_checks={("uses.py:make", "autograd", None): check})  # fmt: skip
    plugin_cells = [c.key for c in config.cases if c.model == "uses.py:make"]
    assert len(plugin_cells) == 2
    assert {k: v for k, v in given.items() if k in plugin_cells} == dict.fromkeys(
        plugin_cells, checked
    )
    assert all(v is None for k, v in given.items() if k not in plugin_cells)


def test_a_workers_copy_of_the_checked_files_is_found_from_its_own_folder(
    tmp_path: Path, monkeypatch
) -> None:
    """Files under the submitting folder travel relative to it (resolved from the worker's
    folder, as a relative plug-in path); those a worker lacks are named, not watched."""
    here, there = tmp_path / "here", tmp_path / "there"
    (here / "pkg").mkdir(parents=True)
    there.mkdir()
    outside = tmp_path / "outside.py"
    for path in (here / "uses.py", here / "pkg" / "helper.py", there / "uses.py", outside):
        path.write_text("A = 1\n")
    checked = CheckedSources(
        ((str(here / "pkg" / "helper.py"), "a" * 64), (str(here / "uses.py"), "b" * 64),
         (str(outside), "c" * 64)),
        total=4,
    )  # fmt: skip
    monkeypatch.chdir(here)
    sent = checked.for_workers()
    assert sent.files == (("pkg/helper.py", "a" * 64), ("uses.py", "b" * 64),
                          (str(outside), "c" * 64))  # fmt: skip
    monkeypatch.chdir(there)
    found, missing = sent.found_here()
    assert missing == ("pkg/helper.py",)
    assert found.files == ((str(there / "uses.py"), "b" * 64), (str(outside), "c" * 64))
    assert found.total == 3  # the missing one is said, not counted as a bounded report's rest


# --------------------------------------------------------------------------- measured


@pytest.mark.slow
def test_a_helper_edited_between_the_check_and_a_cell_fails_the_cell(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """The helper is edited as the first cell's first mode imports the plug-in (after the
    check, before any report of the cell): that mode measured the old helper, every later
    one the new. The sweep said nothing and exited 0; now every cell fails from the check's
    digest, as ``run`` does."""
    _folder(tmp_path, edit=1)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["sweep", "w.toml", "--out", "out", "-q"])
    assert (tmp_path / "helper.py").read_text() == "SCALE = 1.0\nSCALE = 0.5\n"
    assert code == 1, out + err
    assert "the file helper.py the plug-in imports changed" in out
    _edited_between_check_and_cell(_results(tmp_path / "out"))


@pytest.mark.slow
def test_on_dask_a_helper_edited_between_the_check_and_a_cell_fails_the_cell(
    tmp_path: Path,
) -> None:
    from test_sweep_dask import cluster, dask_sweep

    _folder(tmp_path, edit=1, snaps="[3]")
    with cluster(1, cwd=tmp_path) as c:
        proc = dask_sweep(c, "w.toml", tmp_path, "-q")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the file helper.py the plug-in imports changed" in proc.stdout
    _edited_between_check_and_cell(_results(tmp_path / "out"))


@pytest.mark.slow
def test_on_dask_a_checked_file_the_worker_lacks_is_said_in_a_note(tmp_path: Path) -> None:
    """The worker's folder holds the plug-in but finds its helper elsewhere (lib/, not the
    h/ the check loaded here): the cell is measured, its watch of that helper starting at
    the worker's first report, and the cell says so (before: nothing said)."""
    here, there = tmp_path / "here", tmp_path / "there"
    _folder(here, edit=-1, snaps="[3]")
    (here / "helper.py").unlink()
    for folder, name in ((here, "h"), (there, "lib")):
        (folder / name).mkdir(parents=True)
        (folder / name / "helper.py").write_text("SCALE = 1.0\n")
        (folder / "helpers_dir.txt").write_text(name)
    (there / "uses.py").write_text((here / "uses.py").read_text())
    from test_sweep_dask import cluster, dask_sweep

    with cluster(1, cwd=there) as c:
        proc = dask_sweep(c, "w.toml", here, "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (note,) = [line for line in proc.stdout.splitlines() if line.startswith("note ")]
    assert "has no h/helper.py, which the plug-in check loaded here" in note
    (doc,) = _results(here / "out")
    assert doc["environment"]["dask"]["notes"] == [note.split(": ", 1)[1]]
    plugin = doc["environment"]["plugin"]
    assert plugin["watched_since"] == {"uses.py": "check", "lib/helper.py": "round 1 baseline"}
    assert all(m["status"] == "ok" for m in doc["modes"])
    assert (here / "out" / MANIFEST_NAME).exists()
