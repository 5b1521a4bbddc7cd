"""Device-memory peaks and synchronised timing for ``--device cuda``, guarded everywhere.

On CUDA the tensors live in device memory, which host RSS (VmHWM) does not see. Per
iteration: synchronise, ``torch.cuda.reset_peak_memory_stats``, run, synchronise, read
``torch.cuda.max_memory_allocated`` (bytes held by tensors through torch's caching
allocator; ``max_memory_reserved`` is the allocator's own footprint and is reported
beside it). The host RSS peak is still measured by ``ckptbench.measure.peaks.PeakMeter``.

Every function works on a machine without CUDA: :func:`resolve_device` refuses ``"cuda"``
with one line, and the meter returns ``None`` readings for CPU devices.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

__all__ = [
    "DEVICES",
    "DeviceError",
    "DevicePeakMeter",
    "DevicePeakReading",
    "cuda_available",
    "resolve_device",
    "synchronize",
]

#: Values accepted by ``--device``.
DEVICES: tuple[str, ...] = ("cpu", "cuda")


class DeviceError(ValueError):
    """The requested device does not exist on this machine (a one-line message)."""


def cuda_available() -> bool:
    """True when torch was built with CUDA and sees at least one device."""
    return bool(torch.cuda.is_available())


def resolve_device(name: str) -> torch.device:
    """``"cpu"`` or ``"cuda"`` (``"cuda:N"`` too) as a ``torch.device``; one-line errors."""
    if not isinstance(name, str) or name.split(":")[0] not in DEVICES:
        raise DeviceError(f"unknown device {name!r} (choose from {', '.join(DEVICES)})")
    device = torch.device(name)
    if device.type == "cuda":
        if not cuda_available():
            raise DeviceError(
                f"--device {name} needs a CUDA build of torch and a visible GPU "
                f"(torch {torch.__version__}, CUDA available: no)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise DeviceError(
                f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) visible"
            )
    return device


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (a no-op on CPU), so timings are complete."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass(frozen=True)
class DevicePeakReading:
    """Device memory of one measured window, in bytes; ``None`` fields on CPU."""

    peak_device_bytes: int | None  # max_memory_allocated during the window
    start_device_bytes: int | None  # memory_allocated when the window opened
    peak_reserved_bytes: int | None  # max_memory_reserved during the window


class DevicePeakMeter:
    """Peak device memory per measured window (``with meter.measure() as window: ...``)."""

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.method = "cuda-max-memory-allocated" if self.device.type == "cuda" else None

    @contextmanager
    def measure(self) -> Iterator[_Window]:
        window = _Window()
        if self.device.type != "cuda":
            window.reading = DevicePeakReading(None, None, None)
            yield window
            return
        dev = self.device
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        start = torch.cuda.memory_allocated(dev)
        try:
            yield window
        finally:
            torch.cuda.synchronize(dev)
            window.reading = DevicePeakReading(
                peak_device_bytes=int(torch.cuda.max_memory_allocated(dev)),
                start_device_bytes=int(start),
                peak_reserved_bytes=int(torch.cuda.max_memory_reserved(dev)),
            )

    def trace_window(self) -> _TraceWindow | None:
        """Per-action device peaks for ``run --trace`` (None on the CPU)."""
        return _TraceWindow(self.device) if self.device.type == "cuda" else None


class _TraceWindow:
    """``start()`` then ``read()`` after every action: the most bytes allocated since the
    last read, above the start. No synchronisation: the caching allocator counts
    allocations on the host, as kernels are queued."""

    method = "cuda-max-memory-allocated-per-action"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.start_bytes = 0

    def start(self) -> int:
        self.start_bytes = int(torch.cuda.memory_allocated(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return self.start_bytes

    def read(self) -> int:
        peak = int(torch.cuda.max_memory_allocated(self.device))
        torch.cuda.reset_peak_memory_stats(self.device)
        return max(0, peak - self.start_bytes)


class _Window:
    """Filled with the reading when the ``measure()`` block exits."""

    reading: DevicePeakReading | None = None
