"""Tests for ckptbench.sweep.config: grid expansion, canonical cells, one-line errors with lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckptbench.results.schema import Case
from ckptbench.schedules import STRATEGIES, get_strategy, optimal_forward_steps
from ckptbench.sweep.config import ConfigError, Expect, load_config, parse_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

GOOD = """
name = "demo"
[case]
model = "rnn"
steps = 100
hidden = 8

[grid]
strategy = ["revolve", "uniform"]
snaps = [4, 10]

[expect]
memory_savings_min = 2
forward_steps_exact = true
[expect.uniform]
memory_savings_min = 1.5
"""


def _error(text: str, tmp_path: Path) -> str:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(str(path))
    return msg


def test_grid_expands_in_a_stable_order_first_axis_outermost() -> None:
    config = parse_config(GOOD)
    assert config.name == "demo"
    assert [(c.strategy, c.snaps) for c in config.cases] == [
        ("revolve", 4),
        ("revolve", 10),
        ("uniform", 4),
        ("uniform", 10),
    ]
    assert all(c.model == "rnn" and c.steps == 100 and c.hidden == 8 for c in config.cases)
    assert config.axes == ("strategy", "snaps")
    assert parse_config(GOOD).cases == config.cases  # deterministic


def test_expectations_with_per_strategy_override() -> None:
    config = parse_config(GOOD)
    revolve, uniform = config.cases[0], config.cases[2]
    assert config.expect_for(revolve) == Expect(memory_savings_min=2.0, forward_steps_exact=True)
    assert config.expect_for(uniform) == Expect(memory_savings_min=1.5, forward_steps_exact=True)


def test_store_all_ignores_snaps_and_runs_once() -> None:
    config = parse_config(
        """
        [case]
        steps = 50
        [grid]
        strategy = ["revolve", "store-all"]
        snaps = [4, 8, 16]
        """
    )
    store_all = [c for c in config.cases if c.strategy == "store-all"]
    assert len(config.cases) == 4
    assert len(store_all) == 1 and store_all[0].snaps == 50
    assert any("duplicate" in n for n in config.notes)
    # with snaps = steps the binomial optimum is the first sweep only, as store-all does
    assert optimal_forward_steps(50, store_all[0].snaps) == 49


def _snaps_notes(strategies: str, model: str = "rnn", backend: str = "autograd") -> list[str]:
    config = parse_config(
        f'[case]\nmodel = "{model}"\nbackend = "{backend}"\nsteps = 10\n'
        f"[grid]\nstrategy = [{strategies}]\nsnaps = [2, 12]\n"
    )
    return [n for n in config.notes if "snaps" in n]


def test_the_snaps_note_names_the_strategies_of_the_grid_that_do_not_use_snaps() -> None:
    """The note said 'snaps clamped, or not used (store-all, optimal)' whatever the grid
    held: torch-every-layer's cells were recorded with snaps = steps under a note naming two
    strategies the grid did not have. It names the grid's own, read from the registry."""
    ignoring = {s for s in STRATEGIES if not get_strategy(s).uses_snaps}
    assert {"store-all", "optimal", "torch-every-layer"} <= ignoring
    # store-all: snaps 2 and 12 both recorded as 10; revolve: 12 clamped to 10
    assert _snaps_notes('"revolve", "store-all"') == [
        "snaps not used by store-all: 2 grid cell(s) recorded with snaps = steps",
        "snaps above the steps clamped: 1 grid cell(s) recorded with snaps = steps",
    ]
    # a peer's config is read without its framework: no torch needed here
    notes = _snaps_notes('"revolve", "torch-every-layer"', "mlp-stack", "torch")
    assert (
        notes[0]
        == "snaps not used by torch-every-layer: 2 grid cell(s) recorded with snaps = steps"
    )
    assert not any(name in " ".join(notes) for name in ("store-all", "optimal"))
    assert _snaps_notes('"revolve", "uniform"') == [
        "snaps above the steps clamped: 2 grid cell(s) recorded with snaps = steps"
    ]


def test_array_of_subgrids_concatenates_in_file_order() -> None:
    config = parse_config(
        """
        [case]
        model = "rnn"
        [[grid]]
        steps = [100]
        snaps = [10]
        [[grid]]
        steps = [1000, 10000]
        snaps = [32]
        """
    )
    assert [(c.steps, c.snaps) for c in config.cases] == [(100, 10), (1000, 32), (10000, 32)]


@pytest.mark.parametrize("name", ["lstm", "rnn", "ci", "layers"])
def test_shipped_configs_parse(name: str) -> None:
    config = load_config(CONFIGS / f"{name}.toml")
    assert config.name == name
    keys = [c.key for c in config.cases]
    assert len(keys) == len(set(keys))
    for case in config.cases:
        assert isinstance(case, Case)


def test_shipped_lstm_grid_is_the_headline_study() -> None:
    config = load_config(CONFIGS / "lstm.toml")
    cells = {(c.strategy, c.snaps) for c in config.cases}
    snaps = {4, 8, 16, 31, 64, 128}
    assert cells == {("revolve", s) for s in snaps} | {("uniform", s) for s in snaps} | {
        ("store-all", 1000)
    }
    assert {c.steps for c in config.cases} == {1000}


def test_shipped_layers_config_puts_every_stack_peer_beside_five_budgets() -> None:
    """configs/layers.toml: per stack, optimal at five budgets, Revolve, and every torch
    peer that checkpoints chains."""
    from ckptbench.backends import registry
    from ckptbench.schedules import get_strategy, strategy_names

    config = load_config(CONFIGS / "layers.toml")
    torch_peers = strategy_names(registry.spec("torch"), ours=False)
    peers = {n for n in torch_peers if get_strategy(n).runs_chains}
    for model in ("mlp-stack", "cnn-stack", "transformer-stack"):
        cells = [c for c in config.cases if c.model == model]
        assert len({c.budget_bytes for c in cells if c.budget_bytes is not None}) == 5
        assert {c.strategy for c in cells} == {"optimal", "revolve"} | peers
        assert {c.backend for c in cells} == {"torch"}


def test_shipped_ci_config_is_small_and_has_expectations() -> None:
    config = load_config(CONFIGS / "ci.toml")
    assert len(config.cases) <= 4
    assert all(c.steps <= 400 and c.hidden <= 128 and c.repeats >= 3 for c in config.cases)
    assert config.expect.memory_savings_min is not None
    assert config.expect.forward_steps_exact


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    msg = _error("[case]\nsteps = = 3\n", tmp_path)
    assert "invalid TOML" in msg and "line 2" in msg


def test_unknown_case_key_names_key_and_line(tmp_path: Path) -> None:
    msg = _error("[case]\nsteps = 10\nsnapz = 4\n[grid]\nsnaps = [2]\n", tmp_path)
    assert "bad.toml:3:" in msg and "case.snapz" in msg and "unknown" in msg
    assert "did you mean snaps?" in msg  # the nearest name, as click's options say it


def test_unknown_grid_key_in_second_subgrid(tmp_path: Path) -> None:
    text = "[[grid]]\nsnaps = [2]\n[[grid]]\nsnaps = [3]\nstrategyy = ['revolve']\n"
    msg = _error(text, tmp_path)
    assert "bad.toml:5:" in msg and "grid.strategyy" in msg and "did you mean strategy?" in msg


def test_unknown_top_level_and_expect_keys(tmp_path: Path) -> None:
    msg = _error("nmae = 'x'\n[grid]\nsnaps = [2]\n", tmp_path)
    assert "bad.toml:1:" in msg and "nmae" in msg and "did you mean name?" in msg
    msg = _error("[grid]\nsnaps = [2]\n[expect]\nslowdown = 2\n", tmp_path)
    assert "bad.toml:4:" in msg and "expect.slowdown" in msg
    assert "did you mean slowdown_max?" in msg
    msg = _error("[grid]\nzzz = [2]\n", tmp_path)  # nothing near: no guess
    assert "unknown case key (known: model," in msg


def test_bad_values_are_reported_through_case_validation(tmp_path: Path) -> None:
    msg = _error("[case]\nsteps = 0\n[grid]\nsnaps = [2]\n", tmp_path)
    assert "bad.toml:2:" in msg and "steps must be >= 1" in msg
    msg = _error("[grid]\nstrategy = ['revolve', 'magic']\n", tmp_path)
    assert "bad.toml:2:" in msg and "unknown strategy 'magic'" in msg
    msg = _error("[grid]\nsnaps = [2]\n[expect]\nslowdown_max = -1\n", tmp_path)
    assert "positive number" in msg
    msg = _error("[grid]\nsnaps = 4\n", tmp_path)
    assert "must be a list" in msg


def test_an_axis_without_values_is_an_error(tmp_path: Path) -> None:
    # a config without [grid], or with an empty one, is one cell (tests/test_hardening14_*)
    msg = _error("[grid]\nsnaps = []\n", tmp_path)
    assert "empty grid" in msg


def test_cells_with_one_key_but_different_settings_are_an_error(tmp_path: Path) -> None:
    msg = _error("[grid]\nsnaps = [4]\nrepeats = [3, 5]\n", tmp_path)
    assert "share the result name" in msg and "repeats 3 vs 5" in msg


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file or folder"):
        load_config(tmp_path / "nope.toml")


def test_grid_axes_that_need_each_other_are_checked_as_cells(tmp_path):
    from ckptbench.sweep.config import load_config

    cfg = load_config(Path(__file__).parent.parent / "configs" / "budget.toml")
    optimal = [c for c in cfg.cases if c.strategy == "optimal"]
    assert len(optimal) == 8 and all(c.budget_bytes for c in optimal)
    assert all(c.budget_bytes is None for c in cfg.cases if c.strategy != "optimal")
    cfg = load_config(Path(__file__).parent.parent / "configs" / "torch.toml")
    assert {c.strategy for c in cfg.cases} == {"revolve", "torch-checkpoint"}
    bad = tmp_path / "bad.toml"
    bad.write_text("[case]\nstrategy = 'optimal'\n[[grid]]\nsnaps = [3]\n")
    with pytest.raises(ValueError, match="budget"):
        load_config(bad)


def test_sizes_and_durations_read_as_on_the_command_line(tmp_path: Path) -> None:
    """'8MiB' and '10m' in a config mean what --budget 8MiB and --timeout 10m mean (the
    options' parsers); numbers stay numbers; a bad size is one line naming its key."""
    from ckptbench.cli.values import parse_bytes, parse_seconds

    config = parse_config(
        "[case]\nmodel = 'rnn'\nsteps = 20\nhidden = 8\ntimeout_s = '10m'\n"
        "sample_interval_s = '5ms'\n"
        "[[grid]]\nstrategy = ['optimal']\nbudget_bytes = ['8KiB', 16384, '1.5MiB']\n"
        "[[grid]]\nstrategy = ['revolve']\nsnaps = [4]\nmemory_limit_bytes = ['2GB']\n"
    )
    budgets = [c.budget_bytes for c in config.cases if c.strategy == "optimal"]
    assert budgets == [parse_bytes("8KiB"), 16384, parse_bytes("1.5MiB")] == [8192, 16384, 1572864]
    assert {c.timeout_s for c in config.cases} == {parse_seconds("10m")} == {600.0}
    assert {c.sample_interval_s for c in config.cases} == {0.005}
    assert [c.memory_limit_bytes for c in config.cases if c.strategy == "revolve"] == [2 * 10**9]
    assert config.base["timeout_s"] == 600.0  # the parsed value, not the text
    msg = _error("[grid]\nstrategy = ['optimal']\nbudget_bytes = ['8 parsecs']\n", tmp_path)
    assert "bad.toml:3: grid.budget_bytes: '8 parsecs' is not a size like 2GiB" in msg
    msg = _error("[case]\ntimeout_s = '0s'\n[grid]\nsnaps = [2]\n", tmp_path)
    assert "bad.toml:2: case.timeout_s: '0s' must be positive" in msg
    msg = _error("[grid]\nsnaps = ['4']\n", tmp_path)  # only sizes and durations are text
    assert "bad.toml:2:" in msg
