"""A plug-in's floating-point type as it really is (docs/plugins.md, "Dtypes").

The plug-in check reports the floating dtypes of the plug-in's parameters and states, each
with where it was first seen. On autograd a plug-in's arrays keep their own dtype (nothing
casts them): the case records it, and with it the gradient tolerance, where ckptbench knows
that dtype. On torch and JAX ``--dtype`` casts ``init``'s arrays, and a plug-in whose own
code leaves that dtype is refused, as a step that changes its state's dtype already was.
"""

from __future__ import annotations

import json

import pytest
from _cli import one_line_error, run_cli
from _frameworks import needs
from test_chain_plugins import case_of, write_chain
from test_plugins import AUTOGRAD, SIZES, TINY

from ckptbench.measure.runner import EPSILON, grad_tolerance
from ckptbench.measure.tasks import PluginError, checked_plugin
from ckptbench.results.schema import Case
from ckptbench.workloads.check import check_workload

#: AUTOGRAD with every array of ``init`` in float32.
F32 = AUTOGRAD.replace(
    "        return p, s0, rng.standard_normal((steps, self.b, self.i))",
    "        f = lambda a: a.astype(np.float32)\n"
    "        p = {k: f(v) for k, v in p.items()}\n"
    "        return p, f(s0), f(rng.standard_normal((steps, self.b, self.i)))",
)
assert F32 != AUTOGRAD
#: AUTOGRAD with float32 parameters and inputs and a float64 state (numpy promotes).
MIXED = F32.replace("return p, f(s0), f(", "return p, s0, f(")


def _case(model: str, **kw) -> Case:
    return Case(model=model, steps=5, snaps=2, **{**SIZES, **kw})


def test_the_check_reports_the_dtypes_of_params_and_states_where_first_seen(tmp_path, monkeypatch):
    """The check said nothing of dtypes: a float32 plug-in was recorded as float64."""
    monkeypatch.chdir(tmp_path)
    for name, text, want in [
        ("f64.py", AUTOGRAD, {"float64": "init's params"}),
        ("f32.py", F32, {"float32": "init's params"}),
        ("mixed.py", MIXED, {"float32": "init's params", "float64": "init's state0"}),
    ]:
        (tmp_path / name).write_text(text)
        report = check_workload(_case(f"{name}:make"))
        assert report["problem"] is None, report
        assert report["dtypes"] == want, name


@pytest.mark.slow
def test_a_float32_autograd_plugin_is_recorded_and_checked_as_float32(
    tmp_path, monkeypatch, capsys
):
    """Recorded as dtype float64, with float64's gradient tolerance (2**-52 per step)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f32.py").write_text(F32)
    code, _, err = run_cli(capsys, ["run", "--model", "f32.py:make", *TINY, "--out", "r.json"])
    assert code == 0, err
    assert "recorded as float32" in err  # the note: --dtype did not decide it
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["case"]["dtype"] == "float32"
    tol = doc["environment"]["grad_tolerance"]
    assert tol["dtype"] == "float32" and tol["epsilon"] == EPSILON["float32"] == 2.0**-23
    assert tol["max_rel_err"] == grad_tolerance("float32", 20)


def test_autograd_records_the_plugins_dtype_or_refuses_another_asked(tmp_path, monkeypatch):
    """In a real disposable worker, as run and sweep check a plug-in."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f32.py").write_text(F32)
    (tmp_path / "f64.py").write_text(AUTOGRAD)
    (tmp_path / "mixed.py").write_text(MIXED)
    checked = checked_plugin(_case("f32.py:make"))
    assert checked.case.dtype == "float32"
    assert any("recorded as float32" in n for n in checked.notes), checked.notes
    asked = checked_plugin(_case("f32.py:make", dtype="float32"))  # as asked: nothing to say
    assert asked.case.dtype == "float32" and not any("float32" in n for n in asked.notes)
    assert checked_plugin(_case("f64.py:make")).case.dtype == "float64"
    with pytest.raises(PluginError, match=r"init's params are float64, not the --dtype "
                                          r"float32 asked"):  # fmt: skip
        checked_plugin(_case("f64.py:make", dtype="float32"))
    (tmp_path / "f16.py").write_text(F32.replace("np.float32", "np.float16"))
    f16 = checked_plugin(_case("f16.py:make"))  # epsilon 2**-10: recorded (test_hardening13_dtypes)
    assert f16.case.dtype == "float16"
    assert any("recorded as float16" in n for n in f16.notes)
    mixed = checked_plugin(_case("mixed.py:make"))
    assert mixed.case.dtype == "float32"  # the least precise: the looser tolerance
    assert any("float32 (init's params) and float64 (init's state0)" in n for n in mixed.notes)


def test_autograd_still_refuses_dtype_for_a_builtin():
    with pytest.raises(ValueError, match="--dtype float32 needs --backend"):
        Case(model="lstm", dtype="float32", backend="autograd")


@pytest.mark.parametrize(
    "backend",
    [pytest.param("torch", marks=needs("torch")), pytest.param("jax", marks=needs("jax"))],
)
def test_a_chain_that_leaves_the_asked_dtype_is_refused(tmp_path, monkeypatch, backend):
    """--dtype float32 casts init's arrays; this chain's last layer computes in float64
    anyway. Its states were then float64 under a float32 result (and the JAX check ran in
    float64 whatever --dtype said)."""
    monkeypatch.chdir(tmp_path)
    layer = (
        "def layer(self, i, p, x):\n"
        "    y = x @ p['W'] if p else xp.tanh(x)\n"
        "    return y if i < 5 else y * xp.ones(4, dtype=xp.float64)\n"
    )
    model = write_chain(tmp_path, backend, "f64", layer=layer)
    case = case_of(model, backend, dtype="float32")
    report = check_workload(case)
    assert report["problem"] is None, report
    assert report["dtypes"] == {"float32": "init's params", "float64": "layer 5's output"}
    with pytest.raises(PluginError, match=r"layer 5's output is float64, not the --dtype "
                                          r"float32 asked"):  # fmt: skip
        checked_plugin(case)
    good = write_chain(tmp_path, backend, "f32")
    assert checked_plugin(case_of(good, backend, dtype="float32")).case.dtype == "float32"


def test_run_refuses_an_autograd_dtype_the_plugin_does_not_compute_in(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f64.py").write_text(AUTOGRAD)
    err = one_line_error(capsys, ["run", "--model", "f64.py:make", *TINY, "--dtype", "float32",
                                  "--out", "r.json"])  # fmt: skip
    assert "init's params are float64, not the --dtype float32 asked" in err
    assert not (tmp_path / "r.json").exists()


def test_a_dtype_axis_over_an_autograd_plugin_is_one_cell_once_checked(
    tmp_path, monkeypatch, capsys
):
    """The check records an autograd plug-in's own dtype, so `dtype = ["float64",
    "float32"]` named one cell twice: the sweep measured the first and called the second
    an error ("appeared while the sweep ran"). It is one cell, said in a note."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f32.py").write_text(F32)
    sizes = "".join(f"{k} = {v}\n" for k, v in SIZES.items())
    (tmp_path / "s.toml").write_text(
        f'name = "dt"\n[case]\nmodel = "f32.py:make"\nsteps = 5\n{sizes}'
        '[[grid]]\nsnaps = [2]\ndtype = ["float64", "float32"]\n'
    )
    code, out, err = run_cli(capsys, ["sweep", "s.toml", "--out", "sw", "--dry-run"])
    assert code == 0, err
    assert "1 cell, 1 to measure" in out + err
    assert "1 grid cell(s) the same as another once their plug-in was checked" in out + err
    assert not (tmp_path / "sw").exists()
