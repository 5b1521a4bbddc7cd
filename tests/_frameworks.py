"""The marks of a test that needs an optional framework.

A test that needs torch or JAX is skipped where the package is not installed *and* carries
the package's marker: ``.ci/run`` runs the README's test command without either, then
installs each and runs ``pytest -m torch`` and ``pytest -m jax``. A test that only skipped
would be skipped in the first run and left out of the others, so never run in CI (the
cross-backend contract test and the JAX engine's tests were, until 2026-11-27).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest

__all__ = ["needing", "needs"]


def needs(package: str) -> list[Any]:
    """``pytest.param(..., marks=needs("torch"))``: skipped without ``package``, marked
    with it (``torch`` or ``jax``; equinox's tests run with JAX's)."""
    marker = {"torch": "torch", "jax": "jax", "equinox": "jax"}[package]
    return [
        pytest.mark.skipif(
            importlib.util.find_spec(package) is None, reason=f"{package} is not installed"
        ),
        getattr(pytest.mark, marker),
    ]


def needing(package: str) -> Callable[[Any], Any]:
    """The same marks as a decorator of a test function or class."""

    def apply(test: Any) -> Any:
        for mark in needs(package):
            test = mark(test)
        return test

    return apply
