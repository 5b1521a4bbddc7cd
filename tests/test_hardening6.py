"""Session of 2026-11-28 (after GPU run 8): the house's loose ends, each with a test that
fails on the code before it."""

from __future__ import annotations

import importlib.metadata

import pytest

from ckptbench.backends import registry
from ckptbench.measure.peaks import framework_versions
from ckptbench.sweep import cluster


def test_every_backends_packages_come_from_its_spec():
    """The cluster probe, the result's versions and the registry named the frameworks in
    three lists of their own; a new backend folder had to edit all three."""
    specs = registry.discover()
    for s in specs:
        for name in (*s.requires, *s.distributions):
            assert name in cluster.PACKAGES, (s.name, name)
    assert cluster.PACKAGES[0] == "numpy" and len(set(cluster.PACKAGES)) == len(cluster.PACKAGES)
    assert registry.spec("jax").distributions == ("jax", "jaxlib", "equinox")
    got = framework_versions(("autograd", "no-such-distribution-ckptbench"))
    assert got == {
        "autograd_version": importlib.metadata.version("autograd"),
        "no-such-distribution-ckptbench_version": None,
    }


def test_a_narrow_columns_is_the_narrowest_layout_not_the_widest(monkeypatch):
    """COLUMNS=10 laid tables out 120 wide (a width under 20 was ignored)."""
    from ckptbench.render.console import PLAIN_WIDTH, plain_width

    for given, want in [("10", 20), ("20", 20), ("77", 77), ("99999", 10_000),
                        ("0", PLAIN_WIDTH), ("wide", PLAIN_WIDTH), ("", PLAIN_WIDTH)]:  # fmt: skip
        monkeypatch.setenv("COLUMNS", given)
        assert plain_width() == want, given


def _oom_error(limit: int, rss: int, ready: bool) -> str:
    from ckptbench.measure.follow import ModeEvents, Stopped, mode_outcome
    from ckptbench.results.schema import Case, Mode

    case = Case(steps=6, memory_limit_bytes=limit)
    events = ModeEvents(case, Mode.NORMAL, 0, None, 0.0)
    if ready:
        events.handle({"event": "ready", "planned": 2})
    stopped = Stopped(True, rss, False, -9, "")
    result, _ = mode_outcome(case, events, stopped, {"mode": Mode.NORMAL, "round": 0})
    return result.error


def test_an_out_of_memory_says_whether_the_worker_had_started_and_tells_rss_from_limit():
    """'RSS 10.0 MiB exceeded the memory limit of 10.0 MiB' (rounded alike), and no word
    that the worker was killed while the interpreter and the framework were loading."""
    mib = 2**20
    err = _oom_error(10 * mib, 10 * mib + 4096, ready=False)
    assert f"RSS {10 * mib + 4096:,} B exceeded the memory limit of {10 * mib:,} B" in err
    assert "stopped while starting, before its first iteration;" in err
    err = _oom_error(10 * mib, 12 * mib, ready=True)
    assert "RSS 12.0 MiB exceeded the memory limit of 10.0 MiB; the worker was stopped;" in err


def test_rounds_stop_once_every_mode_is_over_the_memory_limit(tmp_path, monkeypatch):
    """Every mode over --memory-limit in round 1 and skipped afterwards: the run went on
    through all its planned rounds, measuring nothing, and said "--precision not reached
    ... after 6 rounds, stopped by no slowdown". The fake worker's iterations report exact
    peaks of 50 MiB and more, over a limit its start stays below (a limit no worker starts
    under stops the run at the first: tests/test_hardening14_newcomer.py)."""
    import json
    import sys
    from pathlib import Path

    from click.testing import CliRunner

    from ckptbench.cli import cli

    fake = [sys.executable, str(Path(__file__).parent / "fake_worker.py")]
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: fake)
    for var in ("FAKE_ALLOC", "FAKE_SCALE", "FAKE_SLEEP"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(cli, ["run", "--steps", "6", "--hidden", "4", "--batch", "2",
                                   "--repeats", "1", "--warmup", "0", "--rounds", "3",
                                   "--precision", "5%", "--memory-limit", "49MiB",
                                   "--out", str(out)])  # fmt: skip
    assert res.exit_code == 1, res.output
    doc = json.loads(out.read_text())
    assert len(doc["modes"]) == 3 and {m["round"] for m in doc["modes"]} == {0}
    assert all(m["status"] == "out-of-memory" for m in doc["modes"])
    prec = doc["environment"]["precision"]
    assert prec["stopped"] == "out-of-memory" and prec["rounds"] == 1
    assert "after 1 round, stopped by every mode exceeding --memory-limit" in res.output


def test_the_one_welch_interval_agrees_with_scipys_welch_test():
    """The Welch-Satterthwaite interval was written twice (memory noise, compare's time
    lines); the one left must agree with scipy's own Welch t test."""
    import statistics

    import numpy as np
    from scipy import stats

    from ckptbench.analysis.intervals import welch_half_width

    rng = np.random.default_rng(7)
    a, b = rng.normal(1.0, 0.3, 5), rng.normal(1.4, 0.05, 9)
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    parts = [(statistics.variance(x) / len(x), len(x) - 1) for x in (a, b)]
    assert welch_half_width(parts, 0.95) == pytest.approx((ci.high - ci.low) / 2, rel=1e-9)
    assert welch_half_width([(0.0, 3), (0.0, 4)], 0.95) == 0.0


def test_plan_lists_the_optimal_plans_actions_with_what_each_keeps_stored(tmp_path):
    """`schedule --actions` listed Revolve's actions; the optimal plan's could not be seen
    without running it under --trace."""
    import json

    from click.testing import CliRunner

    from ckptbench.cli import cli
    from ckptbench.schedules import replay_bytes
    from ckptbench.schedules.optimal import Costs, plan_optimal

    doc = {"forward_time_s": 0.0004, "taped_time_s": 0.0026, "state_bytes": 65536,
           "tape_bytes": 450000}  # fmt: skip
    costs_file = tmp_path / "costs.json"
    costs_file.write_text(json.dumps(doc))
    argv = ["plan", "--steps", "40", "--budget", "2MiB", "--costs", str(costs_file)]
    res = CliRunner().invoke(cli, [*argv, "--actions", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)["actions"]
    plan = plan_optimal(Costs.from_dict(doc), 40, 2 * 2**20)
    assert [a["action"] for a in listed] == [repr(a) for a in plan.action_list]
    assert [a["index"] for a in listed] == list(range(len(plan.action_list)))
    stored = replay_bytes(plan.action_list, 40, 65536, 450000, per_action=True).action_bytes
    assert [a["stored_bytes"] for a in listed] == list(stored)
    assert max(stored) == plan.peak_bytes <= 2 * 2**20
    text = CliRunner().invoke(cli, [*argv, "--actions"]).output
    assert f"the optimal plan's {len(listed)} actions within 2.00 MiB" in text
    assert "TERMINATE" in text and "actions" not in CliRunner().invoke(cli, argv).output


def test_a_dask_result_that_does_not_read_back_is_kept_not_dropped(tmp_path):
    """A worker's finished cell whose document failed to parse was reported as an error
    and its measurement dropped."""
    import json

    from ckptbench.results.schema import Case
    from ckptbench.sweep.cells import CellOutcome, CellState
    from ckptbench.sweep.dask import _collect
    from ckptbench.sweep.saving import keep_unreadable

    class Future:
        def result(self):
            return {"result": {"schema_version": 999, "modes": ["measured"]}, "worker": "w"}

    class Cluster:
        def host(self, worker):
            return "h"

    calls = []
    case = Case(steps=4)
    _collect(Future(), 0, case, "w", 1.0, Cluster(), {}, lambda *a, **k: calls.append((a, k)))
    ((args, kwargs),) = calls
    assert args[1] is None and "schema_version 999" in args[2]
    assert kwargs["raw"] == {"schema_version": 999, "modes": ["measured"]}
    pending = CellOutcome(case, tmp_path / "cell.json", CellState.RUNNING)
    first = keep_unreadable(pending, kwargs["raw"])
    second = keep_unreadable(pending, kwargs["raw"])
    kept = sorted(tmp_path.glob("cell.json.*.unreadable"))
    assert len(kept) == 2 and first != second  # a second never replaces the first
    assert all(json.loads(p.read_text()) == kwargs["raw"] for p in kept)
    assert first == f"what it returned is kept in {kept[0].name}"
