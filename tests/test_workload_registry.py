"""The one workload registry (:mod:`ckptbench.workloads.registry`): every built-in resolves on
every backend its entry names, nothing is imported before a backend builds it, and the
loaders, ``BUILTIN_WORKLOADS`` and the help read it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from _imports import loaded_after_import

from ckptbench.backends import registry as backends
from ckptbench.workloads import BUILTIN_WORKLOADS, Sizes, WorkloadError, load_workload, registry
from ckptbench.workloads.base import REQUIRED_METHODS
from ckptbench.workloads.chain import is_chain

SMALL = {"hidden": 4, "batch": 2, "input": 3, "output": 2}
FRAMEWORKS = ("torch", "jax", "equinox")
MARKED = ("torch", "jax")  # pytest markers named after a backend


def _pairs():
    for entry in registry.WORKLOADS.values():
        for backend in entry.backends():
            marks = [getattr(pytest.mark, backend)] if backend in MARKED else []
            yield pytest.param(entry.name, backend, marks=marks, id=f"{entry.name}-{backend}")


@pytest.mark.parametrize(("name", "backend"), list(_pairs()))
@pytest.mark.filterwarnings("ignore:Explicitly requested dtype")  # JAX without x64: resolving only
def test_every_builtin_resolves_on_every_backend_it_names(name, backend):
    assert backend in backends.BACKENDS, f"workload {name!r} names an unknown backend {backend!r}"
    reason = backends.spec(backend).available()
    if reason is not None:
        pytest.skip(reason)
    factory = registry.factory(name, backend)
    assert callable(factory)
    wl = factory(**SMALL)
    if is_chain(wl):  # a layer chain (ckptbench.workloads.chain)
        params, x0 = wl.init(3, np.random.default_rng(0))
        wl.layer(0, params[0], x0)
        return
    assert all(callable(getattr(wl, m, None)) for m in REQUIRED_METHODS)
    params, state0, inputs = wl.init(2, np.random.default_rng(0))
    wl.post(params, wl.step(params, state0, inputs[0]))


def test_the_registry_is_what_the_names_and_the_help_read():
    assert registry.names() == BUILTIN_WORKLOADS
    assert all(name in registry.model_help() for name in BUILTIN_WORKLOADS)
    assert all(registry.is_builtin(f" {name} ") for name in BUILTIN_WORKLOADS)
    assert not registry.is_builtin("lstm.py:make")


def test_importing_the_registry_or_building_a_numpy_builtin_imports_no_framework():
    assert loaded_after_import("ckptbench.workloads.registry", FRAMEWORKS) == []
    code = (
        "import sys\n"
        "from ckptbench.workloads import Sizes, load_workload, registry\n"
        "for name in registry.names(registry.NUMPY):\n"
        "    load_workload(name, Sizes(hidden=4, batch=2, input=3, output=2))\n"
        f"print(','.join(m for m in {FRAMEWORKS!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_backend_without_an_implementation_refuses_the_name_in_one_line():
    entry = registry.BuiltinWorkload("toy-only", "a toy", {"toy": "ckptbench.workloads.rnn:rnn"})
    registry.register(entry)
    try:
        assert registry.names("toy") == ("toy-only",)
        assert registry.factory("toy-only", "toy")(**SMALL) is not None
        with pytest.raises(WorkloadError, match=r"^workload 'toy-only' has no autograd .*toy\)$"):
            load_workload("toy-only", Sizes(**SMALL))
    finally:
        del registry.WORKLOADS["toy-only"]
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.BuiltinWorkload("lstm", "another", {}))
    with pytest.raises(ValueError, match="module:attribute"):
        registry.BuiltinWorkload("x", "x", {"autograd": "no-colon"})
