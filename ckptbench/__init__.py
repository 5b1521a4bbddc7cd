"""ckptbench: measure what gradient checkpointing (Revolve) costs and saves."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "binomial_checkpoint", "read_results"]


def __getattr__(name: str):
    # Lazy: keep `import ckptbench.schedules` free of numpy/autograd, and `import ckptbench`
    # free of pandas (the worker imports this package).
    if name == "binomial_checkpoint":
        from ckptbench.backends.autograd.binding import binomial_checkpoint

        return binomial_checkpoint
    if name == "read_results":
        from ckptbench.frame import read_results

        return read_results
    raise AttributeError(name)
