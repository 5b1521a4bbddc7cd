"""A leftover of the fourteenth audit.

* ``check out`` read the sweep manifest 7 times (the input list, the results, the
  ``[expect]`` tables and the cells they hold, the missing cells, the unlisted files, the
  limits): once now (``results.store.ManifestFiles``, carried by ``ConfigFiles``).
"""

from __future__ import annotations

from pathlib import Path

from _synthetic import make_result
from click.testing import CliRunner

import ckptbench.results.store as store
from ckptbench.cli import cli
from ckptbench.results.store import MANIFEST_NAME
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

# --------------------------------------------------------------------------- 2. check


def _manifest_reads(monkeypatch) -> list[str]:
    """Every read of a sweep manifest's file (``read_manifest`` reads through
    ``store.read_json_document``, wherever it is imported)."""
    reads: list[str] = []
    real = store.read_json_document

    def read_json_document(path, what="result"):
        if Path(path).name == MANIFEST_NAME:
            reads.append(str(path))
        return real(path, what)

    monkeypatch.setattr(store, "read_json_document", read_json_document)
    return reads


CHECKED = (
    'name = "ci"\n[case]\nmodel = "rnn"\nsteps = 20\nhidden = 8\nbatch = 2\ninput = 4\n'
    "warmup = 0\nrepeats = 1\nrounds = 1\n[grid]\nsnaps = [4, 5]\n"
    "[expect]\nmemory_savings_min = 1.0\n"
)


def test_check_reads_the_sweep_manifest_once(tmp_path, monkeypatch):
    """Was 7 reads of out/sweep.json for one `check out` (8 without [expect]); the output
    is the same line for line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    Path("ci.toml").write_text(CHECKED)
    config = parse_config(CHECKED, source="ci.toml")
    run_sweep(config, "out", run_cell=lambda case, **_: make_result(case))
    run_sweep(config, "ref", run_cell=lambda case, **_: make_result(case, seed=5))
    first = Path("ref") / f"{config.cases[0].key}.json"
    (Path("out") / "stray.json").write_text(first.read_text())
    reads = _manifest_reads(monkeypatch)
    for args, manifests in (
        (["out"], ["out/sweep.json"]),
        (["out", "--against", "ref"], ["out/sweep.json", "ref/sweep.json"]),
        (["out/sweep.json", "--config", "ci.toml"], ["out/sweep.json"]),
    ):
        reads.clear()
        res = CliRunner().invoke(cli, ["check", *args], catch_exceptions=False)
        assert res.exit_code == 0 and "PASSED" in res.output, res.output
        stray = "not cells of their folder's sweep manifest, so not gated: out/stray.json"
        assert (stray in res.output) == (args[0] == "out"), res.output  # a folder's only
        assert sorted(reads) == manifests, (args, reads)
    Path("ci.toml").write_text(CHECKED.replace("[expect]\nmemory_savings_min = 1.0\n", ""))
    run_sweep(parse_config(Path("ci.toml").read_text(), source="ci.toml"), "bare",
              run_cell=lambda case, **_: make_result(case))  # fmt: skip
    reads.clear()
    res = CliRunner().invoke(cli, ["check", "bare"], catch_exceptions=False)
    assert "its sweep config has none" in res.output
    assert reads == ["bare/sweep.json"]
