"""Tests for ckptbench.workloads: built-in RNN/LSTM and the plug-in loader."""

from __future__ import annotations

import dataclasses
import sys
import textwrap
import uuid

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ckptbench.workloads import (
    BUILTIN_RECURRENCES,
    BUILTIN_WORKLOADS,
    LSTM,
    RNN,
    Sizes,
    Workload,
    WorkloadError,
    load_workload,
    state_nbytes,
)
from ckptbench.workloads.lstm import lstm
from ckptbench.workloads.rnn import rnn

SMALL = Sizes(hidden=8, batch=4, input=3, output=2)


def leaves(tree):
    """Arrays of a dict / tuple / array, in a fixed order."""
    if isinstance(tree, dict):
        return [a for key in sorted(tree) for a in leaves(tree[key])]
    if isinstance(tree, tuple | list):
        return [a for part in tree for a in leaves(part)]
    return [np.asarray(tree)]


def full_loss(workload, params, state0, inputs):
    """The gradient's objective: plain python loop over step/post, then loss."""
    state, outputs = state0, []
    for x in inputs:
        state = workload.step(params, state, x)
        outputs.append(workload.post(params, state))
    return workload.loss(anp.stack(outputs))


def run_forward(workload, params, state0, inputs):
    """Plain numpy forward; returns the last state and the max |.| seen over all states."""
    state, biggest = state0, 0.0
    for x in inputs:
        state = workload.step(params, state, x)
        biggest = max(biggest, *(float(np.max(np.abs(a))) for a in leaves(state)))
    return state, biggest


# --------------------------------------------------------------------------- sizes


def test_sizes_defaults_are_the_reference_case_and_output_follows_input():
    assert Sizes() == Sizes(hidden=256, batch=16, input=32, output=32)
    assert Sizes(input=5).output == 5
    assert Sizes(input=5, output=7).output == 7
    assert Sizes(hidden=3).as_kwargs() == {"hidden": 3, "batch": 16, "input": 32, "output": 32}
    with pytest.raises(dataclasses.FrozenInstanceError):
        Sizes().hidden = 3  # type: ignore[misc]


@pytest.mark.parametrize("field", ["hidden", "batch", "input", "output"])
@pytest.mark.parametrize("value", [0, -3, 2.0, True, "8"])
def test_sizes_reject_non_positive_or_non_integer(field, value):
    with pytest.raises(WorkloadError) as info:
        Sizes(**{field: value})
    assert field in str(info.value)
    assert "\n" not in str(info.value)


def test_numpy_integers_are_accepted_as_sizes():
    sizes = Sizes(hidden=np.int64(4))
    assert sizes.hidden == 4
    assert type(sizes.hidden) is int


# ----------------------------------------------------------------- built-in models


def test_builtin_names():
    assert BUILTIN_RECURRENCES == ("lstm", "rnn")
    assert set(BUILTIN_WORKLOADS) == {"lstm", "rnn", "mlp-stack", "cnn-stack", "transformer-stack"}
    assert isinstance(load_workload("rnn", SMALL), RNN)
    assert isinstance(load_workload("lstm", SMALL), LSTM)
    assert isinstance(load_workload(" lstm ", SMALL), LSTM)


def test_rnn_shapes_and_dtypes():
    w = load_workload("rnn", SMALL)
    assert isinstance(w, Workload)
    params, h0, inputs = w.init(5, np.random.default_rng(0))
    assert {k: v.shape for k, v in params.items()} == {
        "W_xh": (3, 8),
        "W_hh": (8, 8),
        "b": (8,),
        "W_out": (8, 2),
        "b_out": (2,),
    }
    assert h0.shape == (4, 8)
    assert 0.01 < np.std(h0) < 1.0  # small but non-zero: d loss / d h0 is not trivial
    assert inputs.shape == (5, 4, 3)
    h1 = w.step(params, h0, inputs[0])
    y = w.post(params, h1)
    assert h1.shape == (4, 8)
    assert y.shape == (4, 2)
    loss = w.loss(np.stack([y, y]))
    assert np.ndim(loss) == 0
    for a in [*leaves(params), h0, inputs, h1, y]:
        assert a.dtype == np.float64
    assert w.state_nbytes == state_nbytes(h0) == 4 * 8 * 8


def test_lstm_shapes_and_dtypes():
    w = load_workload("lstm", SMALL)
    assert isinstance(w, Workload)
    params, state0, inputs = w.init(5, np.random.default_rng(0))
    assert {k: v.shape for k, v in params.items()} == {
        "W": (3 + 8, 4 * 8),
        "b": (4 * 8,),
        "W_out": (8, 2),
        "b_out": (2,),
    }
    assert isinstance(state0, tuple)
    assert [a.shape for a in state0] == [(4, 8), (4, 8)]
    assert all(0.01 < np.std(a) < 1.0 for a in state0)
    assert inputs.shape == (5, 4, 3)
    state1 = w.step(params, state0, inputs[0])
    assert isinstance(state1, tuple)
    assert [a.shape for a in state1] == [(4, 8), (4, 8)]
    y = w.post(params, state1)
    assert y.shape == (4, 2)
    assert np.ndim(w.loss(np.stack([y, y, y]))) == 0
    for a in [*leaves(params), *state0, inputs, *state1, y]:
        assert a.dtype == np.float64
    assert w.state_nbytes == state_nbytes(state0) == 2 * 4 * 8 * 8


def test_reference_state_sizes():
    assert load_workload("lstm", Sizes()).state_nbytes == 2 * 16 * 256 * 8 == 65536
    assert load_workload("rnn", Sizes()).state_nbytes == 16 * 256 * 8 == 32768


def test_lstm_forget_bias_starts_at_one():
    params, _, _ = LSTM(hidden=8, batch=2, input=3, output=2).init(1, np.random.default_rng(0))
    np.testing.assert_array_equal(params["b"][8:16], 1.0)
    np.testing.assert_array_equal(params["b"][:8], 0.0)
    np.testing.assert_array_equal(params["b"][16:], 0.0)


def test_lstm_step_matches_textbook_formulas():
    """The fused tanh-gate trick must equal sigmoid/tanh gates computed separately."""
    w = LSTM(hidden=5, batch=3, input=4, output=2)
    params, (h, c), inputs = w.init(1, np.random.default_rng(7))
    params["b"] = np.random.default_rng(8).standard_normal(20)  # exercise every bias

    def sigmoid(u):
        return 1.0 / (1.0 + np.exp(-u))

    z = np.concatenate([inputs[0], h], axis=1) @ params["W"] + params["b"]
    i, f, o, g = sigmoid(z[:, :5]), sigmoid(z[:, 5:10]), sigmoid(z[:, 10:15]), np.tanh(z[:, 15:])
    c_ref = f * c + i * g
    h_ref = o * np.tanh(c_ref)
    h_new, c_new = w.step(params, (h, c), inputs[0])
    np.testing.assert_allclose(c_new, c_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(h_new, h_ref, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(w.post(params, (h_new, c_new)), h_ref @ params["W_out"])


def test_rnn_step_matches_formula():
    w = RNN(hidden=5, batch=3, input=4, output=2)
    params, h, inputs = w.init(1, np.random.default_rng(7))
    ref = np.tanh(h @ params["W_hh"] + inputs[0] @ params["W_xh"] + params["b"])
    np.testing.assert_allclose(w.step(params, h, inputs[0]), ref, rtol=1e-13)


def test_loss_uses_every_output():
    for name in BUILTIN_RECURRENCES:
        w = load_workload(name, SMALL)
        outputs = np.random.default_rng(1).standard_normal((6, 4, 2))
        g = grad(w.loss)(outputs)
        assert np.all(np.any(g != 0, axis=(1, 2))), name


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_init_is_deterministic_per_seed(name):
    w = load_workload(name, SMALL)
    a = leaves(w.init(6, np.random.default_rng(123)))
    b = leaves(w.init(6, np.random.default_rng(123)))
    c = leaves(w.init(6, np.random.default_rng(124)))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    # Every random array differs for another seed (constant biases may coincide).
    differing = [not np.array_equal(x, y) for x, y in zip(a, c, strict=True)]
    assert sum(differing) >= len(a) - 2
    # The inputs (last leaf) and the first weight matrix certainly differ.
    assert differing[-1]
    assert differing[0]


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_params_do_not_depend_on_steps_and_inputs_are_prefixes(name):
    w = load_workload(name, SMALL)
    p5, s5, x5 = w.init(5, np.random.default_rng(3))
    p9, s9, x9 = w.init(9, np.random.default_rng(3))
    for a, b in zip(leaves((p5, s5)), leaves((p9, s9)), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(x5, x9[:5])


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_init_accepts_int_seed_and_rejects_bad_steps(name):
    w = load_workload(name, SMALL)
    np.testing.assert_array_equal(w.init(2, 5)[2], w.init(2, np.random.default_rng(5))[2])
    for bad in (0, -1, 1.5):
        with pytest.raises(WorkloadError) as info:
            w.init(bad, np.random.default_rng(0))
        assert "steps" in str(info.value)


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_ten_thousand_steps_stay_finite_and_bounded(name):
    w = load_workload(name, Sizes(hidden=8, batch=4, input=3, output=2))
    params, state0, inputs = w.init(10_000, np.random.default_rng(0))
    state, biggest = run_forward(w, params, state0, inputs)
    for a in leaves(state):
        assert np.all(np.isfinite(a))
    # tanh bounds h by 1; the LSTM cell c is bounded by ~1/(1 - max forget gate).
    assert biggest < 20.0
    # ...and the dynamics have not collapsed to a fixed point at zero.
    h = leaves(state)[0]
    assert np.std(h) > 1e-3
    y = w.post(params, state)
    assert np.all(np.isfinite(y))
    assert np.isfinite(w.loss(np.stack([y])))


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_gradient_matches_central_finite_differences(name):
    w = load_workload(name, Sizes(hidden=6, batch=3, input=4, output=3))
    params, state0, inputs = w.init(5, np.random.default_rng(11))
    # Non-zero biases, so that their gradients are not a special case.
    rng = np.random.default_rng(12)
    params = {k: v + 0.1 * rng.standard_normal(v.shape) for k, v in params.items()}

    def loss_of(p):
        return full_loss(w, p, state0, inputs)

    g = grad(loss_of)(params)
    assert set(g) == set(params)
    eps = 1e-5  # central differences: truncation ~eps**2, round-off ~1e-16/eps
    checked = 0
    for key in sorted(params):
        assert g[key].shape == params[key].shape
        # Random entries among those whose gradient is not negligible (a relative
        # error of a ~0 entry measures round-off, not the gradient).
        candidates = np.argwhere(np.abs(g[key]) > 1e-5)
        assert len(candidates) >= 0.5 * g[key].size, key
        for row in rng.choice(len(candidates), size=3, replace=False):
            idx = tuple(int(i) for i in candidates[row])
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[key][idx] += eps
            minus[key][idx] -= eps
            fd = (loss_of(plus) - loss_of(minus)) / (2 * eps)
            ad = g[key][idx]
            assert abs(ad - fd) / max(abs(ad), abs(fd)) < 1e-6, (key, idx, ad, fd)
            checked += 1
    assert checked == 3 * len(params)


@pytest.mark.parametrize("name", BUILTIN_RECURRENCES)
def test_gradient_wrt_initial_state_and_inputs(name):
    """Directional derivatives along random directions, for state0 and inputs."""
    w = load_workload(name, Sizes(hidden=5, batch=2, input=3, output=2))
    params, state0, inputs = w.init(4, np.random.default_rng(21))
    rng = np.random.default_rng(22)
    eps = 1e-5

    g_state = grad(lambda s: full_loss(w, params, s, inputs))(state0)
    d_state = tuple(rng.standard_normal(a.shape) for a in leaves(state0))
    d_state = d_state[0] if not isinstance(state0, tuple) else d_state

    def shifted(t):
        if isinstance(state0, tuple):
            return tuple(a + t * d for a, d in zip(state0, d_state, strict=True))
        return state0 + t * d_state

    fd = full_loss(w, params, shifted(eps), inputs) - full_loss(w, params, shifted(-eps), inputs)
    fd /= 2 * eps
    ad = sum(np.sum(g * d) for g, d in zip(leaves(g_state), leaves(d_state), strict=True))
    assert abs(ad) > 1e-4
    assert abs(ad - fd) / abs(ad) < 1e-6

    g_in = grad(lambda x: full_loss(w, params, state0, x))(inputs)
    assert g_in.shape == inputs.shape
    assert np.all(np.any(g_in != 0, axis=(1, 2)))  # every step's input matters
    d_in = rng.standard_normal(inputs.shape)
    fd = (
        full_loss(w, params, state0, inputs + eps * d_in)
        - full_loss(w, params, state0, inputs - eps * d_in)
    ) / (2 * eps)
    ad = np.sum(g_in * d_in)
    assert abs(ad - fd) / abs(ad) < 1e-6


def test_builtin_factories_default_output_to_input_and_validate():
    assert rnn(hidden=4, batch=2, input=3).output == 3
    assert lstm(hidden=4, batch=2, input=3, output=7).output == 7
    assert lstm() == LSTM(hidden=256, batch=16, input=32, output=32)
    for factory in (rnn, lstm):
        with pytest.raises(WorkloadError) as info:
            factory(hidden=0)
        assert "hidden" in str(info.value)
        assert "\n" not in str(info.value)


# ----------------------------------------------------------------- plug-in loader

PLUGIN_SOURCE = textwrap.dedent(
    """
    from ckptbench.workloads.rnn import RNN


    class Recorded(RNN):
        pass


    def _make(**kwargs):
        sizes = {"hidden": 4, "batch": 2, "input": 3, "output": 2}
        sizes.update(kwargs)
        w = Recorded(**sizes)
        object.__setattr__(w, "received", dict(kwargs))
        return w


    def only_hidden_batch(hidden, batch):
        return _make(hidden=hidden, batch=batch)


    def everything(**kwargs):
        return _make(**kwargs)


    def nothing():
        return _make()


    def keyword_only_output(*, output, depth=3):
        return _make(output=output)


    def extra_optional(input, scale=1.0):
        return _make(input=input)


    class Builder:
        def __init__(self, hidden, unrelated=None):
            self.hidden = hidden

        @staticmethod
        def build(batch):
            return _make(batch=batch)

        def init(self, steps, rng):
            return {}, None, None

        def step(self, params, state, x):
            return state

        def post(self, params, state):
            return state

        def loss(self, outputs):
            return 0.0


    NOT_CALLABLE = 42


    def needs_depth(hidden, depth):
        return _make(hidden=hidden)


    def positional_only(hidden, /):
        return _make(hidden=hidden)


    def raises(hidden):
        raise ValueError("hidden too odd\\nsecond line of detail")


    class Partial:
        def init(self, steps, rng):
            pass

        step = "not a method"


    def partial():
        return Partial()


    def returns_none():
        return None
    """
)


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "my_plugin.py"
    path.write_text(PLUGIN_SOURCE)
    return path


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A package ``<unique>.plug`` importable from a tmp dir on sys.path."""
    name = f"ckpt_test_pkg_{uuid.uuid4().hex[:8]}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "plug.py").write_text(PLUGIN_SOURCE)
    (tmp_path / name / "broken.py").write_text("raise RuntimeError('module boom\\nmore')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}.plug"
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


SIZES = Sizes(hidden=5, batch=3, input=4, output=6)


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        ("only_hidden_batch", {"hidden": 5, "batch": 3}),
        ("everything", {"hidden": 5, "batch": 3, "input": 4, "output": 6}),
        ("nothing", {}),
        ("keyword_only_output", {"output": 6}),
        ("extra_optional", {"input": 4}),
        ("Builder.build", {"batch": 3}),
    ],
)
def test_file_plugin_gets_only_accepted_sizes(plugin_file, factory, expected):
    w = load_workload(f"{plugin_file}:{factory}", SIZES)
    assert w.received == expected
    for key, value in expected.items():
        assert getattr(w, key) == value
    # The loaded object is a working workload.
    params, h0, inputs = w.init(2, np.random.default_rng(0))
    assert np.all(np.isfinite(full_loss(w, params, h0, inputs)))


def test_module_plugin_gets_only_accepted_sizes(plugin_module):
    w = load_workload(f"{plugin_module}:only_hidden_batch", SIZES)
    assert w.received == {"hidden": 5, "batch": 3}
    w = load_workload(f"{plugin_module}:everything", SIZES)
    assert w.received == SIZES.as_kwargs()


def test_class_plugin_is_a_factory(plugin_file):
    w = load_workload(f"{plugin_file}:Builder", SIZES)
    assert type(w).__name__ == "Builder"
    assert w.hidden == 5


def test_relative_file_plugin(plugin_file, monkeypatch):
    monkeypatch.chdir(plugin_file.parent)
    assert load_workload("my_plugin.py:nothing", SIZES).received == {}
    assert load_workload("./my_plugin.py:nothing", SIZES).received == {}


def assert_workload_error(spec, *fragments, sizes=SIZES):
    with pytest.raises(WorkloadError) as info:
        load_workload(spec, sizes)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_unknown_builtin_lists_valid_names():
    message = assert_workload_error("gru", "'gru'", "lstm", "rnn")
    assert message.startswith("unknown workload")


@pytest.mark.parametrize("spec", ["", "   "])
def test_empty_spec(spec):
    assert_workload_error(spec, "empty")


def test_missing_file(tmp_path):
    assert_workload_error(f"{tmp_path / 'nope.py'}:make", "nope.py", "no such file or folder")


def test_directory_is_not_a_file(tmp_path):
    (tmp_path / "pkg.py").mkdir()
    assert_workload_error(f"{tmp_path / 'pkg.py'}:make", "directory")


def test_spec_without_factory_name(plugin_file):
    assert_workload_error(f"{plugin_file}:", "no factory NAME")
    assert_workload_error(":make", "nothing before")
    assert_workload_error(f"{plugin_file}:not-a-name", "'not-a-name'")


def test_file_import_failure(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("x = 1\nraise RuntimeError('file boom\\nsecond line')\n")
    assert_workload_error(f"{bad}:make", "bad.py", "RuntimeError: file boom")
    assert not [m for m in sys.modules if m.startswith("ckptbench_plugin_bad_")]


def test_file_syntax_error(tmp_path):
    bad = tmp_path / "syntax.py"
    bad.write_text("def broken(:\n    pass\n")
    assert_workload_error(f"{bad}:broken", "syntax.py", "SyntaxError")


def test_module_import_failures(plugin_module):
    package = plugin_module.rsplit(".", 1)[0]
    assert_workload_error(f"{package}.broken:make", "cannot import", "RuntimeError: module boom")
    assert_workload_error(
        "no_such_module_xyz.sub:make", "no_such_module_xyz", "ModuleNotFoundError"
    )
    assert_workload_error("not a module:make", "not a valid module name")


@pytest.mark.parametrize("kind", ["file", "module"])
def test_missing_attribute(plugin_file, plugin_module, kind):
    target = str(plugin_file) if kind == "file" else plugin_module
    assert_workload_error(f"{target}:nonexistent", "no attribute 'nonexistent'")
    assert_workload_error(f"{target}:Builder.nonexistent", "'Builder'", "'nonexistent'")


def test_not_callable(plugin_file):
    assert_workload_error(f"{plugin_file}:NOT_CALLABLE", "NOT_CALLABLE", "not callable", "int")


@pytest.mark.parametrize("factory", ["needs_depth", "positional_only"])
def test_factory_that_needs_more_than_sizes(plugin_file, factory):
    assert_workload_error(f"{plugin_file}:{factory}", factory, "cannot be called", "TypeError")


def test_factory_raising(plugin_file):
    message = assert_workload_error(
        f"{plugin_file}:raises", "raises", "raised", "ValueError: hidden too odd"
    )
    assert "second line" not in message


def test_returned_object_missing_methods(plugin_file):
    message = assert_workload_error(f"{plugin_file}:partial", "Partial", "step, post, loss")
    assert "init," not in message.split("method(s):")[1].split("(need")[0]
    assert_workload_error(f"{plugin_file}:returns_none", "NoneType", "init, step, post, loss")


def test_non_positive_sizes_rejected_by_loader(plugin_file):
    for bad in ({"hidden": 0}, {"batch": -2}, {"input": 0}, {"output": 0}):
        with pytest.raises(WorkloadError) as info:
            load_workload("lstm", Sizes(**bad))
        assert "\n" not in str(info.value)
    # A Sizes forced past its own validation is still caught by the loader.
    forced = Sizes(hidden=4)
    object.__setattr__(forced, "batch", 0)
    assert_workload_error("rnn", "batch", "positive", sizes=forced)
    # ...even for a plug-in that ignores its sizes.
    assert_workload_error(f"{plugin_file}:nothing", "batch", "positive", sizes=forced)
    with pytest.raises(WorkloadError):
        load_workload("rnn", {"hidden": 4})  # type: ignore[arg-type]


def test_error_is_a_value_error_with_one_line():
    err = WorkloadError("first\nsecond\r\n  third")
    assert isinstance(err, ValueError)
    assert str(err) == "first second third"
