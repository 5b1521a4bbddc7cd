"""Session-wide test settings.

``run`` adds rounds by default until the slowdown's interval is within 5%
(``--precision``). Tests that run real workers on tiny cases measure a fixed number of
rounds instead: their timings are too noisy for any target, and the number of rounds is
what they check. ``tests/test_rounds.py`` checks the default itself (it removes this
setting where it needs the default).

Tables are rendered at ckptbench's default width for output that is not a terminal: a
``COLUMNS`` the shell exported (or pytest-xdist sets in its workers: 80) is removed, and a
test of a width sets its own.
"""

from __future__ import annotations

import os
import re

import pytest
from _fake import use_fake_worker

os.environ["CKPTBENCH_PRECISION"] = "off"
os.environ.pop("COLUMNS", None)

#: A skip reason that names an optional framework: the test needs it.
_FRAMEWORK = re.compile(r"\b(torch|jax|equinox)\b")


def pytest_collection_modifyitems(config, items):
    """Refuse a test that is skipped for want of torch or JAX but carries neither marker:
    CI runs the README's command without them and then only ``-m torch`` and ``-m jax``, so
    it would never run (tests/_frameworks.py gives both marks at once)."""
    unmarked = [
        item.nodeid
        for item in items
        if not (item.get_closest_marker("torch") or item.get_closest_marker("jax"))
        and any(
            _FRAMEWORK.search(str(mark.kwargs.get("reason", "")))
            for mark in item.iter_markers("skipif")
        )
    ]
    if unmarked:
        raise pytest.UsageError(
            f"{len(unmarked)} tests skip without a framework but carry no torch/jax marker "
            f"(CI would never run them; use tests/_frameworks.py): {unmarked[:5]}"
        )


@pytest.fixture
def fake(monkeypatch):
    """The fake worker measures (``tests/_fake.py``), no ``FAKE_*`` variable set."""
    return use_fake_worker(monkeypatch)
