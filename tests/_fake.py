"""The fake worker (``tests/fake_worker.py``) in place of the real one: no framework, no
timing; a test sets the ``FAKE_*`` variables it needs after :func:`use_fake_worker`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FAKE = [sys.executable, str(Path(__file__).with_name("fake_worker.py"))]
#: Every variable ``fake_worker.py`` reads: none is left over from the shell or a test.
FAKE_VARS = (
    "FAKE_CRASH",
    "FAKE_FAIL",
    "FAKE_SLEEP",
    "FAKE_ALLOC",
    "FAKE_GRAD_NOISE",
    "FAKE_SCALE",
    "FAKE_CPU_SHARE",
    "FAKE_ITER_SLEEP",
    "FAKE_SPOOF",
    "FAKE_PLUGIN_BAD",
    "FAKE_CUDA",
)


def use_fake_worker(monkeypatch: pytest.MonkeyPatch, *unset: str) -> pytest.MonkeyPatch:
    """Every worker ckptbench starts is the fake one, no ``FAKE_*`` variable set (nor the
    other variables named in ``unset``); returns ``monkeypatch``."""
    monkeypatch.setattr("ckptbench.measure.launch.default_worker_command", lambda: list(FAKE))
    for var in (*FAKE_VARS, *unset):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch
