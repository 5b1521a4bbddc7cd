"""The runner against real workers: the trim+reset protocol sees workload changes."""

from __future__ import annotations

import pytest
from _imports import loaded_after_import

from ckptbench.measure.runner import run_case
from ckptbench.results.schema import Case, Mode


def test_twenty_percent_larger_workload_shows_as_twenty_percent_more_overhead():
    """Normal mode's tape grows linearly with steps: 180 vs 150 steps is +20% overhead,
    measured with warm-up on, in fresh processes (docs/architecture.md: trim + VmHWM reset)."""
    base = Case(
        model="lstm", steps=150, snaps=5, hidden=128, batch=16, input=16, repeats=2, rounds=2
    )
    modes = (Mode.BASELINE, Mode.NORMAL)
    small = run_case(base, modes=modes)
    large = run_case(base.with_(steps=180), modes=modes)
    assert small.ok and large.ok
    ratio = (
        large.summary.mode(Mode.NORMAL).overhead_bytes
        / small.summary.mode(Mode.NORMAL).overhead_bytes
    )
    assert ratio == pytest.approx(1.2, abs=0.04)
    # the exact peaks of repeated iterations agree (warm-up did not hide anything)
    for res in (small, large):
        peaks = [i.peak_rss_bytes for i in res.mode(Mode.NORMAL).iterations]
        assert max(peaks) - min(peaks) < 2 * 2**20
        assert res.mode(Mode.NORMAL).sampled_peak_rss_bytes <= max(peaks) + 2**20


def test_worker_imports_stay_minimal():
    """The measured process must not pull in the reporting stack (docs/architecture.md)."""
    reporting = ("pandas", "rich", "click", "matplotlib", "scipy")
    assert loaded_after_import("ckptbench.measure.worker", reporting) == []
