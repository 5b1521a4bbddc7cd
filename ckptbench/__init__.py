"""ckptbench: measure what gradient checkpointing (Revolve) costs and saves."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "binomial_checkpoint"]


def __getattr__(name: str):
    # Lazy: keep `import ckptbench.schedules` free of numpy/autograd.
    if name == "binomial_checkpoint":
        from ckptbench.checkpoint import binomial_checkpoint

        return binomial_checkpoint
    raise AttributeError(name)
