"""Devices of the JAX backend and device-memory peaks beside host RSS.

``--device cpu`` (the default) runs on JAX's CPU device; ``--device cuda`` on the first GPU
JAX sees (refused with one line where there is none). On a GPU the arrays live in device
memory, which host RSS does not see: :class:`DevicePeakMeter` (the API of the torch
backend's meter) reads ``device.memory_stats()['peak_bytes_in_use']`` after each measured
window. XLA's allocator offers no reset of that peak, so a window's peak is the larger of
the peak at its start and at its end: exact when the window sets a new peak, which the
first measured iteration after warm-up does when iterations are alike; otherwise
``peak_exact`` is False and the reading is an upper bound (the earlier peak).
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

    @contextmanager
    def measure(self) -> Iterator[_Window]:
        window = _Window()
        before = self._stats()
        try:
            yield window
        finally:
            after = self._stats()
            if not before or not after:
                window.reading = DevicePeakReading(None, None)
            else:
                start_peak = int(before.get("peak_bytes_in_use", 0))
                peak = int(after.get("peak_bytes_in_use", 0))
                window.reading = DevicePeakReading(
                    peak_device_bytes=peak,
                    start_device_bytes=int(before.get("bytes_in_use", 0)),
                    peak_exact=peak > start_peak,
                )


class _Window:
    """Filled with the reading when the ``measure()`` block exits."""

    reading: DevicePeakReading | None = None
