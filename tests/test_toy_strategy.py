"""A new strategy is one spec and its stream: the toy of ``tests/toys/strategy.py``, registered
here and nowhere in ckptbench, runs through the contract test on autograd (gradients of
params, state and inputs; step counts against ``replay``; stored bytes against
``replay_bytes``) and through the registry as the worker sees it (Case validation, the
checkpointed mode against the normal mode)."""

from __future__ import annotations

import pytest
import test_contract as contract
from toys.strategy import FROM_START

from ckptbench.backends import registry
from ckptbench.results.schema import Case
from ckptbench.schedules import STRATEGIES, get_strategy, register, replay

GRID = [(1, 1), (2, 1), (7, 2), (12, 3)]


@pytest.fixture
def toy():
    register(FROM_START)
    yield FROM_START.name
    STRATEGIES.pop(FROM_START.name)


@pytest.mark.parametrize(("steps", "snaps"), GRID)
def test_the_toy_keeps_the_binding_contract(toy, steps, snaps):
    contract.test_snapshot_strategies_keep_the_contract(
        contract.AutogradHarness(), toy, steps, snaps
    )


@pytest.mark.parametrize(("steps", "snaps"), GRID)
def test_the_toy_runs_on_the_registered_backend(toy, steps, snaps):
    contract.test_registered_backends_agree_with_their_normal_mode("autograd", toy, steps, snaps)


def test_the_registry_answers_for_the_toy(toy):
    spec = get_strategy(toy)
    assert toy in registry.strategies("autograd")
    assert Case(strategy=toy, steps=12, snaps=3).strategy == toy
    stats = replay(spec.stream(12, 3), 12, 1)
    assert spec.step_counts(12, 3) == (stats.advances, stats.taped) == (66, 12)
    assert spec.estimated_advances(12, 3) == 66
    assert spec.closed_form.repetitions(12, 3) == stats.max_step_advances
    with pytest.raises(ValueError, match="already registered"):
        register(FROM_START.__class__(**{**FROM_START.__dict__, "marker": "+"}))


def test_the_toy_is_gone_after_its_test():
    assert FROM_START.name not in STRATEGIES


@pytest.mark.jax
def test_the_toy_registered_after_the_jax_backend_was_imported_runs_there(toy):
    pytest.importorskip("jax")
    from ckptbench.backends.jax import gradients  # imported before or after: asked on use

    assert toy in gradients.strategies() and toy in gradients.schedules()
    contract.test_registered_backends_agree_with_their_normal_mode("jax", toy, 7, 2)
