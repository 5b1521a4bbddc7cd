"""A sweep cell's own note (``Case.effective``: checkpoint-sequential with 1 segment
checkpoints nothing) is matched to its cell by the cell's key, the key the sweep saves and
skips it by, not by object identity: a copy of the cell (re-created, or pickled to a Dask
worker and back) is still that cell and still gets its note.

No path of the command made such a copy before the notes were printed when this was
changed (the cells to measure were the config's own objects), so the test re-creates them
where the sweep chooses them, as a resumed or distributed plan could, and guards the
matching."""

from __future__ import annotations

import pickle
from pathlib import Path

from test_hardening21_reports import SAID, SEQUENTIAL  # the one-segment sweep and its note


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_cells_note_is_said_when_the_cells_to_measure_are_copies(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.cli import sweep as sweep_cli
    from ckptbench.sweep.cells import CellOutcome, CellState, SweepOutcome

    config = tmp_path / "seq.toml"
    config.write_text(SEQUENTIAL)
    chosen = sweep_cli._cells_to_measure
    copies: list = []

    def recreated(*args):  # the same cells, as new objects (a pickle round trip)
        copies.extend(pickle.loads(pickle.dumps(c)) for c in chosen(*args))
        return list(copies)

    def fake_run_sweep(cfg, out_dir, *, progress=None, **_kw):
        cells = tuple(CellOutcome(c, out_dir / f"{c.key}.json", CellState.MEASURED, ok=True)
                      for c in cfg.cases)  # fmt: skip
        return SweepOutcome(cfg.name, out_dir, out_dir / "sweep.json", cells, 1.0)

    monkeypatch.setattr(sweep_cli, "_cells_to_measure", recreated)
    monkeypatch.setattr("ckptbench.sweep.run.run_sweep", fake_run_sweep)
    monkeypatch.setattr("ckptbench.cli.sweep._check_devices", lambda *_a: None)  # no torch
    res = CliRunner().invoke(cli, ["sweep", str(config), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert len(copies) == 2 and all(c.key for c in copies)  # the copies were what it printed
    flat = _flat(res.output)
    assert flat.count(SAID) == 1, res.output
    assert flat.index(SAID) < flat.index("sweep seq: 2 cells"), res.output
