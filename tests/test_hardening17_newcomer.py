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
from pathlib import Path

import pytest
from _cli import one_line_error

TINY = ["--model", "rnn", "--steps", "20", "--snaps", "4", "--rounds", "1"]
CUDART = "libcudart.so.12: cannot open shared object file"


def broken_package(tmp_path: Path, monkeypatch, name: str, raises: str) -> None:
    """A package ``name`` on the workers' PYTHONPATH whose import raises ``raises``."""
    (tmp_path / "fake" / name).mkdir(parents=True)
    (tmp_path / "fake" / name / "__init__.py").write_text(f"raise {raises}\n")
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
