"""Devices of the JAX backend and device-memory peaks beside host RSS.

``--device cpu`` (the default) runs on JAX's CPU device; ``--device cuda`` on the first GPU
JAX sees (refused with one line where there is none). On a GPU the arrays live in device
memory, which host RSS does not see: :class:`DevicePeakMeter` (the API of the torch
backend's meter) reads ``device.memory_stats()['peak_bytes_in_use']`` around each measured
window.

XLA's allocator offers no reset of that peak, and building the gradient sets it high: on
an H100 every mode of the 1000-step LSTM read about 105-109 MiB after compiling, whatever
its strategy, above the checkpointed gradient's own peak. A window that does not reach the old
peak would read the compiler's. So the meter *raises the floor* first: when the peak is
above the bytes in use, it allocates a ballast array of the difference, so that anything
the window allocates sets a new peak, and subtracts the ballast afterwards. The reading
is then exact: ``bytes in use at the start + (peak during the window - in use with the
ballast)``. The ballast is freed when the window closes; it grows by one window's extra
memory per iteration (the peak keeps the last window's top). Where the ballast cannot be
allocated (a nearly full device) the reading is the allocator's peak, an upper bound, and
``peak_exact`` is False.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import jax

__all__ = ["DEVICES", "DevicePeakMeter", "DevicePeakReading", "resolve_device"]

#: Values of ``--device`` on the JAX backend.
DEVICES: tuple[str, ...] = ("cpu", "cuda")


def resolve_device(name: str) -> Any:
    """The JAX device for ``"cpu"`` or ``"cuda"``; one-line ``ValueError`` otherwise."""
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r} (choose from {', '.join(DEVICES)})")
    if name == "cpu":
        return jax.devices("cpu")[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        raise ValueError(
            f"--device {name} needs a GPU build of JAX and a visible GPU (jax {jax.__version__})"
        )
    return gpus[0]


@dataclass(frozen=True)
class DevicePeakReading:
    """Device memory of one measured window, in bytes; ``None`` fields without statistics."""

    peak_device_bytes: int | None  # peak_bytes_in_use at the end of the window
    start_device_bytes: int | None  # bytes_in_use when the window opened
    peak_exact: bool = True  # False: the device's peak was set before this window


class DevicePeakMeter:
    """Peak device memory per measured window (``with meter.measure() as window: ...``)."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.method = "jax-peak-bytes-in-use" if device.platform != "cpu" else None

    def _stats(self) -> dict[str, int] | None:
        try:
            return self.device.memory_stats()
        except Exception:  # backends without statistics
            return None

    def _ballast(self, nbytes: int) -> Any:
        """A device array of at least ``nbytes`` bytes (None when it cannot be allocated)."""
        try:
            import jax.numpy as jnp

            mib = -(-nbytes // 2**20)  # whole MiB: few distinct shapes, few compilations
            arr = jnp.zeros((mib, 2**20), jnp.uint8, device=self.device)
            return arr.block_until_ready()
        except Exception:  # out of device memory: fall back to the upper bound
            return None

    @contextmanager
    def measure(self) -> Iterator[_Window]:
        window = _Window()
        before = self._stats()
        ballast = None
        floor = None
        if before and before.get("peak_bytes_in_use", 0) > before.get("bytes_in_use", 0):
            ballast = self._ballast(before["peak_bytes_in_use"] - before["bytes_in_use"])
            raised = self._stats() if ballast is not None else None
            if raised and raised.get("bytes_in_use", 0) >= before["peak_bytes_in_use"]:
                floor = int(raised["bytes_in_use"])
            elif ballast is not None:  # short of the old peak: free it, read the upper bound
                ballast = None
                before = self._stats() or before
        try:
            yield window
        finally:
            after = self._stats()
            if not before or not after:
                window.reading = DevicePeakReading(None, None)
            else:
                start = int(before.get("bytes_in_use", 0))
                peak = int(after.get("peak_bytes_in_use", 0))
                if floor is not None:  # the ballast raised the floor: exact
                    window.reading = DevicePeakReading(start + max(peak - floor, 0), start)
                else:  # exact only if the old peak was not above the bytes in use
                    old_peak = int(before.get("peak_bytes_in_use", 0))
                    window.reading = DevicePeakReading(
                        peak_device_bytes=peak,
                        start_device_bytes=start,
                        peak_exact=old_peak <= start or peak > old_peak,
                    )
            del ballast


class _Window:
    """Filled with the reading when the ``measure()`` block exits."""

    reading: DevicePeakReading | None = None
