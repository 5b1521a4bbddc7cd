"""A toy backend, declared here and nowhere in ckptbench: numpy and autograd under another
name, with one device and no checkpointing of its own. ``SPEC`` is what a folder under
``ckptbench/backends/`` would declare in its ``__init__``; ``BACKEND`` what the module
named by ``SPEC.module`` provides."""

from __future__ import annotations

from ckptbench.backends.autograd.framework import AutogradFramework
from ckptbench.backends.modes import FrameworkBackend
from ckptbench.backends.spec import BackendSpec


class ToyFramework(AutogradFramework):
    """autograd's operations under the toy's name."""

    name = "toy"


BACKEND = FrameworkBackend(ToyFramework())

#: The toy's declaration: its module is this file, it runs every action stream of ours.
SPEC = BackendSpec(name="toy", module="toys.backend", requires=("autograd",))

#: A toy that runs no stream of ours (a framework offering only its own checkpointing).
PEERS_ONLY = BackendSpec(
    name="toy-peers-only", module="toys.backend", requires=("autograd",), runs_streams=False
)
