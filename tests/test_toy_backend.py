"""A new backend is one spec and one module: the toy of ``tests/toys/backend.py``, registered
here and nowhere in ckptbench, runs every strategy of ours through the registry-level
contract test (checkpointed gradients against the normal mode's, step counts against
``replay``, an optimal plan from costs measured on the toy itself, stored bytes equal to the
plan's) and is accepted by Case validation; a backend that runs no stream of ours is offered
none of them."""

from __future__ import annotations

import pytest
import test_contract as contract
from toys.backend import PEERS_ONLY, SPEC

from ckptbench.backends import registry
from ckptbench.results.schema import Case, CaseError
from ckptbench.schedules import STRATEGIES, strategy_names


@pytest.fixture
def toy():
    registry.register(SPEC)
    registry.register(PEERS_ONLY)
    yield SPEC.name
    registry.BACKENDS.pop(SPEC.name)
    registry.BACKENDS.pop(PEERS_ONLY.name)


@pytest.mark.parametrize(
    ("strategy", "steps", "snaps"),
    [("revolve", 1, 1), ("revolve", 30, 4), ("uniform", 30, 5), ("store-all", 8, 8)],
)
def test_the_toy_keeps_the_registry_contract(toy, strategy, steps, snaps):
    contract.test_registered_backends_agree_with_their_normal_mode(toy, strategy, steps, snaps)


def test_the_toy_runs_plans_from_its_own_costs(toy):
    contract.test_registered_backends_run_optimal_plans_from_their_own_costs(toy)


def test_the_registry_answers_for_the_toy(toy):
    ours = [name for name, spec in STRATEGIES.items() if spec.ours]
    assert list(registry.strategies(toy)) == ours
    assert Case(backend=toy, strategy="revolve", steps=10, snaps=3).backend == toy
    assert "-toy-cpu-" in Case(backend=toy, steps=10, snaps=3).key
    assert registry.strategies(PEERS_ONLY.name) == ()
    with pytest.raises(CaseError, match="revolve"):
        Case(backend=PEERS_ONLY.name, strategy="revolve", steps=10, snaps=3)
    with pytest.raises(CaseError, match="device"):
        Case(backend=toy, device="cuda", steps=10, snaps=3)
    assert set(strategy_names(registry.spec(toy))) == set(ours)


def test_the_toy_is_gone_after_its_test():
    assert SPEC.name not in registry.BACKENDS


def test_every_backend_folder_is_found_without_a_list():
    """The built-in backends are the folders' own specs (no hand-kept registration)."""
    import importlib
    import pkgutil

    import ckptbench.backends as package

    folders = {i.name for i in pkgutil.iter_modules(package.__path__) if i.ispkg}
    declared = {importlib.import_module(f"ckptbench.backends.{name}").SPEC.name for name in folders}
    assert {spec.name for spec in registry.discover()} == declared
    assert {"autograd", "torch", "jax"} <= declared
