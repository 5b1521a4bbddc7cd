"""The GPU check's probe (``scripts/torch_backward_calls.py``) run small on the CPU: its
timings only mean something on the device, but its four reverse sweeps must compute one
gradient, or the times it reports compare different work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parent.parent


def test_the_backward_calls_probe_computes_one_gradient_four_ways() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "torch_backward_calls.py"), "--device", "cpu",
         "--hidden", "4", "--batch", "2", "--steps", "30", "--repeats", "1"],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    row = json.loads(out.stdout.strip().splitlines()[-1])
    assert row["grad_max_abs"] > 0  # a gradient that is all zeros would agree trivially
    assert row["max_rel_diff"] < 1e-5
    for name in ("one_call_s", "call_per_step_reentrant_s", "one_call_recomputing_s"):
        assert row[name] > 0
    assert {"per_call_reentrant_overhead_us", "per_step_recomputing_overhead_us"} <= set(row)
