"""The ``ckptbench`` console script: the command line imported inside a guard.

Python takes about 0.3 s to import click, rich and the command modules; a Ctrl-C in that
window raised ``KeyboardInterrupt`` from an import, with a traceback, before
:func:`ckptbench.cli.main` could say anything. Here it ends as any stop by Ctrl-C does:
exit status 130, one line.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["main"]


def main() -> None:
    """Import :mod:`ckptbench.cli` and run it; Ctrl-C while importing exits 130."""
    try:
        cli = importlib.import_module("ckptbench.cli")
    except KeyboardInterrupt:
        sys.stderr.write("ckptbench: interrupted while starting\n")
        sys.exit(130)
    cli.main()
