"""``python -m ckptbench``: the console script, with the console script's ``sys.path``.

``-m`` puts the current folder first on ``sys.path`` (the console script puts its own
folder there), so an ``autograd.py`` or ``numpy.py`` in the folder a user runs from was
imported in place of the library by ``compare`` or ``check``. The package itself is
imported by now (its modules load through its own path), so the entry is dropped before
anything else is imported, as Python's ``-P`` would. Plug-ins named as modules are still
found from the current folder: the worker looks there itself, in its own process.

A Ctrl-C before :func:`ckptbench.entry.main` takes over ends as one there does: one line,
exit status 130.
"""

import sys

try:
    import os

    if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]

    from ckptbench.entry import main  # after the path is as the console script's
except KeyboardInterrupt:
    sys.stderr.write("ckptbench: interrupted while starting\n")
    raise SystemExit(130) from None

main()
