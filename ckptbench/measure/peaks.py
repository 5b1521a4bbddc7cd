"""Memory measurement: exact in-process peaks, a parent-side RSS sampler, metadata.

This module is imported inside the measured worker process, so it depends on
the standard library and psutil only; numpy is imported lazily, and only by
:func:`numpy_environment`.

The protocol follows docs/architecture.md, "Measurement protocol":

* Exact peak (Linux): before the measured region call ``malloc_trim(0)`` and
  write ``5`` to ``/proc/self/clear_refs`` (resets ``VmHWM`` to the current
  RSS); afterwards read ``VmHWM`` from ``/proc/self/status``.
* Timeline: the parent samples the child's RSS with psutil, like ``top``. The
  sampled peak is a lower bound on the true peak; never report it as exact.
* Never take a child's peak from ``RUSAGE_CHILDREN``: CPython spawns children
  with vfork, and after ``exec`` the kernel carries the parent's old
  high-water mark into the child's ``ru_maxrss``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "METHOD_RU_MAXRSS",
    "METHOD_VMHWM",
    "THREAD_ENV_VARS",
    "PeakMeter",
    "PeakReading",
    "PeakWindow",
    "RssSampler",
    "cpu_affinity",
    "cpu_list",
    "environment",
    "malloc_env",
    "numpy_environment",
    "peak_method",
    "pinned_thread_env",
    "read_peak_bytes",
    "read_rss_anon_bytes",
    "read_rss_bytes",
    "read_ru_maxrss_bytes",
    "reset_peak",
    "thin_timeline",
    "trim_heap",
]

CLEAR_REFS_PATH = "/proc/self/clear_refs"
STATUS_PATH = "/proc/self/status"
CPUINFO_PATH = "/proc/cpuinfo"

METHOD_VMHWM = "vmhwm"
METHOD_RU_MAXRSS = "ru_maxrss"

#: Thread-count variables of the common BLAS/OpenMP runtimes.
THREAD_ENV_VARS: tuple[str, ...] = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
_RECORDED_ENV_VARS: tuple[str, ...] = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_CORETYPE",
)

_KIB = 1024


# --------------------------------------------------------------------------
# Exact peak inside this process
# --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """Return glibc's ``malloc_trim``, or None when libc is not glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        func = ctypes.CDLL(None).malloc_trim  # dlopen(NULL) sees libc's symbols
    except (OSError, AttributeError):
        return None
    func.argtypes = [ctypes.c_size_t]
    func.restype = ctypes.c_int
    return func


def trim_heap() -> None:
    """Return free heap pages to the OS with glibc ``malloc_trim(0)``.

    Without it, memory freed by a previous iteration stays resident and a warm
    iteration's peak hides real growth. No-op when libc is not glibc.
    """
    func = _malloc_trim()
    if func is not None:
        func(0)


def reset_peak() -> None:
    """Reset this process's ``VmHWM`` to its current RSS (Linux ``clear_refs`` = 5).

    Raises OSError where ``/proc/self/clear_refs`` is missing or not writable.
    """
    fd = os.open(CLEAR_REFS_PATH, os.O_WRONLY)
    try:
        os.write(fd, b"5")
    finally:
        os.close(fd)


def _read_status_kib(field: str) -> int:
    """Return a ``/proc/self/status`` field given in kB, converted to bytes."""
    prefix = field + ":"
    with open(STATUS_PATH, encoding="ascii") as fh:
        for line in fh:
            if line.startswith(prefix):
                value, unit = line[len(prefix) :].split()
                if unit != "kB":
                    raise ValueError(f"unexpected unit {unit!r} for {field}")
                return int(value) * _KIB
    raise KeyError(f"{field} not found in {STATUS_PATH}")


def read_peak_bytes() -> int:
    """Return this process's RSS high-water mark (``VmHWM``) in bytes."""
    return _read_status_kib("VmHWM")


def read_rss_bytes() -> int:
    """Return this process's resident set size (``VmRSS``) in bytes."""
    return _read_status_kib("VmRSS")


def read_rss_anon_bytes() -> int:
    """Return this process's anonymous resident memory (``RssAnon``) in bytes.

    Unlike VmRSS this excludes file-backed pages, which move with the page cache.
    """
    return _read_status_kib("RssAnon")


def read_ru_maxrss_bytes() -> int:
    """Return ``getrusage(RUSAGE_SELF).ru_maxrss`` in bytes (KiB on Linux, bytes on macOS).

    This figure cannot be reset. On Linux it is also inherited across a
    vfork+exec: a child spawned by a large parent reports the parent's old peak.
    """
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(maxrss) if sys.platform == "darwin" else int(maxrss) * _KIB


def _current_rss_bytes() -> int:
    """Return current RSS via /proc when possible, psutil otherwise."""
    try:
        return read_rss_bytes()
    except (OSError, KeyError, ValueError):
        return int(psutil.Process().memory_info().rss)


def peak_method() -> str:
    """Return ``"vmhwm"`` if the exact, resettable peak is available, else ``"ru_maxrss"``.

    ``"vmhwm"`` needs ``/proc/self/clear_refs`` writable and ``VmHWM`` readable.
    The ``"ru_maxrss"`` fallback (e.g. macOS) reads ``ru_maxrss`` of this
    process; it cannot be reset, so it is the peak since process start, not
    the peak of the measured region.
    """
    try:
        os.close(os.open(CLEAR_REFS_PATH, os.O_WRONLY))  # opening alone clears nothing
        read_peak_bytes()
    except (OSError, KeyError, ValueError):
        return METHOD_RU_MAXRSS
    return METHOD_VMHWM


@dataclass(frozen=True)
class PeakReading:
    """Peak RSS of one measured region, and how it was obtained.

    ``start_rss_bytes`` is the RSS after trimming, when the region began.
    ``method`` is ``"vmhwm"`` (exact, reset at the start of the region) or
    ``"ru_maxrss"`` (peak since process start; not resettable).
    """

    peak_rss_bytes: int
    start_rss_bytes: int
    method: str

    @property
    def growth_bytes(self) -> int:
        """Peak minus start RSS: the region's own memory cost (if method is exact)."""
        return self.peak_rss_bytes - self.start_rss_bytes


class PeakWindow:
    """Mutable holder yielded by :meth:`PeakMeter.measure`; filled when the block exits."""

    def __init__(self, start_rss_bytes: int, method: str) -> None:
        self.start_rss_bytes = start_rss_bytes
        self.method = method
        self.reading: PeakReading | None = None

    @property
    def peak_rss_bytes(self) -> int:
        """Peak RSS in bytes; only available after the ``with`` block."""
        if self.reading is None:
            raise RuntimeError("peak is only known after the measured block has exited")
        return self.reading.peak_rss_bytes

    @property
    def growth_bytes(self) -> int:
        """Peak minus start RSS in bytes; only available after the ``with`` block."""
        return self.peak_rss_bytes - self.start_rss_bytes


class PeakMeter:
    """Measure the peak RSS of a region of code inside this process.

    Usage::

        meter = PeakMeter()
        with meter.measure() as m:   # trim heap, reset VmHWM, record start RSS
            work()
        m.peak_rss_bytes, m.start_rss_bytes, m.method
        meter.last                   # the same numbers as a frozen PeakReading

    The method (``"vmhwm"`` or ``"ru_maxrss"``) is chosen once, at construction,
    unless given. The reading is taken even if the block raises.
    """

    def __init__(self, method: str | None = None, trim: bool = True) -> None:
        if method is None:
            method = peak_method()
        if method not in (METHOD_VMHWM, METHOD_RU_MAXRSS):
            raise ValueError(f"unknown peak method {method!r}")
        self.method = method
        self.trim = trim
        self.last: PeakReading | None = None

    @contextmanager
    def measure(self) -> Iterator[PeakWindow]:
        """Trim, reset the peak, run the block, then record a :class:`PeakReading`."""
        if self.trim:
            trim_heap()
        if self.method == METHOD_VMHWM:
            reset_peak()
        window = PeakWindow(_current_rss_bytes(), self.method)
        try:
            yield window
        finally:
            exact = self.method == METHOD_VMHWM
            peak = read_peak_bytes() if exact else read_ru_maxrss_bytes()
            reading = PeakReading(
                peak_rss_bytes=peak,
                start_rss_bytes=window.start_rss_bytes,
                method=self.method,
            )
            window.reading = reading
            self.last = reading


# --------------------------------------------------------------------------
# Parent-side sampler
# --------------------------------------------------------------------------

_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied)


class RssSampler:
    """Sample another process's RSS from a daemon thread, like ``top``.

    ``timeline`` holds ``(seconds since start, rss bytes)`` pairs. The sampled
    peak is a lower bound on the true peak (short peaks between samples are
    missed). If ``limit_bytes`` is set and a sample exceeds it, the process
    is sent SIGKILL, ``limit_exceeded`` becomes True and ``exceeded_rss_bytes``
    holds the offending sample. If the process exits or becomes inaccessible,
    sampling stops quietly and ``vanished`` is True.

    ``cpu_time_s`` is the CPU time the sampling thread itself consumed, and
    ``wall_time_s`` how long it ran, so ``cpu_time_s / wall_time_s`` is the
    sampler's overhead as a fraction of one core.
    """

    def __init__(self, pid: int, interval_s: float = 0.005, limit_bytes: int | None = None) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if limit_bytes is not None and limit_bytes <= 0:
            raise ValueError(f"limit_bytes must be > 0, got {limit_bytes}")
        self.pid = pid
        self.interval_s = interval_s
        self.limit_bytes = limit_bytes
        self.timeline: list[tuple[float, int]] = []
        self.peak_rss_bytes = 0
        self.limit_exceeded = False
        self.exceeded_rss_bytes: int | None = None
        self.vanished = False
        self.cpu_time_s = 0.0
        self.wall_time_s = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def sample_count(self) -> int:
        """Number of samples taken so far."""
        return len(self.timeline)

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> RssSampler:
        """Start sampling in a daemon thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._thread = threading.Thread(
            target=self._run, name=f"rss-sampler-{self.pid}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> RssSampler:
        """Stop sampling and wait for the thread; safe to call more than once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the sampler to end by itself (process gone or limit hit).

        Returns True if it has ended, False on timeout. Does not ask it to stop.
        """
        if self._thread is None:
            raise RuntimeError("sampler not started")
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def __enter__(self) -> RssSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _sample(self, proc: psutil.Process) -> int | None:
        """Return the RSS in bytes, or None once the process has released its memory."""
        rss = int(proc.memory_info().rss)
        # A live user process always has resident pages; 0 means its address
        # space is already gone (exiting, or a zombie not yet reaped).
        return rss if rss > 0 else None

    def _run(self) -> None:
        cpu0 = time.thread_time()
        t0 = time.perf_counter()
        try:
            proc = psutil.Process(self.pid)
            while True:
                rss = self._sample(proc)
                if rss is None:
                    self.vanished = True
                    break
                self.timeline.append((time.perf_counter() - t0, rss))
                self.peak_rss_bytes = max(self.peak_rss_bytes, rss)
                if self.limit_bytes is not None and rss > self.limit_bytes:
                    self.exceeded_rss_bytes = rss
                    self.limit_exceeded = True
                    with suppress(_GONE):
                        proc.send_signal(signal.SIGKILL)
                    break
                if self._stop.wait(self.interval_s):
                    break
        except _GONE:
            self.vanished = True
        finally:
            self.wall_time_s = time.perf_counter() - t0
            self.cpu_time_s = time.thread_time() - cpu0


def thin_timeline(
    timeline: Sequence[tuple[float, int]], max_points: int = 2000
) -> list[tuple[float, int]]:
    """Reduce a timeline to at most ``max_points`` samples for storage.

    The first and last samples are always kept; the interior is cut into
    equal-count buckets and the highest-RSS sample of each is kept, so the
    upper envelope and the global peak survive (dips may not).
    """
    if max_points < 3:
        raise ValueError(f"max_points must be >= 3, got {max_points}")
    n = len(timeline)
    if n <= max_points:
        return list(timeline)
    interior = n - 2
    buckets = max_points - 2
    kept = [timeline[0]]
    for b in range(buckets):
        lo = 1 + b * interior // buckets
        hi = 1 + (b + 1) * interior // buckets
        if hi > lo:
            kept.append(max(timeline[lo:hi], key=lambda point: point[1]))
    kept.append(timeline[-1])
    return kept


# --------------------------------------------------------------------------
# Environment metadata
# --------------------------------------------------------------------------


def pinned_thread_env(threads: int) -> dict[str, str]:
    """Return environment variables pinning BLAS/OpenMP pools to ``threads`` threads."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    return {name: str(threads) for name in THREAD_ENV_VARS}


def _cpu_model() -> str | None:
    """Return the CPU model name from /proc/cpuinfo, or platform's best guess."""
    try:
        with open(CPUINFO_PATH, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor", "cpu model"):
                    return value.strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _git_commit(cwd: str | None = None) -> str | None:
    """``git rev-parse HEAD`` of ckptbench's own checkout, or None when it is installed.

    The repository must have ckptbench's source folder at its top (a run from inside some
    other repository records nothing, not that repository's commit).
    """
    root = Path(cwd) if cwd else Path(__file__).resolve().parents[2]  # above ckptbench/measure
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit or None


def environment() -> dict[str, object]:
    """Return JSON-serialisable metadata about the interpreter, machine and repo.

    numpy/autograd/BLAS details are not gathered here; see :func:`numpy_environment`.
    """
    libc_name, libc_version = platform.libc_ver()
    return {
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "system": platform.system(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "libc": f"{libc_name} {libc_version}".strip() or None,
        "cpu_model": _cpu_model(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpu_affinity": cpu_affinity(),
        "memory_total_bytes": int(psutil.virtual_memory().total),
        "thread_env": {name: os.environ.get(name) for name in _RECORDED_ENV_VARS},
        "hostname": socket.gethostname(),
        "peak_method": peak_method(),
        "ckptbench_version": _ckptbench_version(),
        "git_commit": _git_commit(),  # ckptbench's own checkout; None when installed
        "malloc_env": malloc_env(),
    }


def cpu_list(cpus: Iterable[int]) -> str:
    """CPU numbers in the kernel's cpulist notation (``taskset -c``, ``local_cpulist``):
    ``[0, 1, 2, 3, 6]`` -> ``"0-3,6"``."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def cpu_affinity() -> str | None:
    """The CPUs this process may run on (its workers inherit them), as a cpulist; None
    where the platform does not say (no ``sched_getaffinity``).

    A run started under ``taskset -c 2-3`` or a container's cpuset records ``"2-3"``: where a
    process runs moves its times (on a GPU host, by how far its cores are from the GPU), so a
    result says where it ran."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return cpu_list(os.sched_getaffinity(0))


def malloc_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The allocator settings a worker inherits: glibc's ``MALLOC_*`` variables (e.g.
    ``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_ARENA_MAX``) and ``GLIBC_TUNABLES``. They move
    torch's CPU peaks by hundreds of MiB and its times by up to 2x (docs/results/
    torch-memory.md), so every result records them; ckptbench itself sets none."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES"}


def _ckptbench_version() -> str:
    from ckptbench import __version__

    return __version__


def _blas_from_show_config(numpy_module: object) -> dict[str, object] | None:
    """Extract BLAS essentials from ``numpy.show_config(mode="dicts")`` (numpy >= 1.26)."""
    try:
        config = numpy_module.show_config(mode="dicts")  # type: ignore[attr-defined]
    except (TypeError, ValueError, AttributeError, ImportError):
        return None
    if not isinstance(config, dict):
        return None
    blas = config.get("Build Dependencies", {}).get("blas")
    if not isinstance(blas, dict):
        return None
    return {
        "source": "numpy.show_config",
        "name": blas.get("name"),
        "version": blas.get("version"),
        "config": blas.get("openblas configuration"),
    }


def _blas_from_threadpoolctl() -> list[dict[str, object]] | None:
    """Describe loaded BLAS/OpenMP pools with threadpoolctl, if it is installed."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    keys = ("internal_api", "version", "num_threads", "threading_layer", "architecture")
    return [
        {key: info.get(key) for key in keys}
        for info in threadpoolctl.threadpool_info()
        if info.get("user_api") == "blas"
    ]


def numpy_environment() -> dict[str, object]:
    """Return numpy and autograd versions and compact BLAS info (imports numpy lazily).

    ``blas`` comes from ``numpy.show_config(mode="dicts")`` when available, else
    from threadpoolctl when installed, else None.
    """
    try:
        import numpy
    except ImportError:
        return {"numpy_version": None, "autograd_version": _dist_version("autograd"), "blas": None}
    blas: object = _blas_from_show_config(numpy)
    if blas is None:
        pools = _blas_from_threadpoolctl()
        blas = {"source": "threadpoolctl", "pools": pools} if pools is not None else None
    return {
        "numpy_version": numpy.__version__,
        "autograd_version": _dist_version("autograd"),
        "blas": blas,
    }


def framework_versions(distributions: Iterable[str]) -> dict[str, str | None]:
    """``{"torch_version": "2.13.0+cpu"}`` and the like: the versions of ``distributions``
    (a backend's ``BackendSpec.distributions``, the ones it computes with)."""
    return {f"{name}_version": _dist_version(name) for name in distributions}


def _dist_version(name: str) -> str | None:
    """Return an installed distribution's version, or None."""
    import importlib.metadata  # lazy: ~60 ms of import time the worker does not need

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
