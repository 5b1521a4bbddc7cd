"""Tests for ckptbench.measure.lineprofile: the line profiler over an LSTM gradient."""

from __future__ import annotations

import pytest

from ckptbench.measure.lineprofile import profile_gradient, profile_job
from ckptbench.measure.tasks import TaskError, profile_lines
from ckptbench.results.schema import Case

SMALL = {"model": "lstm", "steps": 40, "snaps": 4, "hidden": 64, "batch": 8, "input": 16}


def _run_module(job: object) -> tuple[int, dict]:
    """``job`` profiled as the CLI profiles it: in a fresh worker (its ``profile`` task)."""
    try:
        return 0, profile_lines(Case(model="lstm", steps=4, hidden=4, batch=2), job)
    except TaskError as err:
        return 1, {"ok": False, "error": str(err)}


@pytest.mark.slow
def test_normal_mode_holds_the_tape_on_the_step_lines_and_checkpointing_holds_less():
    rc, normal = _run_module({**SMALL, "mode": "normal"})
    assert rc == 0 and normal["ok"]
    rc, ckpt = _run_module({**SMALL, "mode": "checkpointed"})
    assert rc == 0 and ckpt["ok"]

    step_rows = [r for r in normal["rows"] if r["function"] == "step"]
    assert step_rows and all(r["file"].endswith("lstm.py") for r in step_rows)
    # every taped step keeps its intermediates: the step's lines add memory, 40 times each
    assert sum(r["increment_mib"] for r in step_rows) > 0
    body = [r for r in step_rows if "anp.dot" in r["source"]]
    assert body and body[0]["occurrences"] == SMALL["steps"] and body[0]["increment_mib"] > 0
    # Revolve with 4 slots holds far less than the whole tape at its peak
    assert 0 < ckpt["peak_traced_mib"] < 0.6 * normal["peak_traced_mib"]
    # the executor's loops were profiled in checkpointed mode, and not in normal mode
    assert any(r["file"].endswith("autograd/binding.py") for r in ckpt["rows"])
    # our files one way, wherever they are: ckptbench/... (the engine's too, not absolute)
    ours = [r["file"] for r in ckpt["rows"] if "ckptbench" in r["file"]]
    assert ours and all(f.startswith("ckptbench/") for f in ours), ours
    assert any(f == "ckptbench/engine/interpreter.py" for f in ours)
    assert not any(r["file"].endswith("autograd/binding.py") for r in normal["rows"])


def test_step_runs_once_per_step_in_normal_mode_in_process():
    prof = profile_gradient(**{**SMALL, "steps": 10}, mode="normal")
    assert prof.mode == "normal" and prof.steps == 10
    counts = {r.occurrences for r in prof.rows if r.function == "step" and "anp.dot" in r.source}
    assert counts == {10}
    assert prof.function_increment_mib("step") > 0
    assert prof.peak_traced_mib >= prof.end_traced_mib


def test_bad_jobs_fail_in_the_worker_with_one_line():
    rc, doc = _run_module({**SMALL, "mode": "sideways"})
    assert rc == 1
    assert "unknown mode 'sideways'" in doc["error"]
    rc, doc = _run_module({"steps": 0})
    assert rc == 1 and "steps must be >= 1" in doc["error"]
    with pytest.raises(ValueError, match="unknown profile job key"):
        profile_job({"model": "lstm", "colour": "red"})


def test_a_stacks_profile_charges_its_layers_own_lines():
    """A layer chain has no ``step``: the profile listed only the adapter's call and the
    loss, never a convolution's or a dense layer's line."""
    sizes = {"hidden": 8, "batch": 2, "input": 4, "output": 1}
    prof = profile_gradient(model="cnn-stack", steps=4, snaps=2, mode="normal", **sizes)
    conv = [r for r in prof.rows if r.function == "conv" and r.file.endswith("stacks.py")]
    assert conv and sum(r.increment_mib for r in conv) > 0
    assert {r.occurrences for r in conv if "xp.einsum" in r.source} == {3}  # three convs
    prof = profile_gradient(model="mlp-stack", steps=6, snaps=2, mode="checkpointed", **sizes)
    assert any(r.function == "dense" for r in prof.rows)
    assert any(r.file.endswith("autograd/chain.py") for r in prof.rows)  # the chain executor
