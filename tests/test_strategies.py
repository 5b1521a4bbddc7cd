"""The strategy registry: one validity test for every schedule, and every list reads it."""

from __future__ import annotations

import pytest
from _imports import loaded_after_import
from click.testing import CliRunner

from ckptbench.backends import registry
from ckptbench.cli import cli
from ckptbench.results.schema import Case, CaseError
from ckptbench.schedules import (
    STRATEGIES,
    ScheduleError,
    Setting,
    get_strategy,
    make_schedule,
    optimal_forward_steps,
    replay,
    replay_bytes,
    strategy_names,
)
from ckptbench.sweep.config import load_config

STREAMS = [s for s in STRATEGIES.values() if s.stream is not None]
GRID = [(1, 1), (1, 5), (2, 1), (2, 2), (3, 2), (7, 3), (10, 10), (12, 40), (50, 4), (101, 7)]


@pytest.mark.parametrize("spec", STREAMS, ids=lambda s: s.name)
@pytest.mark.parametrize(("steps", "snaps"), GRID)
def test_every_stream_replays_and_its_counts_are_what_it_does(spec, steps, snaps):
    """Each stream is valid against the simulated store; the registry's step counts (closed
    form or replay) equal what the replay counts; no stream beats the binomial optimum and
    none holds more slots than it may use."""
    s = spec.effective_snaps(steps, snaps)
    stats = replay(spec.stream(steps, snaps), steps, s)
    assert spec.step_counts(steps, snaps) == (stats.advances, stats.taped)
    assert stats.taped == steps
    assert stats.advances >= optimal_forward_steps(steps, s)
    assert spec.optimum_advances(steps, snaps) == optimal_forward_steps(steps, s)
    assert spec.estimated_advances(steps, snaps) == stats.advances
    assert stats.peak_snapshots <= s
    bytes_ = replay_bytes(spec.stream(steps, snaps), steps, 8, 100)
    assert bytes_.peak_bytes == stats.peak_snapshots * 8 + 100


def test_a_stream_that_cheats_is_caught():
    broken = list(make_schedule("revolve", 20, 4))
    broken.remove(next(a for a in broken if a.kind.name == "YOUTURN"))
    with pytest.raises(ScheduleError):
        replay(broken, 20, 4)


def test_registry_properties():
    assert get_strategy("revolve").advances(1000, 31) == 2439
    assert get_strategy("optimal").setting is Setting.BUDGET
    assert get_strategy("optimal").step_counts(100, 5, {"advances": 150}) == (150, 100)
    assert get_strategy("optimal").step_counts(100, 5, {}) is None
    for peer in ("torch-checkpoint", "jax-checkpoint", "equinox"):
        spec = get_strategy(peer)
        assert not spec.ours
        assert spec.step_counts(100, 5) is None
        assert spec.optimum_advances(100, 5) is None
        with pytest.raises(ValueError, match="framework's own"):
            make_schedule(peer, 10, 3)
    with pytest.raises(ValueError, match="unknown strategy 'magic'"):
        get_strategy("magic")
    assert registry.strategies("torch") == (
        "revolve", "uniform", "store-all", "optimal", "torch-checkpoint",
        "checkpoint-sequential", "torch-every-layer", "torch-selective",
    )  # fmt: skip
    assert set(strategy_names(ours=False)) == {
        "torch-checkpoint", "jax-checkpoint", "equinox", "checkpoint-sequential",
        "torch-every-layer", "torch-selective", "jax-every-layer", "jax-dots-saveable",
    }  # fmt: skip
    markers = [s.marker for s in STRATEGIES.values()]
    assert len(set(markers)) == len(markers)


def test_a_strategy_answers_for_itself():
    """What callers used to decide by name is a property of the spec."""
    spec = {s.name: s for s in STRATEGIES.values()}
    assert [n for n, s in spec.items() if not s.uses_snaps] == [
        "store-all", "optimal", "torch-every-layer", "torch-selective", "jax-every-layer",
        "jax-dots-saveable",
    ]  # fmt: skip
    assert [n for n, s in spec.items() if s.closed_form] == ["revolve", "store-all"]
    assert [n for n, s in spec.items() if s.fits_budget] == ["revolve", "uniform", "optimal"]
    assert [n for n, s in spec.items() if s.reference] == ["revolve"]
    assert [n for n, s in spec.items() if s.planned] == ["optimal"]
    assert {n: s.backend for n, s in spec.items() if not s.ours} == {
        "torch-checkpoint": "torch", "jax-checkpoint": "jax", "equinox": "jax",
        "checkpoint-sequential": "torch", "torch-every-layer": "torch",
        "torch-selective": "torch", "jax-every-layer": "jax", "jax-dots-saveable": "jax",
    }  # fmt: skip
    form = spec["store-all"].closed_form
    assert (form.advances(10, 10), form.peak(10, 10), form.repetitions(10, 10)) == (9, 9, 1)
    form = spec["revolve"].closed_form
    assert (form.advances(1000, 31), form.peak(1000, 31), form.repetitions(1000, 31)) == (
        2439, 31, 3
    )  # fmt: skip
    labels = [(s.setting.point_label(v), s.setting.clamp) for s, v in (
        (spec["revolve"], 5), (spec["torch-checkpoint"], 4), (spec["equinox"], 3),
        (spec["optimal"], 3 * 2**19),
    )]  # fmt: skip
    assert [p for p, _ in labels] == ["s=5", "4 seg", "3 ckpt", "1.5 MiB"]
    assert spec["optimal"].setting.point_label(3072) == "3 KiB"  # not '0.00292969 MiB'
    assert labels[1][1] == "at most one segment per step"
    assert spec["equinox"].setting.describe(spec["equinox"], "4") == (
        "equinox checkpointed loop, 4 checkpoints"
    )


def test_a_peer_is_declared_once_with_a_factory_its_backend_resolves():
    for peer in (s for s in STRATEGIES.values() if not s.ours):
        factories = [f for f in (peer.factory, peer.chain_factory) if f is not None]
        assert factories  # one for recurrences, one for layer chains, or both
        for factory in factories:
            module, _, function = factory.partition(":")
            assert module.startswith(f"ckptbench.backends.{peer.backend}.") and function
        assert peer.runs_on(registry.spec(peer.backend))
        assert not any(
            peer.runs_on(b) for b in registry.BACKENDS.values() if b.name != peer.backend
        )
    streams_off = registry.BackendSpec(name="x", module="x", runs_streams=False)
    assert strategy_names(streams_off) == []
    assert strategy_names(registry.spec("torch")) == list(registry.strategies("torch"))
    with pytest.raises(ValueError, match="unknown backend 'x'"):
        registry.strategies("x")


def test_case_validation_reads_the_registry():
    with pytest.raises(CaseError, match="needs --backend torch"):
        Case(strategy="torch-checkpoint")
    with pytest.raises(CaseError, match="needs --backend jax"):
        Case(strategy="equinox", backend="torch")
    with pytest.raises(CaseError, match="needs a byte budget"):
        Case(strategy="optimal")
    with pytest.raises(CaseError, match="unknown strategy"):
        Case(strategy="magic")
    assert Case(strategy="torch-checkpoint", backend="torch").strategy == "torch-checkpoint"


def test_cli_choices_are_the_registry():
    runner = CliRunner()
    for command, names in (
        ("run", strategy_names()),
        ("schedule", [s.name for s in STREAMS]),
        ("profile", [s.name for s in STREAMS]),
    ):
        out = runner.invoke(cli, [command, "--help"], terminal_width=400).output
        assert "[" + "|".join(names) + "]" in out, command


def test_config_strategy_companions_come_from_the_registry(tmp_path):
    cfg = tmp_path / "peer.toml"
    cfg.write_text(
        'name = "peer"\n[case]\nsteps = 10\nbackend = "torch"\n'
        '[[grid]]\nstrategy = ["revolve", "torch-checkpoint"]\nsnaps = [2, 3]\n'
    )
    config = load_config(cfg)
    assert {c.strategy for c in config.cases} == {"revolve", "torch-checkpoint"}


def test_the_registry_loads_no_numpy():
    """The CLI's choices read the registry; the planner's numpy loads only to solve a plan."""
    assert loaded_after_import("ckptbench.schedules", ("numpy",)) == []
