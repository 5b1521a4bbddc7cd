"""Test helper: run a snippet in a fresh interpreter and read back the JSON it prints.

Memory readings that are exact in ckptbench's worker (a fresh process with no other Python
thread allocating) are not exact inside a pytest-xdist worker: tracemalloc traces every
thread, and execnet's receiver unpickles the next tests' items while a test runs (a slope over
64 kept tapes once read 397 B a tape too much there, 2026-11-29 CI), while a long-lived
process reuses freed pages, which VmHWM does not see. Such readings are taken here, in the
conditions the worker gives them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any


def fresh_python_json(code: str) -> Any:
    """Run ``code`` in a fresh ``python -c`` and parse the last line it prints as JSON."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
