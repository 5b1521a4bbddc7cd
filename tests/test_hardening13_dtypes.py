"""A plug-in's dtypes, the leftovers of the dtype work (docs/plugins.md, "Dtypes").

* A recurrence whose ``step`` changes its state's dtype was refused as "step must return a
  state like the one it got", the shape wording; it names the dtype in and out, as the
  refusals of ``measure.tasks`` do (torch, JAX, autograd).
* A float16 autograd plug-in was recorded as float64 (a note: no tolerance known). float16
  has an epsilon (2**-10, IEEE binary16's 10 fraction bits) and its tolerance is derived as
  every other dtype's: 64 x epsilon x steps, capped at 0.5. It is recorded as float16.
* The note saying the run is recorded in another dtype than asked was hidden by ``-q``.
* The dtypes of what ``loss`` gets and of the loss were not recorded: a loss in float32
  under bfloat16 steps is common practice, recorded (``environment.plugin``), never refused.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _cli import run_cli
from _frameworks import needs
from test_plugin_dtypes import F32
from test_plugins import AUTOGRAD, SIZES, TINY

from ckptbench.cli.costs_file import shown_notes
from ckptbench.measure.runner import EPSILON, grad_tolerance
from ckptbench.measure.tasks import checked_plugin
from ckptbench.results.schema import Case
from ckptbench.workloads.check import check_workload

#: F32 with every array of init in float16.
F16 = F32.replace("np.float32", "np.float16")
assert F16 != F32
#: F32 whose step returns its state in float64.
F32_STEP_TO_F64 = F32.replace(
    'return np.tanh(s @ p["W"] + x @ p["U"])',
    'return np.tanh(s @ p["W"] + x @ p["U"]).astype(np.float64)',
)
assert F32_STEP_TO_F64 != F32
#: F32 whose post (so its loss) computes in float64: recorded, not refused.
F32_LOSS_F64 = F32.replace('return s @ p["V"]', 'return s.astype(np.float64) @ p["V"]')
assert F32_LOSS_F64 != F32

#: The same recurrence in torch and JAX, state float32 in (--dtype float32), float64 out.
TORCH_STEP = """
import torch

class W:
    def __init__(self, hidden=8, batch=2, input=4, output=1):
        self.h, self.b, self.i, self.o = hidden, batch, input, output

    def init(self, steps, rng):
        g = lambda *s: torch.from_numpy(rng.standard_normal(s) * 0.1)
        p = {"W": g(self.h, self.h), "U": g(self.i, self.h), "V": g(self.h, self.o)}
        return p, torch.zeros(self.b, self.h), g(steps, self.b, self.i)

    def step(self, p, s, x):
        return torch.tanh(s @ p["W"] + x @ p["U"])

    def post(self, p, s):
        return s @ p["V"]

    def loss(self, ys):
        return (ys ** 2).mean()

def make(hidden=8, batch=2, input=4, output=1):
    return W(hidden, batch, input, output)
"""
JAX_STEP = """
import jax.numpy as jnp

class W:
    def __init__(self, hidden=8, batch=2, input=4, output=1):
        self.h, self.b, self.i, self.o = hidden, batch, input, output

    def init(self, steps, rng):
        g = lambda *s: rng.standard_normal(s) * 0.1
        p = {"W": g(self.h, self.h), "U": g(self.i, self.h), "V": g(self.h, self.o)}
        return p, jnp.zeros((self.b, self.h)), g(steps, self.b, self.i)

    def step(self, p, s, x):
        return jnp.tanh(s @ p["W"] + x @ p["U"])

    def post(self, p, s):
        return s @ p["V"]

    def loss(self, ys):
        return jnp.mean(ys ** 2)

make = W
"""
STEP_TO_F64 = {
    "torch": ('return torch.tanh(s @ p["W"] + x @ p["U"])',
              'return torch.tanh(s @ p["W"] + x @ p["U"]).double()'),
    "jax": ('return jnp.tanh(s @ p["W"] + x @ p["U"])',
            'return jnp.tanh(s @ p["W"] + x @ p["U"]).astype(jnp.float64)'),
}  # fmt: skip
SOURCES = {"torch": TORCH_STEP, "jax": JAX_STEP}


def _case(model: str, **kw) -> Case:
    return Case(model=model, steps=5, snaps=2, **{**SIZES, **kw})


def _write(tmp_path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return f"{name}:make"


# ------------------------------------------------------------------ 1. step's dtype, in and out


@pytest.mark.parametrize(
    "backend",
    [pytest.param("torch", marks=needs("torch")), pytest.param("jax", marks=needs("jax"))],
)
def test_a_step_that_changes_its_states_dtype_names_the_dtype_in_and_out(
    tmp_path, monkeypatch, backend
):
    """Was: "step must return a state like the one it got: expected (array[2, 8] float32),
    got (array[2, 8] float64)", the shape wording, for a dtype."""
    monkeypatch.chdir(tmp_path)
    old, new = STEP_TO_F64[backend]
    text = SOURCES[backend].replace(old, new)
    model = _write(tmp_path, "f64.py", text)
    problem = check_workload(_case(model, backend=backend, dtype="float32"))["problem"]
    line = text.splitlines().index("    def step(self, p, s, x):") + 1  # where step is
    assert problem == (
        "step returned its state in float64 from one in float32, not the --dtype float32 "
        "asked: ckptbench casts init's arrays to --dtype, and the plug-in's own arrays must "
        f"keep to it (make them in x.dtype) (f64.py:{line})"
    )
    good = _write(tmp_path, "good.py", SOURCES[backend])
    report = check_workload(_case(good, backend=backend, dtype="float32"))
    assert report["problem"] is None, report


def test_an_autograd_step_that_changes_its_states_dtype_names_it_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    problem = check_workload(_case(_write(tmp_path, "a.py", F32_STEP_TO_F64)))["problem"]
    assert problem.startswith(
        "step returned its state in float64 from one in float32: a step keeps its state's "
        "dtype (on --backend autograd nothing casts a plug-in's arrays: make the new state "
        "in the dtype of the one it got) (a.py:"
    ), problem
    # a change of shape keeps the shape wording
    grown = F32.replace('return np.tanh(s @ p["W"] + x @ p["U"])',
                        "return np.concatenate([s, s], axis=1)")  # fmt: skip
    problem = check_workload(_case(_write(tmp_path, "g.py", grown)))["problem"]
    assert problem.startswith("step must return a state like the one it got: expected "
                              "(array[2, 8] float32), got (array[2, 16] float32)")  # fmt: skip


# ------------------------------------------------------------------ 2. float16 on autograd


def test_a_float16_autograd_plugin_is_recorded_as_float16_with_its_tolerance(tmp_path, monkeypatch):
    """Was recorded as float64 (float64's tolerance, 2**-52 per step), with a note."""
    monkeypatch.chdir(tmp_path)
    model = _write(tmp_path, "f16.py", F16)
    checked = checked_plugin(_case(model))
    assert checked.case.dtype == "float16"
    assert any("recorded as float16, its arrays' own dtype" in n for n in checked.notes)
    # derived as every dtype's: 64 x 2**-10 x steps, capped at 0.5 (a gross-error check
    # from 8 steps on, as bfloat16's from 1)
    assert EPSILON["float16"] == np.finfo(np.float16).eps == 2.0**-10
    assert grad_tolerance("float16", 5) == 64 * 2.0**-10 * 5
    assert grad_tolerance("float16", 8) == 0.5
    assert grad_tolerance("bfloat16", 1) == 0.5
    assert checked.case.key.split("-")[4] == "f16"


def test_float16_is_a_plugins_own_dtype_only(tmp_path):
    """--dtype is not offered float16, and no built-in or casting backend records it."""
    assert Case(model="f16.py:make", dtype="float16").dtype == "float16"
    with pytest.raises(ValueError, match=r"unknown dtype 'float16' \(choose from"):
        Case(model="lstm", dtype="float16")
    with pytest.raises(ValueError, match=r"unknown dtype 'float16' \(choose from"):
        Case(model="f16.py:make", dtype="float16", backend="torch")
    with pytest.raises(ValueError, match="unknown dtype"):
        Case(model="f16.py:make", dtype=["float16"])  # type: ignore[arg-type]


# ------------------------------------------------------------------ 3. said under -q


def test_the_note_of_another_dtype_than_asked_shows_under_quiet(tmp_path, monkeypatch):
    """``shown_notes(..., quiet=True)`` kept a costs file's warning only: the float32
    plug-in's "recorded as float32" went unsaid under -q."""
    monkeypatch.chdir(tmp_path)
    checked = checked_plugin(_case(_write(tmp_path, "f32.py", F32)))
    shown = shown_notes(checked.notes, quiet=True)
    assert [kind for kind, _ in shown] == ["warning"], checked.notes
    assert "recorded as float32" in shown[0][1]
    # as asked: nothing to say; the plain notes stay hidden under -q
    asked = checked_plugin(_case("f32.py:make", dtype="float32"))
    assert shown_notes(asked.notes, quiet=True) == []
    assert shown_notes(["a plain note"], quiet=True) == []


# ------------------------------------------------------------------ 4. the loss's dtype


def test_the_loss_dtype_is_reported_and_noted_never_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = _write(tmp_path, "loss64.py", F32_LOSS_F64)
    report = check_workload(_case(model))
    assert report["problem"] is None
    assert (report["output_dtype"], report["loss_dtype"]) == ("float64", "float64")
    checked = checked_plugin(_case(model))
    assert checked.case.dtype == "float32"  # the steps', as the check found them
    assert checked.dtypes == {"output_dtype": "float64", "loss_dtype": "float64"}
    assert any(
        "computes the outputs loss gets and the loss in float64, its steps in float32" in n
        for n in checked.notes
    ), checked.notes
    same = checked_plugin(_case(_write(tmp_path, "f64.py", AUTOGRAD)))
    assert same.dtypes == {"output_dtype": "float64", "loss_dtype": "float64"}
    assert not same.notes


@pytest.mark.parametrize("backend", [pytest.param("torch", marks=needs("torch"))])
def test_a_float32_loss_under_bfloat16_steps_is_recorded(tmp_path, monkeypatch, backend):
    monkeypatch.chdir(tmp_path)
    text = TORCH_STEP.replace("return (ys ** 2).mean()", "return (ys.float() ** 2).mean()")
    model = _write(tmp_path, "bf.py", text)
    checked = checked_plugin(_case(model, backend=backend, dtype="bfloat16"))
    assert checked.case.dtype == "bfloat16"
    assert checked.dtypes == {"output_dtype": "bfloat16", "loss_dtype": "float32"}
    assert any("computes the loss in float32, its steps in bfloat16" in n for n in checked.notes)


@pytest.mark.slow
def test_run_q_says_and_records_a_float16_plugin_and_its_loss_dtype(tmp_path, monkeypatch, capsys):
    """End to end: the dtype warning under -q, float16 recorded with its tolerance, and
    the loss's dtype in environment.plugin."""
    monkeypatch.chdir(tmp_path)
    model = _write(tmp_path, "f16.py", F16)
    code, _, err = run_cli(capsys, ["run", "--model", model, *TINY, "--out", "r.json", "-q"])
    assert code == 0, err
    assert "warning --model f16.py:make is recorded as float16" in err
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["case"]["dtype"] == "float16"
    tol = doc["environment"]["grad_tolerance"]
    assert tol["dtype"] == "float16" and tol["epsilon"] == 2.0**-10
    assert tol["max_rel_err"] == grad_tolerance("float16", 20) == 0.5
    assert doc["environment"]["plugin"]["loss_dtype"] == "float16"
    assert doc["environment"]["plugin"]["output_dtype"] == "float16"
    assert all(m["status"] == "ok" for m in doc["modes"]), doc["modes"]
