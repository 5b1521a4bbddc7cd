"""Plug-in layer chains at the edges of the protocol (docs/layers.md, "A chain of your own").

* a layer without parameters (``{}``, which the protocol allows) and a chain with none at
  all: the gradient of every layer's parameters and of x_0 equals the plain one on every
  backend, as the contract tests check for the built-in stacks;
* the plug-in check (run in a disposable worker; here in-process, as the worker calls it)
  differentiates what the modes differentiate (x_0 too), calls ``layer_names`` and refuses
  a name that is not printable text on one line, and refuses a loss, state or gradient that
  is not finite at its first evaluation;
* a plug-in chain too large to plan is refused once its check has found it a chain, before
  any step cost is measured.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from _frameworks import needs

from ckptbench.backends import registry
from ckptbench.results.schema import Case, Mode, ModeResult, Status

#: The array namespace each backend's plug-in writes its layers with.
NAMESPACES = {
    "autograd": "import autograd.numpy as xp",
    "torch": "import torch as xp",
    "jax": "import jax.numpy as xp",
}
BACKENDS = [
    pytest.param("autograd", id="autograd"),
    pytest.param("torch", id="torch", marks=needs("torch")),
    pytest.param("jax", id="jax", marks=needs("jax")),
]


def chain_source(backend: str, with_params: str = "k % 2 == 0", **methods: str) -> str:
    """A plug-in chain of 4x4 layers: layer k has a weight where ``with_params`` holds,
    else ``{}`` (a tanh). ``methods`` add or replace methods (their source, indented)."""
    body = {
        "init": (
            "def init(self, layers, rng):\n"
            f"    params = [{{'W': rng.standard_normal((4, 4)) / 2}} if {with_params} else {{}}\n"
            "              for k in range(layers)]\n"
            "    return params, rng.standard_normal((2, 4))\n"
        ),
        "layer": "def layer(self, i, p, x):\n    return x @ p['W'] if p else xp.tanh(x)\n",
        "loss": "def loss(self, x):\n    return (x ** 2).mean()\n",
        **{k: textwrap.dedent(v) for k, v in methods.items()},
    }
    parts = [textwrap.indent(v, "    ") for v in body.values()]
    return (
        f"{NAMESPACES[backend]}\n\n\nclass Chain:\n" + "\n".join(parts)
        + "\n\ndef make(hidden=8, batch=2, input=4, output=1):\n    return Chain()\n"
    )  # fmt: skip


def write_chain(tmp_path, backend: str, name: str = "chain", **kw: str) -> str:
    """The plug-in's ``--model`` (a file of its own: a module is loaded once per path)."""
    path = tmp_path / f"{name}_{backend}.py"
    path.write_text(chain_source(backend, **kw))
    return f"{path}:make"


def case_of(model: str, backend: str, steps: int = 6, **kw) -> Case:
    executor = "engine" if backend == "jax" else None  # the JAX executor that holds chains
    return Case(model=model, steps=steps, snaps=3, backend=backend, executor=executor,
                hidden=8, batch=2, input=4, output=1, **kw)  # fmt: skip


def check(case: Case) -> dict:
    from ckptbench.workloads.check import check_workload

    return check_workload(case)


# ---------------------------------------------------------------- layers without parameters


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("with_params", "weights"), [("k % 2 == 0", 3), ("False", 0)], ids=["mixed", "none"]
)
def test_layers_without_parameters_keep_the_gradient_contract(
    tmp_path, backend, with_params, weights
):
    """ch_mixed.py: the plug-in check passed, then normal and checkpointed both failed with
    'ValueError: need at least one array to concatenate' (autograd's flatten of ``{}``)."""
    model = write_chain(tmp_path, backend, with_params=with_params)
    case = case_of(model, backend)
    normal = registry.build(case, Mode.NORMAL)
    ckpt = registry.build(case, Mode.CHECKPOINTED)
    loss, grad = normal.gradient(normal.params)
    c_loss, c_grad = ckpt.gradient(ckpt.params)
    want, got = normal.flatten(grad), ckpt.flatten(c_grad)
    assert want.size == got.size == weights * 16 + 2 * 4  # every weight and x_0
    assert c_loss == pytest.approx(loss, rel=1e-13)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
    assert np.any(want != 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_check_differentiates_x0_and_says_when_no_layer_has_parameters(tmp_path, backend):
    """A chain with no parameters at all is measured as the modes take it: the gradient of
    x_0 (the check took it of the parameters only: on torch it refused, 'inputs argument
    to grad() cannot be empty'; on autograd it warned 'Output seems independent of
    input')."""
    model = write_chain(tmp_path, backend, "none", with_params="False")
    report = check(case_of(model, backend))
    assert report["problem"] is None and report["chain"] is True
    assert any("no layer has parameters" in n and "x_0" in n for n in report["notes"])
    mixed = write_chain(tmp_path, backend, "mixed")
    assert check(case_of(mixed, backend))["notes"] == []


# ---------------------------------------------------------------- layer names


NAMES = {
    "two": ("return ['a', 'b']", "layer_names(6) gave 2 names, not 6"),
    "newline": (
        "return [f'L{i}' if i != 1 else 'L1\\nFAKE ROW  999 ms' for i in range(layers)]",
        "gave 'L1\\nFAKE ROW  999 ms' for layer 1: a layer name must be printable text on one line",
    ),
    "escape": (
        "return [f'L{i}' if i != 2 else '\\x1b[31mRED\\x1b[0m' for i in range(layers)]",
        "gave '\\x1b[31mRED\\x1b[0m' for layer 2: a layer name must be printable",
    ),
    "empty": ("return [''] * layers", "gave '' for layer 0: a layer name must not be empty"),
    "raises": ("raise RuntimeError('names boom')", "layer_names raised at "),
    "repeated": (
        "return [f'L{i % 3}' for i in range(layers)]",
        "gave 'L0' for layers 0 and 3: layer names must differ",
    ),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(NAMES))
def test_the_check_refuses_layer_names_the_tables_cannot_show(tmp_path, backend, kind):
    """ch_names_wrong.py: `run` measured all three modes, each failing (exit 1), and `plan`
    failed measuring the step costs; ch_names_nl.py printed a name's newline as a forged
    table row and its escape sequence raw. Now the check, which calls layer_names as the
    modes do, refuses them in one line (repr'd: no newline or escape gets through)."""
    body, says = NAMES[kind]
    model = write_chain(
        tmp_path, backend, kind, layer_names=f"def layer_names(self, layers):\n    {body}\n"
    )
    problem = check(case_of(model, backend))["problem"]
    assert problem is not None and says in problem, problem
    assert problem.isprintable(), problem
    assert f"{kind}_{backend}.py:" in problem  # where: the plug-in's layer_names


def test_good_layer_names_pass_the_check(tmp_path):
    names = "def layer_names(self, layers):\n    return [f'dense{i}' for i in range(layers)]\n"
    model = write_chain(tmp_path, "autograd", layer_names=names)
    assert check(case_of(model, "autograd"))["problem"] is None


@pytest.mark.parametrize(
    ("names", "says"),
    [
        ("['a', 'b']", "layer_names(4) gave 2 names, not 4"),
        # the per-layer tables are keyed by name: the second 'a' overwrote the first
        ("['a', 'b', 'a', 'c']", "gave 'a' for layers 0 and 2: layer names must differ"),
    ],
    ids=["count", "repeated"],
)
def test_plan_and_run_refuse_a_bad_layer_names_before_measuring(capsys, tmp_path, names, says):
    """In a real disposable worker: one line, exit 2, no result and no costs measured."""
    from _cli import one_line_error

    names = f"def layer_names(self, layers):\n    return {names}\n"
    model = write_chain(tmp_path, "autograd", layer_names=names)
    sizes = ["--hidden", "8", "--batch", "2", "--input", "4"]
    err = one_line_error(capsys, ["plan", "--model", model, "--steps", "4", "--budget", "8KiB",
                                  *sizes])  # fmt: skip
    assert says in err and "measuring" not in err
    out = tmp_path / "r.json"
    err = one_line_error(capsys, ["run", "--model", model, "--steps", "4", *sizes, "--out",
                                  str(out)])  # fmt: skip
    assert says in err
    assert not out.exists()


# ---------------------------------------------------------------- names in the tables

LONG = "model.encoder.layers.{}.self_attention.output.dense" + "x" * 250


def _layer_plan(layers: int = 4):
    from ckptbench.schedules.optimal import Costs, plan_optimal

    costs = Costs(forward_time_s=tuple(1e-3 * (i + 1) for i in range(layers)),
                  taped_time_s=tuple(3e-3 for _ in range(layers)),
                  state_bytes=tuple(64 * (i + 1) for i in range(layers)),
                  tape_bytes=tuple(512 for _ in range(layers)))  # fmt: skip
    return plan_optimal(costs, layers, 2048)


def test_a_long_layer_name_is_cut_before_any_number_leaves_the_table():
    """ch_longnames.py: a 300-character name pushed every number out of `plan`'s per-layer
    table ('not shown at this width: advances, plan, tape, state x_i, ...')."""
    from ckptbench.render.layers import layer_table
    from ckptbench.render.table import to_csv, to_text

    names = [LONG.format(i) for i in range(4)]
    table = layer_table(_layer_plan(), names)
    text = to_text(table, 120)
    assert all(len(line) <= 120 for line in text.splitlines() if "…" in line)
    for head in ("forward ms", "taped + reverse ms", "state x_i", "tape", "plan"):
        assert head in text
    rows = [line for line in text.splitlines() if line.startswith("…")]
    assert len(rows) == 4 and all(len(r.split()[0]) == 32 for r in rows)
    assert "shown without the start of long names at this width: layer" in text
    assert to_csv(table).count(LONG.format(0)) == 1  # whole where nothing is narrow
    short = to_text(layer_table(_layer_plan(), [f"dense{i}" for i in range(4)]), 120)
    assert "…" not in short and "long names" not in short


def test_trace_tables_escape_and_cut_layer_names():
    """A name read back from a result file (an older one, or one written by hand) is shown
    on one line: its control characters escaped, never sent to the terminal."""
    from ckptbench.render.format import fmt_name
    from ckptbench.render.table import to_text
    from ckptbench.render.trace import trace_table
    from ckptbench.render.trace_time import layer_time_table
    from ckptbench.results.schema import ModeResult, RunResult, Status

    assert fmt_name("L1\nFAKE \x1b[31m") == "L1\\nFAKE \\x1b[31m"
    assert fmt_name("a" * 40 + " .. " + "b" * 40, 8) == "…aaaaaaa .. …bbbbbbb"
    names = [LONG.format(0), "L1\nFAKE ROW  999 ms", "\x1b[31mRED\x1b[0m"]
    layers = [{"step": i, "layer": n, "predicted_s": 1e-3, "measured_s": 2e-3, "ratio": 2.0}
              for i, n in enumerate(names)]  # fmt: skip
    rows = [{"index": i, "kind": "TAPE", "step": i, "layer": n, "planned_bytes": 0,
             "measured_bytes": 0} for i, n in enumerate(names)]  # fmt: skip
    trace = {"rows": rows, "layers": layers, "method": "vmhwm-per-action", "note": "n",
             "wall_time_s": 1.0}  # fmt: skip
    mode = ModeResult(Mode.CHECKPOINTED, Status.OK, counters={"tape_bytes": 1}, trace=trace)
    result = RunResult(Case(steps=3, snaps=2, hidden=4, batch=2), (mode,), {}, "now")
    for table in (layer_time_table(result), trace_table(result)):
        text = to_text(table, 120)
        assert "\x1b" not in text and "FAKE ROW" in text and "\nFAKE" not in text
        assert "\\x1b[31mRED" in text and LONG.format(0) not in text


# ---------------------------------------------------------------- losses that are not finite

RECURRENCE = """
import autograd.numpy as np


class RNN:
    def init(self, steps, rng):
        p = {"W": rng.standard_normal((4, 4)) / 2, "V": rng.standard_normal((4, 1))}
        return p, np.zeros((2, 4)), rng.standard_normal((steps, 2, 4))

    def step(self, p, s, x):
        {step}

    def post(self, p, s):
        return s @ p["V"]

    def loss(self, ys):
        {loss}


def make(hidden=8, batch=2, input=4, output=1):
    return RNN()
"""
GOOD_STEP = "return np.tanh(s @ p['W'] + x)"


def recurrence(step: str, loss: str) -> str:
    return RECURRENCE.replace("{step}", step).replace("{loss}", loss)


@pytest.mark.parametrize(
    ("step", "loss", "says"),
    [
        (
            GOOD_STEP,
            "return np.mean(ys ** 2) * np.nan",
            "the loss of one step is not finite (nan) at its first evaluation (rnn_0.py:16)",
        ),
        (
            "return s @ p['W'] + x * np.inf",
            "return np.mean(ys ** 2)",
            "the state after one step is not finite (8 of 8 entries nan or inf)",
        ),
        (
            GOOD_STEP,
            "return np.sqrt(np.sum((ys * 0) ** 2))",
            "the gradient of one step is not finite",
        ),
    ],
    ids=["loss", "state", "gradient"],
)
def test_the_check_refuses_a_recurrence_that_is_not_finite_at_once(tmp_path, step, loss, says):
    """nan_loss.py: the check passed, baseline and normal were 'ok' with loss nan, and the
    checkpointed mode failed, as if checkpointing had broken it."""
    path = tmp_path / f"rnn_{len(list(tmp_path.iterdir()))}.py"
    path.write_text(recurrence(step, loss))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        problem = check(Case(model=f"{path.name}:make", steps=4, snaps=2))["problem"]
    assert problem is not None and says in problem, problem
    assert "no gradient of it can be measured" in problem


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("methods", "says"),
    [
        (
            {"loss": "def loss(self, x):\n    return (x ** 2).mean() * float('nan')\n"},
            "the loss of the chain is not finite (nan)",
        ),
        (
            {"layer": "def layer(self, i, p, x):\n    return x * float('inf') if i == 2 else x\n"},
            "layer 2's output is not finite (8 of 8 entries nan or inf)",
        ),
        (
            {"loss": "def loss(self, x):\n    return xp.sqrt(((x * 0) ** 2).sum())\n"},
            "the gradient of the chain is not finite",
        ),
    ],
    ids=["loss", "layer", "gradient"],
)
def test_the_check_refuses_a_chain_that_is_not_finite_at_once(tmp_path, backend, methods, says):
    model = write_chain(tmp_path, backend, **methods)
    problem = check(case_of(model, backend))["problem"]
    assert problem is not None and says in problem, problem


def test_a_loss_that_turns_nan_later_fails_every_mode_that_computes_it(capsys, tmp_path):
    """nan_late.py (finite for 25 steps of a process, then NaN): the check passed, baseline
    and normal were 'ok' with loss nan, and only the checkpointed mode failed. Now every
    mode fails saying the loss is not finite, which no checkpointing changes."""
    from _cli import run_cli

    from ckptbench.results.store import load_result

    step = "RNN.n = getattr(RNN, 'n', 0) + 1\n        " + GOOD_STEP.replace(
        "return", "return (s * np.nan) if RNN.n > 5 else"
    )
    (tmp_path / "late.py").write_text(recurrence(step, "return np.mean(ys**2)"))
    out = tmp_path / "r.json"
    argv = ["run", "--model", f"{tmp_path / 'late.py'}:make", "--steps", "4", "--snaps", "2",
            "--rounds", "1", "--warmup", "0", "--repeats", "2", "--out", str(out)]  # fmt: skip
    code, _, err = run_cli(capsys, argv)
    assert code == 1, err
    result = load_result(out)
    for mode in Mode:
        got = result.mode(mode)
        assert not got.ok and got.error.startswith("the loss is not finite (nan)"), got.error


def test_a_plain_gradient_that_is_not_finite_fails_the_normal_mode(tmp_path):
    from ckptbench.measure.gradcheck import checked

    case = Case(steps=4, snaps=2)
    grads = {m: str(tmp_path / f"{m.value}.npy") for m in Mode}
    np.save(grads[Mode.NORMAL], np.array([1.0, np.inf, np.nan, 2.0]))
    normal = ModeResult(mode=Mode.NORMAL, status=Status.OK, loss=1.0)
    got = checked(case, 0, Mode.NORMAL, normal, tuple(Mode), grads)
    assert not got.ok and got.error.startswith("the plain gradient is not finite: 2 of 4 entries")
    baseline = ModeResult(mode=Mode.BASELINE, status=Status.OK, loss=float("inf"))
    got = checked(case, 0, Mode.BASELINE, baseline, tuple(Mode), grads)
    assert not got.ok and got.error.startswith("the loss is not finite (inf) in float64")
    np.save(grads[Mode.NORMAL], np.ones(4))
    assert checked(case, 0, Mode.NORMAL, normal, tuple(Mode), grads) == normal


# ---------------------------------------------------------------- too long to plan


def test_a_chain_found_by_the_check_is_held_to_the_per_layer_plan_limit():
    from ckptbench.measure.tasks import _for_its_kind
    from ckptbench.schedules.optimal import PlanError

    case = Case(model="x.py:make", steps=1000, strategy="optimal", budget_bytes=2**20)
    with pytest.raises(PlanError, match=r"per-step \(heterogeneous\) costs"):
        _for_its_kind(case, {"chain": True})
    assert _for_its_kind(case, {"chain": False}) == case  # a recurrence plans homogeneously
    revolve = Case(model="x.py:make", steps=1000, snaps=10)
    assert _for_its_kind(revolve, {"chain": True}) == revolve  # nothing to plan
    flat = {"forward_time_s": 1e-3, "taped_time_s": 3e-3, "state_bytes": 64, "tape_bytes": 512}
    assert _for_its_kind(case, {"chain": True}, flat) == case  # given costs say their kind


def test_a_plugin_chain_too_long_to_plan_is_refused_before_its_costs_are_measured(
    capsys, tmp_path, monkeypatch
):
    """ch_good.py --steps 1000: `plan` measured every layer (about 16 s here), then refused
    the plan; `mlp-stack` was refused at once. Now `plan`, `run --strategy optimal` and a
    sweep refuse it once the plug-in check (in its worker) found a chain."""
    from _cli import one_line_error

    import ckptbench.measure.tasks as tasks

    def measured(*args, **kw):
        raise AssertionError("the step costs were measured")

    monkeypatch.setattr(tasks, "measure_costs", measured)
    model = write_chain(tmp_path, "autograd")
    says = "planning 1000 steps with per-step (heterogeneous) costs"
    err = one_line_error(capsys, ["plan", "--model", model, "--steps", "1000", "--budget",
                                  "1MiB"])  # fmt: skip
    assert says in err
    out = tmp_path / "r.json"
    err = one_line_error(capsys, ["run", "--model", model, "--steps", "1000", "--strategy",
                                  "optimal", "--budget", "1MiB", "--out", str(out)])  # fmt: skip
    assert says in err and not out.exists()
    config = tmp_path / "c.toml"
    config.write_text(f'name = "c"\n[case]\nmodel = "{model}"\nsteps = 1000\n'
                      'strategy = "optimal"\nbudget_bytes = 1048576\n'
                      '[grid]\nseed = [0, 1]\n')  # fmt: skip
    err = one_line_error(capsys, ["sweep", str(config), "--out", str(tmp_path / "s")])
    assert f"{config}:4: {says}" in err and not (tmp_path / "s").exists()
