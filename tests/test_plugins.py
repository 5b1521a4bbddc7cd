"""Plug-ins: never run in ckptbench's own process, checked on every backend before any mode,
and written as each framework's users write them (docs/plugins.md).

The check itself (:func:`ckptbench.workloads.check.check_workload`) is called in-process
here, as the disposable worker calls it; the CLI paths use the fake worker
(``tests/fake_worker.py``) or, marked ``slow``, a real one at tiny sizes.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from _cli import run_cli
from click.testing import CliRunner

from ckptbench.cli import cli
from ckptbench.results.schema import Case
from ckptbench.workloads import plugin_provenance

TESTS = Path(__file__).parent
TINY = ["--steps", "20", "--hidden", "8", "--batch", "2", "--input", "4", "--rounds", "1",
        "--warmup", "0", "--repeats", "1", "--precision", "off"]  # fmt: skip
SIZES = {"hidden": 8, "batch": 2, "input": 4, "output": 1}

AUTOGRAD = textwrap.dedent(
    """
    import autograd.numpy as np

    class W:
        def __init__(self, hidden=8, batch=2, input=4, output=1):
            self.h, self.b, self.i, self.o = hidden, batch, input, output

        def init(self, steps, rng):
            p = {"W": rng.standard_normal((self.h, self.h)) * 0.1,
                 "U": rng.standard_normal((self.i, self.h)) * 0.1,
                 "V": rng.standard_normal((self.h, self.o)) * 0.1}
            s0 = np.zeros((self.b, self.h))
            return p, s0, rng.standard_normal((steps, self.b, self.i))

        def step(self, p, s, x):
            return np.tanh(s @ p["W"] + x @ p["U"])

        def post(self, p, s):
            return s @ p["V"]

        def loss(self, ys):
            return np.mean(ys ** 2)

    def make(hidden=8, batch=2, input=4, output=1):
        return W(hidden, batch, input, output)
    """
)


#: A factory with its own size defaults.
OWN_SIZES = (
    "def make(hidden=8, batch=2, input=4, output=1)",
    "def make(hidden=6, batch=3, input=4, output=2)",
)


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return f"{name}:make"


def _variant(body: str) -> str:
    """The autograd plug-in with ``body`` (methods) overriding ``W``'s."""
    return (
        AUTOGRAD
        + "\nclass V(W):\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + (
            "\n\ndef make(hidden=8, batch=2, input=4, output=1):\n"
            "    return V(hidden, batch, input, output)\n"
        )
    )


def _check(spec: str, backend: str = "autograd", given=None, **kw):
    from ckptbench.workloads.check import check_workload

    case = Case(model=spec, steps=5, snaps=2, backend=backend, **{**SIZES, **kw})
    return check_workload(case, given)


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------ never in ckptbench's process


def test_provenance_of_a_package_plugin_never_imports_the_package(tmp_path, monkeypatch):
    """``find_spec("pkg.mod")`` runs ``pkg/__init__``: provenance reads the finders instead."""
    marker = tmp_path / "imported"
    pkg = tmp_path / "evilpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (pkg / "model.py").write_text("from ckptbench.workloads.rnn import rnn as make\n")
    monkeypatch.chdir(tmp_path)
    sys_path = list(sys.path)
    found = plugin_provenance("evilpkg.model:make")
    assert not marker.exists()
    assert "evilpkg" not in sys.modules
    assert sys.path == sys_path  # nothing appended in this process
    assert found is not None and found["path"] == "evilpkg/model.py" and len(found["sha256"]) == 64
    assert plugin_provenance("evilpkg.missing:make") == {"module": "evilpkg.missing"}
    assert plugin_provenance("nosuchpkg.model:make") == {"module": "nosuchpkg.model"}


def test_run_with_a_package_plugin_never_imports_it_in_ckptbench(fake, tmp_path):
    marker = tmp_path / "imported-in-parent"
    pkg = tmp_path / "evilpkg"
    pkg.mkdir()
    import os

    (pkg / "__init__.py").write_text(
        f"import os\nif os.getpid() == {os.getpid()}:\n    open({str(marker)!r}, 'w').close()\n"
    )
    (pkg / "model.py").write_text("from ckptbench.workloads.rnn import rnn as make\n")
    fake.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["run", "--model", "evilpkg.model:make", *TINY, "--out",
                                   "r.json", "-q"], catch_exceptions=False)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert not marker.exists()
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["environment"]["plugin"]["path"] == "evilpkg/model.py"


BACKENDS = [
    pytest.param("torch", marks=pytest.mark.torch),
    pytest.param("jax", marks=pytest.mark.jax),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_checks_the_plugin_on_every_backend(fake, tmp_path, capsys, backend):
    """The check ran only for autograd: a bad plug-in reached three workers on torch/JAX."""
    pytest.importorskip(backend)
    fake.setenv("FAKE_PLUGIN_BAD", "RuntimeError: boom at import")
    (tmp_path / "mine.py").write_text(AUTOGRAD)
    fake.chdir(tmp_path)
    argv = ["run", "--backend", backend, "--model", "mine.py:make", *TINY, "--out", "r.json"]
    code, out, err = run_cli(capsys, argv)
    assert code == 2 and out == ""
    assert _lines(err) == [
        "ckptbench: error: --model mine.py:make: loading it in a fresh worker failed: "
        "RuntimeError: boom at import"
    ]
    assert not (tmp_path / "r.json").exists()


def test_sweep_checks_each_plugin_before_any_cell(fake, tmp_path, capsys):
    fake.setenv("FAKE_PLUGIN_BAD", "RuntimeError: boom at import")
    (tmp_path / "mine.py").write_text(AUTOGRAD)
    (tmp_path / "tiny.toml").write_text(
        'name = "tiny"\n[case]\nmodel = "mine.py:make"\nsteps = 10\nhidden = 8\n'
        "[grid]\nsnaps = [2, 3]\n"
    )
    fake.chdir(tmp_path)
    code, _, err = run_cli(capsys, ["sweep", "tiny.toml", "--out", "res", "-q"])
    assert code == 2
    assert _lines(err) == [
        "ckptbench: error: tiny.toml:3: model mine.py:make: loading it in a fresh worker "
        "failed: RuntimeError: boom at import"  # the config's key and line (2026-11-29)
    ]
    assert not list((tmp_path / "res").glob("*.json"))


# ------------------------------------------------------------------ the check: one line each


def test_a_good_plugin_passes_and_keeps_the_given_sizes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = _check(_write(tmp_path, "good.py", AUTOGRAD))
    # the state each of the 5 steps starts from: batch 2 x hidden 8 float64
    assert report == {"sizes": SIZES, "notes": [], "problem": None, "chain": False,
                      "state_bytes": [128] * 5, "dtypes": {"float64": "init's params"},
                      "output_dtype": "float64", "loss_dtype": "float64"}  # fmt: skip


def test_the_factorys_own_sizes_apply_where_no_option_was_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "own.py", AUTOGRAD.replace(OWN_SIZES[0], OWN_SIZES[1]))
    report = _check(spec, given={"batch"})
    assert report["problem"] is None
    assert report["sizes"] == {"hidden": 6, "batch": 2, "input": 4, "output": 2}
    assert _check(spec)["sizes"] == SIZES  # every size given: ckptbench's


def test_init_returning_two_values_says_three_were_expected(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "two.py", _variant(
        "def init(self, steps, rng):\n    p, s, x = super().init(steps, rng)\n    return p, s\n"
    ))  # fmt: skip
    problem = _check(spec)["problem"]
    assert problem.startswith(
        "init must return 3 values (params, state0, inputs), got a tuple of 2 values (two.py:"
    )
    assert "expected 4" not in problem


def test_a_runtime_error_in_step_has_the_plugins_file_and_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = _variant("def step(self, p, s, x):\n    return np.concatenate([s, x], axis=0)\n")
    spec = _write(tmp_path, "shape.py", text)
    line = text.splitlines().index("        return np.concatenate([s, x], axis=0)") + 1
    problem = _check(spec)["problem"]
    assert problem.startswith(f"step raised at shape.py:{line}: ValueError: all the input")
    assert "\n" not in problem


def test_a_state_of_another_shape_is_found_before_any_mode(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "grow.py", _variant(
        "def step(self, p, s, x):\n    return np.concatenate([s, s], axis=1)\n"
    ))  # fmt: skip
    problem = _check(spec)["problem"]
    assert problem.startswith(
        "step must return a state like the one it got: expected (array[2, 8] float64), "
        "got (array[2, 16] float64) (grow.py:"
    )


def test_post_returning_a_pytree_and_a_non_scalar_loss(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "tree.py", _variant(
        "def post(self, p, s):\n    return {'a': s @ p['V']}\n"
        "def loss(self, ys):\n    return np.mean(ys['a'] ** 2)\n"
    ))  # fmt: skip
    assert _check(spec)["problem"].startswith(
        "post must return one array (the step's output; loss gets them stacked on a leading "
        "steps axis), got dict (tree.py:"
    )
    spec = _write(tmp_path, "vec.py", _variant("def loss(self, ys):\n    return ys.ravel()\n"))
    assert _check(spec)["problem"].startswith("loss must return a scalar, got array[2] float64")


def test_too_few_inputs_for_the_steps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "few.py", _variant(
        "def init(self, steps, rng):\n    p, s, x = super().init(3, rng)\n    return p, s, x\n"
    ))  # fmt: skip
    assert _check(spec)["problem"].startswith(
        "init's inputs must hold one input per step on their leading axis: --steps 5 needs 5, "
        "got 3 entries"
    )


TORCH_MODULE_STEP = textwrap.dedent(
    """
    import torch

    class GRU:
        '''A step written the usual PyTorch way: the module computes with its own parameters.'''

        def __init__(self, hidden=8, batch=2, input=4, output=1):
            self.b, self.h, self.i = batch, hidden, input
            self.cell = torch.nn.GRUCell(input, hidden).double()
            self.read = torch.nn.Linear(hidden, output).double()

        def init(self, steps, rng):
            xs = torch.from_numpy(rng.standard_normal((steps, self.b, self.i)))
            params = list(self.cell.parameters()) + list(self.read.parameters())
            return params, torch.zeros(self.b, self.h, dtype=torch.float64), xs

        def step(self, params, h, x):
            return self.cell(x, h)

        def post(self, params, h):
            return self.read(h)

        def loss(self, ys):
            return (ys ** 2).mean()

    def make(hidden=8, batch=2, input=4, output=1):
        return GRU(hidden, batch, input, output)
    """
)


@pytest.mark.torch
def test_a_torch_plugin_on_autograd_is_told_to_use_backend_torch(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "tmod.py", TORCH_MODULE_STEP)
    assert _check(spec)["problem"] == "this plug-in returns torch tensors: use --backend torch"
    assert _check(spec, "torch")["problem"] is None


@pytest.mark.torch
def test_an_nn_module_step_using_its_own_parameters_works_as_written(tmp_path, monkeypatch):
    """``step`` calls ``self.cell(x, h)`` and ignores ``params``: ckptbench runs it with the
    differentiated tensors in place of the module's (functional_call); every worker builds
    the same module (torch seeded with the case's seed)."""
    pytest.importorskip("torch")
    from ckptbench.backends.torch.framework import build_gradient, flatten_gradient

    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "tmod.py", TORCH_MODULE_STEP)
    case = Case(model=spec, steps=12, snaps=3, backend="torch", **SIZES)
    normal = build_gradient(case, "normal")
    loss, grad = normal.gradient(normal.params)
    want = flatten_gradient(grad)
    assert np.max(np.abs(want)) > 0
    for strategy in ("revolve", "torch-checkpoint"):
        other = build_gradient(Case(**{**case.__dict__, "strategy": strategy}), "checkpointed")
        got_loss, got = other.gradient(other.params)
        assert got_loss == pytest.approx(loss, rel=1e-12)
        assert np.max(np.abs(flatten_gradient(got) - want)) <= 1e-12 * np.max(np.abs(want))


TORCH_MODULE_PARAMS = textwrap.dedent(
    """
    import torch

    class Net(torch.nn.Module):
        def __init__(self, input, hidden, output):
            super().__init__()
            self.cell = torch.nn.RNNCell(input, hidden)
            self.read = torch.nn.Linear(hidden, output)

    class W:
        def __init__(self, hidden=8, batch=2, input=4, output=1):
            self.b, self.h, self.i, self.o = batch, hidden, input, output

        def init(self, steps, rng):
            net = Net(self.i, self.h, self.o).double()
            FREEZE
            xs = torch.from_numpy(rng.standard_normal((steps, self.b, self.i)))
            return net, torch.zeros(self.b, self.h, dtype=torch.float64), xs

        def step(self, net, h, x):
            return net.cell(x, h)

        def post(self, net, h):
            return net.read(h)

        def loss(self, ys):
            return (ys ** 2).mean()

    make = W
    """
)


@pytest.mark.torch
def test_frozen_parameters_are_noted_and_not_differentiated(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from ckptbench.backends.torch.framework import build_gradient

    monkeypatch.chdir(tmp_path)
    frozen = TORCH_MODULE_PARAMS.replace("FREEZE", "net.cell.requires_grad_(False)")
    spec = _write(tmp_path, "frozen.py", frozen)
    report = _check(spec, "torch")
    assert report["problem"] is None
    assert report["notes"] == [
        "4 of 6 parameters of the module are frozen (requires_grad=False) and not "
        "differentiated: cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh"
    ]
    built = build_gradient(Case(model=spec, steps=5, snaps=2, backend="torch", **SIZES), "normal")
    assert set(built.params) == {"read.weight", "read.bias"}
    spec = _write(tmp_path, "allfrozen.py",
                  TORCH_MODULE_PARAMS.replace("FREEZE", "net.requires_grad_(False)"))  # fmt: skip
    assert _check(spec, "torch")["problem"].startswith(
        "every parameter of the Net init returned is frozen (requires_grad=False)"
    )


@pytest.mark.torch
def test_a_parameterless_module_and_int_parameters_are_refused_by_the_check(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    text = TORCH_MODULE_PARAMS.replace("FREEZE", "net = torch.nn.Module()")
    text = text.replace("net.cell(x, h)", "h").replace("net.read(h)", "h[:, :1]")
    spec = _write(tmp_path, "empty.py", text)
    assert _check(spec, "torch")["problem"].startswith(
        "init returned a Module without parameters as params: there is nothing to differentiate"
    )
    text = TORCH_MODULE_PARAMS.replace("FREEZE", "").replace(
        "return net, torch", "return {'w': torch.ones(8, 8, dtype=torch.int64)}, torch"
    )
    spec = _write(tmp_path, "ints.py", text)
    assert (
        "every parameter must be a floating-point tensor, got a tensor of dtype int64"
        in _check(spec, "torch")["problem"]
    )


JAX_EQX = textwrap.dedent(
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    class Model(eqx.Module):
        cell: eqx.nn.GRUCell
        read: eqx.nn.Linear

    class W:
        def __init__(self, hidden=8, batch=2, input=4, output=1):
            self.b, self.h, self.i, self.o = batch, hidden, input, output

        def init(self, steps, rng):
            k1, k2 = jax.random.split(jax.random.PRNGKey(int(rng.integers(1 << 30))))
            model = Model(eqx.nn.GRUCell(self.i, self.h, key=k1),
                          eqx.nn.Linear(self.h, self.o, key=k2))
            xs = rng.standard_normal((steps, self.b, self.i))
            return model, np.zeros((self.b, self.h)), xs

        def step(self, model, h, x):
            return jax.vmap(model.cell)(x, h)

        def post(self, model, h):
            return jax.vmap(model.read)(h)

        def loss(self, ys):
            return jnp.mean(ys ** 2)

    make = W
    """
)


@pytest.mark.jax
def test_an_equinox_module_as_params_is_differentiated_by_every_strategy(tmp_path, monkeypatch):
    pytest.importorskip("equinox")
    from ckptbench.backends.jax.gradients import flatten_gradient, make_built

    monkeypatch.chdir(tmp_path)
    spec = _write(tmp_path, "eqx_gru.py", JAX_EQX)
    assert _check(spec, "jax") == {"sizes": SIZES, "notes": [], "problem": None, "chain": False,
                                   "state_bytes": [128] * 5,
                                   "dtypes": {"float64": "init's params"},
                                   "output_dtype": "float64", "loss_dtype": "float64"}  # fmt: skip
    assert _check(spec)["problem"] == "this plug-in returns JAX arrays: use --backend jax"
    case = Case(model=spec, steps=8, snaps=3, backend="jax", **SIZES)
    normal = make_built(case, "normal")
    loss, grad = normal.gradient(normal.params)
    want = flatten_gradient(grad)
    assert want.size == 3 * 8 * (4 + 8 + 1) + 8 + 8 + 1  # GRU weights, biases, bias_n; readout
    for strategy in ("revolve", "jax-checkpoint", "equinox"):
        built = make_built(Case(**{**case.__dict__, "strategy": strategy}), "checkpointed")
        got_loss, got = built.gradient(built.params)
        assert got_loss == pytest.approx(loss, rel=1e-12)
        assert np.max(np.abs(flatten_gradient(got) - want)) <= 1e-10 * np.max(np.abs(want))


@pytest.mark.jax
def test_jax_plugin_mistakes_are_one_line(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    monkeypatch.chdir(tmp_path)
    base = AUTOGRAD.replace("import autograd.numpy as np", "import jax.numpy as np")
    base = base.replace("rng.standard_normal", "__import__('numpy').asarray(rng.standard_normal")
    base = base.replace("* 0.1,", ") * 0.1,").replace("* 0.1}", ") * 0.1}")
    base = base.replace("(steps, self.b, self.i))", "(steps, self.b, self.i)))")
    assert _check(_write(tmp_path, "j.py", base), "jax")["problem"] is None
    boom = base.replace("return np.tanh(", "raise RuntimeError('boom in step')\n        return (")
    problem = _check(_write(tmp_path, "jboom.py", boom), "jax")["problem"]
    assert problem.startswith("step raised at jboom.py:") and problem.endswith(
        "RuntimeError: boom in step"
    )
    assert "JAX_TRACEBACK_FILTERING" not in problem
    tree = base.replace('return s @ p["V"]', "return {'a': s @ p['V']}")
    assert _check(_write(tmp_path, "jtree.py", tree), "jax")["problem"].startswith(
        "post must return one array"
    )
    numpy_step = AUTOGRAD.replace("import autograd.numpy as np", "import numpy as np")
    assert _check(_write(tmp_path, "np.py", numpy_step), "jax")["problem"].startswith(
        "step returned numpy arrays, not JAX arrays: a plug-in written with numpy or "
        "autograd.numpy runs with --backend autograd"
    )


# ------------------------------------------------------------------ through the CLI, real workers


@pytest.mark.slow
def test_a_plugin_mistake_is_one_line_exit_2_and_no_result(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two.py").write_text(_variant(
        "def init(self, steps, rng):\n    p, s, x = super().init(steps, rng)\n    return p, s\n"
    ))  # fmt: skip
    code, out, err = run_cli(capsys, ["run", "--model", "two.py:make", *TINY, "--out", "r.json"])
    assert code == 2 and out == ""
    (line,) = _lines(err)
    assert line.startswith(
        "ckptbench: error: --model two.py:make: init must return 3 values (params, state0, "
        "inputs), got a tuple of 2 values (two.py:"
    )
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow
def test_run_records_the_sizes_the_factory_gave_itself(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "own.py").write_text(AUTOGRAD.replace(OWN_SIZES[0], OWN_SIZES[1]))
    argv = ["run", "--model", "own.py:make", "--steps", "10", "--snaps", "3", "--batch", "2",
            "--rounds", "1", "--warmup", "0", "--repeats", "1", "--precision", "off",
            "--out", "r.json", "-q"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert code == 0, err
    case = json.loads((tmp_path / "r.json").read_text())["case"]
    assert (case["hidden"], case["batch"], case["input"], case["output"]) == (6, 2, 4, 2)


# ------------------------------------------------------------------ failures during the modes

JAX_NOTE = (
    "For simplicity, JAX has removed its internal frames from the traceback of the following "
    "exception. Set JAX_TRACEBACK_FILTERING=off to include these."
)


def test_one_failure_in_every_mode_is_one_line_without_jax_boilerplate():
    from dataclasses import replace

    from _synthetic import make_result

    from ckptbench.render import failure_lines
    from ckptbench.results.schema import Status

    result = make_result(seed=1)
    error = "RuntimeError: boom in step (at plug.py:12)"
    modes = tuple(
        replace(
            m,
            status=Status.FAILED,
            error=error,
            exit_code=1,
            stderr_tail=f"Traceback ...\n{error}\n{JAX_NOTE}",
        )
        for m in result.modes
    )
    lines = failure_lines(replace(result, modes=modes))
    assert lines == [f"baseline, normal, checkpointed: failed, exit status 1: {error}"]
    other = replace(modes[0], error="ValueError: x", stderr_tail="MemoryError: y\n" + JAX_NOTE)
    lines = failure_lines(replace(result, modes=(other, *modes[1:])))
    assert lines == [
        "baseline: failed, exit status 1: ValueError: x (stderr: MemoryError: y)",
        f"normal, checkpointed: failed, exit status 1: {error}",
    ]


LATE = _variant(
    """
def step(self, p, s, x):
    self.calls = getattr(self, "calls", 0) + 1
    if self.calls > 6:  # past the check's calls: only a measured mode gets here
        raise RuntimeError("boom in step")
    return super().step(p, s, x)
"""
)


@pytest.mark.slow
def test_a_plugin_error_in_the_modes_names_its_line_once_and_no_absolute_path(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "late.py").write_text(LATE)
    line = LATE.splitlines().index('            raise RuntimeError("boom in step")') + 1
    code, _, err = run_cli(capsys, ["run", "--model", "late.py:make", *TINY, "--out", "r.json"])
    assert code == 1
    failed = [x for x in _lines(err) if "boom" in x]
    assert failed == [
        "failed baseline, normal, checkpointed: failed, exit status 1: RuntimeError: boom in "
        f"step (at late.py:{line})"
    ]
    doc = (tmp_path / "r.json").read_text()
    assert str(tmp_path) not in doc and "late.py" in doc


@pytest.mark.torch
def test_a_device_that_is_not_there_is_said_before_the_plugin_check(fake, tmp_path, capsys):
    """The check builds the workload on the device: a missing GPU is not blamed on init."""
    pytest.importorskip("torch")
    fake.setenv("FAKE_PLUGIN_BAD", "DeviceError: --device cuda needs a CUDA build")
    (tmp_path / "mine.py").write_text(AUTOGRAD)
    fake.chdir(tmp_path)
    argv = ["run", "--backend", "torch", "--device", "cuda", "--model", "mine.py:make", *TINY,
            "--out", "r.json"]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert code == 2
    (line,) = _lines(err)
    assert line.startswith("ckptbench: error: --device cuda: ") and "--model" not in line
