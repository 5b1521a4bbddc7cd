"""Inputs the audits of edges share (``test_hardening23_edges``,
``test_hardening24_leftovers``): a synthetic result, a costs file and a one-cell sweep
config written into a folder, the options of a tiny run, and what a link that leads
nowhere is called."""

from __future__ import annotations

import json
from pathlib import Path

from _synthetic import CI_CASE, make_result

from ckptbench.results.schema import save_result

NOWHERE = "is a symbolic link that leads nowhere (a loop, or to a missing file or folder)"
COSTS = {"forward_time_s": 0.001, "taped_time_s": 0.003, "state_bytes": 4096, "tape_bytes": 65536}
TINY = ["--model", "rnn", "--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4",
        "--rounds", "1", "--warmup", "0", "--repeats", "1"]  # fmt: skip


def sweep_config(name: str) -> str:
    """A sweep of one revolve cell, 10 steps, one round."""
    return (
        f'name = "{name}"\n[case]\nrounds = 1\n[grid]\nmodel = ["rnn"]\nsteps = [10]\n'
        'snaps = [3]\nstrategy = ["revolve"]\n'
    )


def write_inputs(folder: Path, name: str) -> Path:
    """``r.json`` (a result), ``c.json`` (step costs) and ``s.toml`` (a sweep named
    ``name``) in ``folder``, which is returned."""
    save_result(make_result(CI_CASE, seed=1), folder / "r.json")
    (folder / "c.json").write_text(json.dumps(COSTS))
    (folder / "s.toml").write_text(sweep_config(name))
    return folder
