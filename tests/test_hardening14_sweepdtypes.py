"""Two leftovers of the fourteenth audit.

* A sweep lost what the plug-in check says about dtypes. ``run`` shows the check's notes (a
  ``PluginWarning`` where the case is recorded in another dtype than asked, under ``-q``
  too) and records the dtypes of what ``loss`` gets and of the loss
  (``environment.plugin.output_dtype``/``loss_dtype``). ``sweep`` checks each plug-in once
  (``tasks.checked_plugins``) and kept only the files it loaded: no note, no warning, no
  dtype recorded, locally or on Dask. The whole outcome now goes to every cell of that
  plug-in (``run_sweep(plugin_checks=...)``), its notes said once before the sweep
  measures; on a backend that casts to ``--dtype`` the check runs once per dtype, since
  what it finds follows the dtype asked (one check refused a torch plug-in's dtype axis:
  the float32 check's params "not the dtype bfloat16 asked").
* ``check out`` read the sweep manifest 7 times (the input list, the results, the
  ``[expect]`` tables and the cells they hold, the missing cells, the unlisted files, the
  limits): once now (``results.store.ManifestFiles``, carried by ``ConfigFiles``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import run_cli
from _frameworks import needs
from _synthetic import make_result
from click.testing import CliRunner
from test_hardening13_dtypes import TORCH_STEP
from test_plugin_dtypes import F32

import ckptbench.results.store as store
from ckptbench.cli import cli
from ckptbench.measure.sources import CheckedSources, plugin_key
from ckptbench.measure.tasks import PluginChecked, PluginWarning, checked_plugins
from ckptbench.results.store import MANIFEST_NAME
from ckptbench.sweep.config import parse_config
from ckptbench.sweep.run import run_sweep

#: A sweep of the float32 autograd plug-in F32 (f32.py), float64 asked (the default).
CONFIG = """\
name = "d"
[case]
model = "f32.py:make"
steps = 6
hidden = 8
batch = 2
input = 4
warmup = 0
repeats = 1
rounds = 1
[grid]
snaps = SNAPS
"""
WARNING = (
    "warning --model f32.py:make is recorded as float32, its arrays' own dtype (on --backend "
    "autograd nothing casts a plug-in's arrays)"
)
#: TORCH_STEP whose loss computes in float32, whatever the steps' dtype.
TORCH_F32_LOSS = TORCH_STEP.replace("return (ys ** 2).mean()", "return (ys.float() ** 2).mean()")
assert TORCH_F32_LOSS != TORCH_STEP


def _folder(where: Path, snaps: str = "[2, 3]", config: str = CONFIG) -> None:
    where.mkdir(parents=True, exist_ok=True)
    (where / "f32.py").write_text(F32)
    (where / "d.toml").write_text(config.replace("SNAPS", snaps))


def _results(out: Path) -> list[dict]:
    docs = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    return [d for d in docs if "modes" in d]


def _recorded_float32(docs: list[dict], cells: int) -> None:
    assert len(docs) == cells
    for doc in docs:
        assert doc["case"]["dtype"] == "float32"
        plugin = doc["environment"]["plugin"]
        assert (plugin.get("output_dtype"), plugin.get("loss_dtype")) == ("float32", "float32")
        assert all(m["status"] == "ok" for m in doc["modes"]), doc["modes"]


# --------------------------------------------------------------------------- 1. fast


def test_the_sweeps_check_keeps_its_notes_and_dtypes_per_plugin(tmp_path, monkeypatch):
    """checked_plugins returned the check's files only: its notes (the warning that the
    cells are recorded as float32) and the dtypes of the loss were dropped."""
    _folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    axis = 'snaps = [2, 3]\ndtype = ["float64", "float32"]'
    text = (tmp_path / "d.toml").read_text().replace("snaps = [2, 3]", axis)
    config = parse_config(text, source="d.toml")
    cases, checks = checked_plugins(config.cases)
    assert {c.dtype for c in cases} == {"float32"}
    (key,) = checks
    assert key == ("f32.py:make", "autograd", None) == plugin_key(cases[0])
    check = checks[key]
    assert isinstance(check, PluginChecked)
    assert check.dtypes == {"output_dtype": "float32", "loss_dtype": "float32"}
    assert isinstance(check.sources, CheckedSources)
    warned = [n for n in check.notes if isinstance(n, PluginWarning)]
    assert len(warned) == 1 and "recorded as float32" in warned[0], check.notes  # said once
    assert check.run_options() == {
        "checked_sources": check.sources,
        "plugin_dtypes": {"output_dtype": "float32", "loss_dtype": "float32"},
    }


def test_a_sweep_gives_each_plugin_cell_its_checks_dtypes(tmp_path):
    """run_sweep handed a cell the check's files only: never the dtypes to record."""
    text = (
        'name = "w"\n[case]\nsteps = 10\nhidden = 8\n[grid]\n'
        'model = ["f32.py:make", "rnn"]\nsnaps = [3, 4]\n'
    )
    config = parse_config(text, source="w.toml")
    sources = CheckedSources(((str(tmp_path / "f32.py"), "a" * 64),), total=1)
    dtypes = {"output_dtype": "bfloat16", "loss_dtype": "float32"}
    check = PluginChecked(config.cases[0], sources=sources, dtypes=dtypes)
    given: dict[str, dict] = {}

    def run_cell(case, *, out_path=None, progress=None, **options):
        given[case.key] = options  # nothing else: where it saved, its result says
        return make_result(case)

    run_sweep(config, tmp_path / "out", run_cell=run_cell,
              plugin_checks={("f32.py:make", "autograd", None): check})  # fmt: skip
    plugin = {c.key for c in config.cases if c.model == "f32.py:make"}
    assert len(plugin) == 2 and set(given) == plugin | {c.key for c in config.cases}
    for key, options in given.items():
        want = {"checked_sources": sources, "plugin_dtypes": dtypes} if key in plugin else {}
        assert options == want, key


def test_sweep_dry_run_says_the_plugin_checks_warning(tmp_path, monkeypatch, capsys):
    _folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["sweep", "d.toml", "--out", "out", "--dry-run"])
    assert code == 0, err
    assert out.count(WARNING) == 1, out


@pytest.mark.parametrize("backend", [pytest.param("torch", marks=needs("torch"))])
def test_a_casting_backend_is_checked_once_per_dtype(tmp_path, monkeypatch, backend):
    """What the check finds on torch follows the --dtype asked. One check of a dtype axis
    (the first cell's, float32) refused the bfloat16 cells outright: "init's params are
    float32, not the dtype bfloat16 asked", a sweep `run` measures cell by cell."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bf.py").write_text(TORCH_F32_LOSS)
    text = (
        'name = "t"\n[case]\nmodel = "bf.py:make"\nbackend = "torch"\nsteps = 4\nhidden = 8\n'
        'batch = 2\ninput = 4\n[grid]\nsnaps = [2]\ndtype = ["float32", "bfloat16"]\n'
    )
    cases, checks = checked_plugins(parse_config(text, source="t.toml").cases)
    assert [c.dtype for c in cases] == ["float32", "bfloat16"]
    assert checks[plugin_key(cases[0])].dtypes == {"output_dtype": "float32",
                                                   "loss_dtype": "float32"}  # fmt: skip
    check = checks[plugin_key(cases[1])]
    assert check.dtypes == {"output_dtype": "bfloat16", "loss_dtype": "float32"}
    assert any("computes the loss in float32, its steps in bfloat16" in n for n in check.notes)


# --------------------------------------------------------------------------- 1. measured


@pytest.mark.slow
def test_sweep_q_warns_once_and_records_the_dtypes(tmp_path, monkeypatch, capsys):
    """Was: a float32 plug-in in a float64 sweep said nothing (with or without -q) and no
    cell recorded output_dtype or loss_dtype."""
    _folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, ["sweep", "d.toml", "--out", "out", "-q"])
    assert code == 0, out + err
    said = [line for line in err.splitlines() if not line.startswith("note: created folder")]
    assert said == [WARNING], err  # -q: the warning, once (and the folder it made)
    _recorded_float32(_results(tmp_path / "out"), cells=2)


@pytest.mark.slow
@pytest.mark.parametrize("backend", [pytest.param("torch", marks=needs("torch"))])
def test_a_torch_sweep_records_a_float32_loss_under_bfloat16(
    tmp_path, monkeypatch, capsys, backend
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bf.py").write_text(TORCH_F32_LOSS)
    (tmp_path / "t.toml").write_text(
        'name = "t"\n[case]\nmodel = "bf.py:make"\nbackend = "torch"\ndtype = "bfloat16"\n'
        "steps = 4\nhidden = 8\nbatch = 2\ninput = 4\nwarmup = 0\nrepeats = 1\nrounds = 1\n"
        "[grid]\nsnaps = [2]\n"
    )
    code, out, err = run_cli(capsys, ["sweep", "t.toml", "--out", "out"])
    assert code == 0, out + err
    assert err.count("note --model bf.py:make computes the loss in float32, its steps in "
                     "bfloat16: recorded as environment.plugin.loss_dtype") == 1, err  # fmt: skip
    (doc,) = _results(tmp_path / "out")
    plugin = doc["environment"]["plugin"]
    assert (plugin["output_dtype"], plugin["loss_dtype"]) == ("bfloat16", "float32")


@pytest.mark.slow
def test_on_dask_a_sweep_warns_and_records_the_dtypes(tmp_path):
    from test_sweep_dask import cluster, dask_sweep

    _folder(tmp_path, snaps="[2]")
    with cluster(1, cwd=tmp_path) as c:
        proc = dask_sweep(c, "d.toml", tmp_path, "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [WARNING], proc.stderr
    _recorded_float32(_results(tmp_path / "out"), cells=1)


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


def test_compare_reads_the_sweep_manifest_once(tmp_path, monkeypatch):
    """`compare` reads a folder's sweep.json as `check` does, once: its cells, the cells it
    lacks, its [expect] for a page format, and the files it does not list (was one read for
    each, and one more for each folder of --against)."""
    monkeypatch.chdir(tmp_path)
    config = parse_config(CHECKED, source="ci.toml")
    run_sweep(config, "out", run_cell=lambda case, **_: make_result(case))
    run_sweep(config, "ref", run_cell=lambda case, **_: make_result(case, seed=5))
    reads = _manifest_reads(monkeypatch)
    for args, manifests in (
        (["out", "--format", "html", "-o", "r.html"], ["out/sweep.json"]),
        (["out", "--against", "ref"], ["out/sweep.json", "ref/sweep.json"]),
    ):
        reads.clear()
        res = CliRunner().invoke(cli, ["compare", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        assert sorted(reads) == manifests, (args, reads)
