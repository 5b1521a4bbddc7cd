"""Fixes of the twelfth audit, files: side outputs know a result or manifest whatever the
order of its keys; the reader refuses what compare could not tabulate; errors stay on one
line; ``--force`` covers ``--mprof``'s own timelines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _synthetic import CI_CASE, make_result
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import save_result


def _sorted_copy(src: Path, dst: Path) -> bytes:
    """``dst``: the JSON document of ``src`` with its keys sorted (``jq -S``); its bytes."""
    data = json.dumps(json.loads(src.read_text()), sort_keys=True, indent=2).encode()
    dst.write_bytes(data)
    return data


def _result(tmp_path: Path, name: str = "a.json", seed: int = 0) -> Path:
    path = tmp_path / name
    save_result(make_result(CI_CASE, seed=seed), path)
    return path


def _sorted_manifest(folder: Path) -> bytes:
    folder.mkdir()
    doc = {"kind": "ckptbench-sweep", "manifest_version": 1, "config": {}, "cells": []}
    data = json.dumps(doc, sort_keys=True).encode()
    (folder / "sweep.json").write_bytes(data)
    return data


@pytest.mark.parametrize("target", ["result", "manifest"])
def test_no_side_output_touches_a_key_sorted_result_or_manifest(
    tmp_path: Path, monkeypatch, target: str
):
    src = _result(tmp_path)
    if target == "result":
        path = tmp_path / "sorted.json"
        before = _sorted_copy(_result(tmp_path, "b.json", seed=1), path)
    else:
        before = _sorted_manifest(tmp_path / "sw")
        path = tmp_path / "sw" / "sweep.json"
    runner = CliRunner()
    for args, env in (
        (["check", str(src), "--summary", str(path)], {}),
        (["check", str(src)], {"GITHUB_STEP_SUMMARY": str(path)}),
        (["check", str(src), "--junit", str(path), "--force"], {}),
        (["compare", str(src), "-o", str(path), "--force"], {}),
    ):
        res = runner.invoke(cli, args, env=env)
        assert res.exit_code == 2, (args, res.output)
        assert "a side output never replaces or appends to one" in res.output
        assert path.read_bytes() == before, args


def test_run_force_replaces_a_key_sorted_result_and_never_a_key_sorted_manifest(tmp_path: Path):
    from ckptbench.results.store import StoreError, check_output

    path = tmp_path / "sorted.json"
    _sorted_copy(_result(tmp_path), path)
    check_output(path, "--out", replace=True, result=True)  # a result: --force replaces it
    _sorted_manifest(tmp_path / "sw")
    with pytest.raises(StoreError, match="is a sweep manifest; a result never replaces one"):
        check_output(tmp_path / "sw" / "sweep.json", "--out", replace=True, result=True)
