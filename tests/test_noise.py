"""Tests for ckptbench.measure.noise with real busy processes, and with probes that find nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from ckptbench.measure import noise

BUSY = "import time\nend = time.process_time() + {cpu}\nwhile time.process_time() < end: pass\n"


def _orphan_busy_loop() -> psutil.Process:
    """A busy-looping process that is NOT our descendant (its parent exits at once). Its
    output goes to /dev/null: holding our pipe open would block ``subprocess.run``."""
    spawn = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'while True: pass'],"
        " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,"
        " start_new_session=True)\n"
        "print(p.pid)\n"
    )
    out = subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, check=True)
    return psutil.Process(int(out.stdout.strip()))


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def test_other_process_busy_loop_is_seen_as_other():
    busy = _orphan_busy_loop()
    try:
        assert busy.pid not in {c.pid for c in psutil.Process().children(recursive=True)}
        before = _cpu_s(busy)
        probe = noise.BusyProbe.start()
        time.sleep(1.0)
        reading = probe.stop()
        used = _cpu_s(busy) - before
    finally:
        os.kill(busy.pid, signal.SIGKILL)
    assert used > 0.05  # the loop got some CPU (any share of a core will do)
    # everything the busy loop used counts as other processes' time (clock-tick granularity)
    assert reading.other_cores * reading.wall_s >= 0.8 * used - 0.03
    assert reading.own_cores * reading.wall_s < 0.2  # we slept
    assert reading.busy_cores >= reading.other_cores
    assert reading.cpu_count == psutil.cpu_count()
    assert json.loads(json.dumps(reading.as_dict()))["other_cores"] == reading.other_cores


def test_our_own_child_counts_as_own_not_other():
    probe = noise.BusyProbe.start()
    child = subprocess.Popen([sys.executable, "-c", BUSY.format(cpu=0.5)])
    child.wait()
    reading = probe.stop()
    own_s = reading.own_cores * reading.wall_s
    # the child's 0.5 s of CPU time, reaped into children_user; read back through a
    # division and a multiplication and in clock ticks: 0.49999999999999994 is 0.5
    assert own_s >= 0.5 - 0.03
    # the child's time is not counted as others' (others may still be busy: shared machine)
    assert reading.other_cores * reading.wall_s <= reading.busy_cores * reading.wall_s - 0.45


def test_own_tree_includes_live_descendants():
    # the child says when it has burned its CPU time (no polling of a tick-rounded counter,
    # which once never reached 0.4 s on a loaded machine and spun forever), then sleeps
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BUSY.format(cpu=0.4) + "import sys, time\nprint('burned', flush=True)\ntime.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "burned"
        proc = psutil.Process(child.pid)
        mine = psutil.Process().cpu_times()
        alone = mine.user + mine.system + mine.children_user + mine.children_system
        burned = _cpu_s(proc)
        assert burned > 0.2  # the kernel's account of the child's 0.4 s, in clock ticks
        assert noise.own_tree_cpu_s() >= alone + burned - 0.02
    finally:
        child.kill()
        child.wait()


def test_machine_state_is_json_able():
    state = noise.machine_state()
    doc = json.loads(json.dumps(state.as_dict()))
    assert doc["cpu_count"] == psutil.cpu_count()
    if hasattr(os, "getloadavg"):
        assert len(doc["load_average"]) == 3


def test_governors_read_from_sysfs_layout(tmp_path):
    for cpu, gov in (("cpu0", "performance"), ("cpu1", "powersave"), ("cpu2", "performance")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "scaling_governor").write_text(gov + "\n")
    (tmp_path / "cpu3").mkdir()  # a CPU without cpufreq
    (tmp_path / "cpufreq").mkdir()  # not a CPU
    assert noise.cpu_governors(tmp_path) == ("performance", "powersave")
    assert noise.machine_state(tmp_path).cpu_governors == ("performance", "powersave")


def test_missing_files_and_probes_give_none(tmp_path, monkeypatch):
    assert noise.cpu_governors(tmp_path / "absent") == ()

    def no_loadavg():
        raise OSError("no load average here")

    def no_freq():
        return None

    monkeypatch.setattr(os, "getloadavg", no_loadavg)
    monkeypatch.setattr(psutil, "cpu_freq", no_freq)
    state = noise.machine_state(tmp_path)
    assert state.load_average is None
    assert state.cpu_frequency_mhz is None
    assert state.cpu_governors == ()
    assert state.as_dict()["load_average"] is None

    def broken_freq():
        raise NotImplementedError("no cpufreq")

    monkeypatch.setattr(psutil, "cpu_freq", broken_freq)
    assert noise.cpu_frequency_mhz() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat semantics")
def test_system_busy_time_grows_while_we_burn_cpu():
    before = noise.system_busy_cpu_s()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert noise.system_busy_cpu_s() - before >= 0.3 - 0.03
