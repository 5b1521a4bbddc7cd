"""The PyTorch backend: the same workloads, modes and Revolve schedules, run with torch.

Importing this package does not import torch; its submodules do. Every entry point that a
user reaches (``framework.BACKEND``, registered as ``torch`` in
``ckptbench.backends.registry``) first calls :func:`require_torch`, so a missing
torch is one line (:class:`TorchMissingError`, a ``ValueError``) that ``cli`` turns into
exit status 2. Install with the optional extra: ``pip install 'ckptbench[torch]'``.

Submodules:

* ``workloads`` — ``TorchRNN`` and ``TorchLSTM`` (the math of ``ckptbench.workloads``, the
  initial values of the same numpy draws) and plug-ins with torch tensors;
* ``binding`` — ``revolve_checkpoint``: any :mod:`ckptbench.schedules` action stream as one
  ``torch.autograd.Function``, torch's binding of :mod:`ckptbench.engine.interpreter` (Griewank &
  Walther, Algorithm 799: Revolve, 2000; budget plans with kept tapes);
* ``onecall`` — ``--executor one-call``: the same streams inside one backward pass of
  autograd, the interpreter resumed from saved-tensor hooks;
* ``peers`` — torch's own checkpointing, measured beside ours;
* ``chain`` and ``layers`` — layer chains (docs/layers.md): the engine's chain binding and
  ``nn.Module`` stacks as chains;
* ``framework`` — torch's operations for the modes written once in
  ``ckptbench.backends.modes``, and ``BACKEND``;
* ``tapes`` — the bytes one kept tape holds, counted from autograd's saved tensors;
* ``device`` — device-memory peaks and synchronisation, guarded for machines without CUDA.
"""

from __future__ import annotations

from typing import Any

from ckptbench.backends.require import MissingPackageError, require
from ckptbench.backends.spec import BackendSpec
from ckptbench.measure.costwork import CostsWork

__all__ = ["INSTALL_HINT", "SPEC", "TorchMissingError", "require_torch"]

#: What to run when torch is missing.
INSTALL_HINT = "pip install 'ckptbench[torch]'"

#: The torch backend: CPU and CUDA (``--device gpu`` is CUDA).
SPEC = BackendSpec(
    name="torch",
    module="ckptbench.backends.torch.framework",
    requires=("torch",),
    plugin_check="ckptbench.backends.torch.plugincheck:TorchCheck",
    distributions=("torch",),
    devices=("cpu", "cuda"),
    device_aliases=(("gpu", "cuda"),),
    dtypes=("float64", "float32", "bfloat16"),
    executors=("engine", "one-call"),
    chain_executors=("engine",),
    recording_executors=("one-call",),
    executor_notes=(
        (
            "one-call",
            "cpu",
            "--executor one-call on the CPU: the first sweep's recorded graph fragments "
            "glibc's heap, about +400 MiB of host memory at 1 000 steps of hidden 256 "
            "against the engine's +15 MiB (docs/gpu.md, 'Two torch executors'); it is "
            "meant for CUDA",
        ),
    ),
    install_hint=INSTALL_HINT,
    primes_modes=True,  # measure/priming.py: libtorch's code pages, resident in every mode
    costs_work=CostsWork(counts_tapes=True),  # tapes from saved-tensor hooks (tapes.py)
)


class TorchMissingError(MissingPackageError):
    """The torch backend was asked for but PyTorch cannot be imported (a one-line message)."""


def require_torch() -> Any:
    """Return the ``torch`` module, or raise :class:`TorchMissingError` with one line."""
    return require(
        "torch", "--backend torch", INSTALL_HINT, shown="PyTorch", error=TorchMissingError
    )
