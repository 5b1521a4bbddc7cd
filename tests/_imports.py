"""Test helper: which modules a fresh interpreter has loaded after importing one module."""

from __future__ import annotations

import subprocess
import sys


def loaded_after_import(module: str, candidates: tuple[str, ...]) -> list[str]:
    """The ``candidates`` present in ``sys.modules`` of a fresh Python after ``import module``."""
    code = f"import sys, {module}; print(','.join(m for m in {candidates!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]
