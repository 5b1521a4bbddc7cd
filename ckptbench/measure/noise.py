"""Cheap probes of machine noise around a measurement: other processes' CPU use, load, clock.

pyperf and asv warn when a benchmark shared its machine; so does ckptbench. Nothing here
samples in a loop: :class:`BusyProbe` reads two counters at the start and two at the end of
a worker's run (system-wide busy CPU time from ``/proc/stat`` through ``psutil.cpu_times``,
and the CPU time of our own process tree), so the cost is a few hundred microseconds per
worker whatever its length. Other processes' CPU use is the difference:

    other_cores = (busy_system_s - own_tree_s) / wall_s

where ``busy_system_s`` is every CPU's non-idle time (user, nice, system, irq, softirq,
steal; idle and iowait excluded) and ``own_tree_s`` is the user + system time of this
process, of its live descendants, and of the children it has reaped. A worker that ran at
one core on a quiet machine gives ``other_cores`` near 0; a neighbour busy-looping gives
about 1 (or less if the scheduler shared a core with our worker).

Also readable once per run: the load average, the CPU frequency (psutil) and the cpufreq
governor (``/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor``, absent on many VMs).
Every probe returns None (or an empty tuple) where the platform does not offer the figure;
nothing here prints or raises for a missing file. See ``docs/architecture.md``.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = [
    "CPUFREQ_ROOT",
    "BusyProbe",
    "BusyReading",
    "MachineState",
    "cpu_frequency_mhz",
    "cpu_governors",
    "load_average",
    "machine_state",
    "own_tree_cpu_s",
    "system_busy_cpu_s",
]

CPUFREQ_ROOT = Path("/sys/devices/system/cpu")
_IDLE_FIELDS = ("idle", "iowait", "guest", "guest_nice")  # guest time is inside user already


def system_busy_cpu_s() -> float:
    """Non-idle CPU seconds of all CPUs since boot (``/proc/stat`` through psutil)."""
    times = psutil.cpu_times()
    return sum(v for k, v in times._asdict().items() if k not in _IDLE_FIELDS)


def own_tree_cpu_s(process: psutil.Process | None = None) -> float:
    """User + system CPU seconds of ``process`` (default: this one), its reaped children and
    its live descendants (with their reaped children). Processes that vanish while being
    read are skipped."""
    proc = process or psutil.Process()
    total = 0.0
    try:
        t = proc.cpu_times()
        total += t.user + t.system + t.children_user + t.children_system
        kids = proc.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return total
    for child in kids:
        try:
            t = child.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


@dataclass(frozen=True)
class BusyReading:
    """CPU use between :meth:`BusyProbe.start` and :meth:`BusyProbe.stop`, in cores."""

    wall_s: float
    busy_cores: float  # all processes, all CPUs
    own_cores: float  # this process tree
    other_cores: float  # everything else, >= 0
    cpu_count: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class BusyProbe:
    """Counters read at the start of a measurement; :meth:`stop` turns them into a reading.

    Use: ``probe = BusyProbe.start()``, run and reap the worker, ``probe.stop()``. The worker
    must be a descendant of this process (the runner's ``subprocess.Popen``) and must have
    been waited for, so that its time is in our ``children_*`` times at the end.
    """

    wall: float
    busy_s: float
    own_s: float

    @classmethod
    def start(cls) -> BusyProbe:
        return cls(time.perf_counter(), system_busy_cpu_s(), own_tree_cpu_s())

    def stop(self) -> BusyReading:
        wall = max(time.perf_counter() - self.wall, 1e-9)
        busy = max(system_busy_cpu_s() - self.busy_s, 0.0)
        own = max(own_tree_cpu_s() - self.own_s, 0.0)
        return BusyReading(
            wall_s=wall,
            busy_cores=busy / wall,
            own_cores=own / wall,
            other_cores=max(busy - own, 0.0) / wall,
            cpu_count=psutil.cpu_count() or 1,
        )


def load_average() -> tuple[float, float, float] | None:
    """1, 5 and 15 minute load averages, or None where the platform has none."""
    try:
        one, five, fifteen = os.getloadavg()
    except (OSError, AttributeError):
        return None
    return (one, five, fifteen)


def cpu_frequency_mhz() -> dict[str, float] | None:
    """Current, min and max CPU frequency in MHz (psutil; min/max are 0 where unknown)."""
    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError, AttributeError, RuntimeError):
        return None
    if freq is None:
        return None
    return {"current": float(freq.current), "min": float(freq.min), "max": float(freq.max)}


def cpu_governors(root: Path = CPUFREQ_ROOT) -> tuple[str, ...]:
    """Distinct cpufreq scaling governors of the CPUs (sorted); empty where not readable."""
    found = set()
    try:
        cpus = sorted(root.glob("cpu[0-9]*"))
    except OSError:
        return ()
    for cpu in cpus:
        try:
            text = (cpu / "cpufreq" / "scaling_governor").read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            found.add(text)
    return tuple(sorted(found))


@dataclass(frozen=True)
class MachineState:
    """What the machine looked like at one moment (recorded with a run's environment)."""

    load_average: tuple[float, float, float] | None
    cpu_frequency_mhz: dict[str, float] | None
    cpu_governors: tuple[str, ...]
    cpu_count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "load_average": list(self.load_average) if self.load_average else None,
            "cpu_frequency_mhz": self.cpu_frequency_mhz,
            "cpu_governors": list(self.cpu_governors),
            "cpu_count": self.cpu_count,
        }


def machine_state(root: Path = CPUFREQ_ROOT) -> MachineState:
    """Load average, CPU frequency and governors now; each None/empty where not readable."""
    return MachineState(
        load_average=load_average(),
        cpu_frequency_mhz=cpu_frequency_mhz(),
        cpu_governors=cpu_governors(root),
        cpu_count=psutil.cpu_count() or 1,
    )
