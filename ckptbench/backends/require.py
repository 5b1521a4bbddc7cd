"""The one "this backend needs a package" error, for every backend and strategy."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingPackageError", "missing_message", "not_installed_message", "require"]


class MissingPackageError(ImportError, ValueError):
    """A backend (or strategy) was asked for that needs a package this Python cannot import.

    An ``ImportError`` (what callers catch around a backend's import) and a ``ValueError``
    (the project's bad-input convention, exit status 2) at once; the message is one line.
    """


def missing_message(what: str, package: str, why: str, hint: str) -> str:
    """``--backend torch needs torch, which cannot be imported (why); pip install ...``"""
    why = " ".join(why.split())
    reason = f" ({why})" if why else ""
    tail = f"; {hint}" if hint else ""
    return f"{what} needs {package}, which cannot be imported{reason}{tail}"


def not_installed_message(what: str, package: str, hint: str) -> str:
    """``--backend torch needs torch, which is not installed; pip install ...``"""
    tail = f"; {hint}" if hint else ""
    return f"{what} needs {package}, which is not installed{tail}"


def require(
    package: str,
    what: str,
    hint: str = "",
    *,
    shown: str | None = None,
    error: type[ImportError] = MissingPackageError,
) -> ModuleType:
    """``import package``, or raise ``error`` with one line naming what needs it (``what``,
    e.g. ``--backend torch``), the package (as ``shown``, e.g. PyTorch), why it cannot be
    imported (the import's own error: a package missing, or installed but raising on import,
    e.g. a CUDA library not found) and how to install it (``hint``)."""
    try:
        return importlib.import_module(package)
    except Exception as err:  # an install broken another way (OSError, RuntimeError) too
        why = str(err) or type(err).__name__
        if not isinstance(err, ImportError):
            why = f"{type(err).__name__}: {why}"
        raise error(missing_message(what, shown or package, why, hint)) from None
