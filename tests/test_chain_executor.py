"""A built-in layer chain runs on an executor that holds its changing shapes (JAX: the
engine), chosen or refused before anything is measured."""

from __future__ import annotations

import subprocess
import sys

import pytest
from _cli import one_line_error

from ckptbench.results.chains import chain_executor
from ckptbench.results.schema import Case, CaseError
from ckptbench.sweep.config import load_config


def test_a_jax_chain_without_executor_runs_the_engine_and_says_so_in_its_case():
    case = chain_executor(Case(model="mlp-stack", backend="jax", steps=6, snaps=2))
    assert case.executor == "engine" and case.executor_used == "engine"
    assert "executor" in case.identity()  # not the CPU default: the key records it


@pytest.mark.parametrize(
    "fields",
    [
        {"model": "lstm", "backend": "jax"},  # a recurrence: the compiled default stays
        {"model": "mlp-stack", "backend": "torch"},  # torch runs the engine anyway
        {"model": "mlp-stack", "backend": "jax", "strategy": "jax-every-layer"},  # a peer
        {"model": "mlp-stack", "backend": "jax", "executor": "engine"},
    ],
)
def test_other_cases_are_unchanged(fields):
    case = Case(steps=6, snaps=2, **fields)
    assert chain_executor(case) is case


def test_a_jax_chain_on_the_compiled_executor_is_a_case_error():
    with pytest.raises(CaseError, match="--executor engine, not compiled"):
        chain_executor(Case(model="cnn-stack", backend="jax", executor="compiled", steps=4))


def test_run_refuses_it_in_one_line_before_measuring(capsys, tmp_path):
    err = one_line_error(
        capsys,
        ["run", "--model", "transformer-stack", "--backend", "jax", "--executor", "compiled",
         "--steps", "4", "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert "layer chain" in err and "--executor engine" in err
    assert not (tmp_path / "r").exists()


def test_a_sweep_of_a_jax_chain_records_the_engine(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "c"\n[case]\nmodel = "mlp-stack"\nbackend = "jax"\nsteps = 6\n'
        "[[grid]]\nsnaps = [2, 3]\n"
    )
    config = load_config(path)
    assert [c.executor_used for c in config.cases] == ["engine", "engine"]


def test_the_command_line_does_not_load_the_workloads_package_to_start():
    code = (
        "import sys, ckptbench.cli.run, ckptbench.cli.plan; "
        "print('ckptbench.workloads' in sys.modules, 'autograd' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
