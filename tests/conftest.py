"""Session-wide test settings.

``run`` adds rounds by default until the slowdown's interval is within 5%
(``--precision``). Tests that run real workers on tiny cases measure a fixed number of
rounds instead: their timings are too noisy for any target, and the number of rounds is
what they check. ``tests/test_rounds.py`` checks the default itself (it removes this
setting where it needs the default).

Every pytest-xdist worker imports hypothesis as it starts: its pytest plugin imports it
in each worker's terminal summary otherwise, after the worker has told the controller it
finished, and execnet gives a worker 5 s to end before it sends it SIGINT. With
``PYTHONDONTWRITEBYTECODE`` set (no ``.pyc`` files) and a loaded machine, that import took
longer, and the run ended with "Exception ignored in: <function ... gc_callback>
KeyboardInterrupt" (two workers of the Dask tests took 1.9-3.1 s to end, most of it in
that import, at a load of 7-10 on two cores; with it imported first, 0.1-0.4 s).

Tables are rendered at ckptbench's default width for output that is not a terminal: a
``COLUMNS`` the shell exported (or pytest-xdist sets in its workers: 80) is removed, and a
test of a width sets its own.
"""

from __future__ import annotations

import os
import re

import hypothesis  # noqa: F401  # imported now, not in the 5 s a worker is given to end
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
