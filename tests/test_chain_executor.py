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


PLUGIN_CHAIN = """
import jax.numpy as jnp


class Chain:
    def init(self, layers, rng):
        widths = [4 + i for i in range(layers + 1)]
        params = [rng.standard_normal((widths[i], widths[i + 1])) / 3 for i in range(layers)]
        return params, rng.standard_normal((2, widths[0]))

    def layer(self, i, params, x):
        return jnp.tanh(x @ params)

    def loss(self, x):
        return jnp.mean(x**2)


def make(**sizes):
    return Chain()
"""


@pytest.fixture
def plugin_chain(tmp_path, monkeypatch):
    """``net.py:make``, a JAX layer chain, in the current folder (a temporary one)."""
    pytest.importorskip("jax")
    (tmp_path / "net.py").write_text(PLUGIN_CHAIN)
    monkeypatch.chdir(tmp_path)
    return "net.py:make"


@pytest.mark.jax
def test_a_plugin_chain_found_by_the_plugin_check_follows_the_same_rule(
    capsys, tmp_path, plugin_chain
):
    from ckptbench.measure.tasks import check_plugin

    case = Case(model="net.py:make", backend="jax", steps=4, snaps=2)
    checked, _ = check_plugin(case)  # in a disposable worker: it is a chain
    assert checked.executor == "engine"
    err = one_line_error(
        capsys,
        ["run", "--model", "net.py:make", "--backend", "jax", "--executor", "compiled",
         "--steps", "4", "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert "is a layer chain" in err and "--executor engine" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("model", "strategy", "backend", "says"),
    [
        ("mlp-stack", "torch-checkpoint", "torch", "checkpoints recurrences only"),
        ("cnn-stack", "jax-checkpoint", "jax", "checkpoints recurrences only"),
        ("transformer-stack", "equinox", "jax", "checkpoints recurrences only"),
        ("rnn", "torch-every-layer", "torch", "checkpoints layer chains only"),
        ("lstm", "checkpoint-sequential", "torch", "checkpoints layer chains only"),
        ("lstm", "jax-dots-saveable", "jax", "checkpoints layer chains only"),
    ],
)
def test_a_peer_given_the_other_kind_of_model_is_refused_before_measuring(
    capsys, tmp_path, model, strategy, backend, says
):
    """It was measured: baseline and plain gradient ran, then the checkpointed mode failed
    (exit 1) in its worker. Now one line and exit 2, naming what that model runs."""
    case = Case(model=model, strategy=strategy, backend=backend, steps=4, snaps=2)
    with pytest.raises(CaseError, match=says):
        chain_executor(case)
    err = one_line_error(
        capsys,
        ["run", "--model", model, "--strategy", strategy, "--backend", backend, "--steps", "4",
         "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert says in err and f"on {backend} a " in err
    assert not (tmp_path / "r").exists()
    other = "recurrence runs" if "chains only" in says else "chain runs"
    assert other in err and "revolve" in err


def test_a_sweep_cell_of_a_peer_and_the_other_kind_of_model_is_a_config_error(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        'name = "c"\n[case]\nbackend = "torch"\nsteps = 6\n'
        '[[grid]]\nmodel = ["lstm", "mlp-stack"]\nstrategy = ["torch-checkpoint"]\n'
    )
    with pytest.raises(ValueError, match="checkpoints recurrences only, and model mlp-stack"):
        load_config(path)
    path.write_text(
        'name = "c"\n[case]\nbackend = "torch"\nsteps = 6\n'
        '[[grid]]\nmodel = ["lstm"]\nstrategy = ["torch-checkpoint"]\n'
        '[[grid]]\nmodel = ["mlp-stack"]\nstrategy = ["torch-every-layer"]\n'
    )
    assert [c.strategy for c in load_config(path).cases] == ["torch-checkpoint",
                                                             "torch-every-layer"]  # fmt: skip


@pytest.mark.jax
def test_a_plugin_chain_with_a_recurrence_peer_is_refused_by_the_plugin_check(
    capsys, tmp_path, plugin_chain
):
    err = one_line_error(
        capsys,
        ["run", "--model", "net.py:make", "--backend", "jax", "--strategy", "jax-checkpoint",
         "--steps", "4", "--out", str(tmp_path / "r")],
    )  # fmt: skip
    assert "checkpoints recurrences only, and --model net.py:make is a layer chain" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.jax
def test_a_sweep_of_a_plugin_chain_follows_the_rules_its_check_found(
    capsys, tmp_path, plugin_chain
):
    """A sweep checked each plug-in once and dropped what the check found: a JAX chain's
    revolve cell ran the compiled executor and failed (exit 1), and a recurrence peer's cell
    failed in its worker. Now every cell follows the plug-in's kind, as a built-in's does."""
    from ckptbench.measure.tasks import check_plugins

    cases = [Case(model=plugin_chain, backend="jax", steps=4, snaps=2, strategy=s, hidden=h)
             for s in ("revolve", "jax-every-layer") for h in (8, 16)]  # fmt: skip
    checked = check_plugins([Case(model="lstm", steps=4), *cases])
    assert checked[0] == Case(model="lstm", steps=4)  # a built-in: as it was
    assert [c.executor for c in checked[1:]] == ["engine", "engine", None, None]
    assert [c.hidden for c in checked[1:]] == [8, 16, 8, 16]  # each size as given
    config = tmp_path / "c.toml"
    config.write_text(
        f'name = "c"\n[case]\nmodel = "{plugin_chain}"\nbackend = "jax"\nsteps = 4\n'
        'snaps = 2\n[[grid]]\nstrategy = ["revolve", "jax-checkpoint"]\n'
    )
    err = one_line_error(capsys, ["sweep", str(config), "--out", str(tmp_path / "r")])
    assert "jax-checkpoint checkpoints recurrences only, and model net.py:make" in err
    assert not (tmp_path / "r").exists()


def test_a_builtin_given_fewer_steps_than_it_is_built_with_is_refused_before_measuring(
    capsys, tmp_path
):
    """transformer-stack is an embedding and a head at least: --steps 1 ran all three
    modes, each failing in its worker (exit 1)."""
    from ckptbench.workloads import stacks
    from ckptbench.workloads.registry import builtin

    for name, cls in stacks.STACKS.items():  # the registry says what each stack says
        assert builtin(name).min_steps == cls.MIN_LAYERS
    assert builtin("transformer-stack").min_steps == 2
    with pytest.raises(CaseError, match="needs at least 2 layers"):
        chain_executor(Case(model="transformer-stack", steps=1))
    assert chain_executor(Case(model="transformer-stack", steps=2)).steps == 2
    err = one_line_error(
        capsys,
        ["run", "--model", "transformer-stack", "--steps", "1", "--out", str(tmp_path / "r")],
    )
    assert "--model transformer-stack needs at least 2 layers (--steps), got 1" in err
    assert not (tmp_path / "r").exists()
