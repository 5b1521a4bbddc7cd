"""Every mode's code touched before the measured window (``ckptbench.measure.priming``).

A torch worker's first gradient maps in the part of ``libtorch_cpu.so`` its mode runs: 6 MiB
in the baseline, 9 MiB in normal mode, 12 MiB under ``checkpoint_sequential`` on an 8-layer
mlp-stack of width 8 (torch 2.13 CPU). Those pages stayed resident, so a peer's overhead on a
tiny chain read +6.0 MiB against normal's +2.8 MiB where its gradient added KiB. The worker
now runs a miniature of the case in every mode before it reports ``ready``: no code page is
first touched after that, in any mode.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from ckptbench.backends import registry
from ckptbench.results.modes import MODES
from ckptbench.results.schema import Case
from ckptbench.schedules import get_strategy


@pytest.fixture
def priming():
    from ckptbench.measure import priming  # here: the worker's test below runs on any version

    return priming


def _case(**kw) -> Case:
    base = dict(model="mlp-stack", backend="torch", steps=24, snaps=5, hidden=128, batch=64,
                input=32, output=16, strategy="checkpoint-sequential")  # fmt: skip
    return Case(**{**base, **kw})


def test_miniature_keeps_the_case_and_shrinks_its_sizes(priming):
    case = _case(dtype="float32", seed=5, threads=2)
    mini = priming.miniature(case)
    for name, most in priming.MINIATURE.items():
        assert getattr(mini, name) == min(getattr(case, name), most)
    for name in ("model", "backend", "device", "dtype", "strategy", "seed", "threads"):
        assert getattr(mini, name) == getattr(case, name)
    small = _case(steps=3, snaps=1, hidden=4, batch=1, input=2, output=1)
    assert dataclasses.astuple(priming.miniature(small)) == dataclasses.astuple(small)


def test_a_planned_strategy_is_primed_with_one_of_ours_that_needs_no_costs(priming):
    mini = priming.miniature(_case(strategy="optimal", budget_bytes=2**24, executor="one-call",
                                   model="lstm"))  # fmt: skip
    spec = get_strategy(mini.strategy)
    assert spec.ours and not spec.planned and mini.budget_bytes is None
    assert mini.executor == "one-call"


def test_a_plugin_is_not_primed(monkeypatch, priming):
    monkeypatch.setattr(registry, "build", _refused)
    case = _case(model="my_models.py:Net")
    assert priming.miniature(case) is None and priming.prime(case) is False


def _refused(*args, **kw):
    raise AssertionError("nothing may be built")


def test_a_backend_that_does_not_ask_is_not_primed(monkeypatch, priming):
    monkeypatch.setattr(registry, "build", _refused)
    assert not registry.spec("autograd").primes_modes
    assert priming.prime(_case(backend="autograd", model="lstm", strategy="revolve")) is False


def test_prime_runs_the_miniature_once_in_every_mode(monkeypatch, priming):
    ran = []

    class Built:
        params = "p"

        def __init__(self, case, mode):
            self.case, self.mode = case, mode

        def gradient(self, params):
            ran.append((self.case, self.mode, params))

    monkeypatch.setattr(registry, "build", lambda case, mode, costs: Built(case, mode))
    case = _case()
    assert registry.spec("torch").primes_modes and priming.prime(case) is True
    assert [m for _, m, _ in ran] == list(MODES)
    assert {c for c, _, _ in ran} == {priming.miniature(case)}


# ---------------------------------------------------------------------- the worker, on torch

#: the worker's own job, run here; ``RssFile`` (mapped file pages: the libraries' code) read
#: at every event it emits
FILE_PAGES_AFTER_READY = """
import json, sys
from ckptbench.measure import worker
from ckptbench.results.schema import Case

def rss_file():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("RssFile:"))

seen = []
job = {"case": json.loads(sys.argv[1]), "mode": sys.argv[2]}
report = worker.run_job(job, lambda event: seen.append((event["event"], rss_file())))
assert report["ok"], report
print(json.dumps(seen))
"""


def _torch():
    return pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


@pytest.mark.torch
@pytest.mark.slow
@_torch()
@pytest.mark.parametrize(
    "model, strategy, mode",
    [
        ("mlp-stack", "checkpoint-sequential", "checkpointed"),
        ("mlp-stack", "revolve", "normal"),
        ("lstm", "torch-checkpoint", "checkpointed"),
    ],
)
def test_no_code_page_is_first_touched_after_ready(model, strategy, mode):
    case = _case(model=model, strategy=strategy, steps=8, snaps=2, hidden=8, batch=2, input=8,
                 output=1, warmup=1, repeats=2, threads=1)  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FILE_PAGES_AFTER_READY),
         json.dumps(case.to_dict()), mode],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert [e for e, _ in seen] == ["ready", "iteration", "iteration", "iteration"]
    ready = seen[0][1]
    # before: 6-12 MiB of libtorch's code first run in the warm-up iteration; now nothing
    # (page reclaim can only lower RssFile)
    assert max(kib for _, kib in seen) - ready < 512, seen
