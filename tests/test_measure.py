"""Tests for ckptbench.measure.peaks, against real child processes (tests/_alloc_child.py)."""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import ckptbench
from ckptbench.measure import peaks as measure

MIB = 2**20
REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).with_name("_alloc_child.py")
SAFETY_TIMEOUT_S = 60  # only to avoid hanging the suite; never asserted on


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(measure.pinned_thread_env(1))
    return env


def _spawn(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or _child_env(),
    )


def _finish(proc: subprocess.Popen[str]) -> dict:
    out, err = proc.communicate(timeout=SAFETY_TIMEOUT_S)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _touch(nbytes: int) -> bytearray:
    return bytearray(b"\x01") * nbytes


# ---------------------------------------------------------------- exact peak


def test_exact_peak_of_200_mib_and_sampler_sees_it() -> None:
    size = 200 * MIB
    proc = _spawn("hold", 200, 0.3)
    sampler = measure.RssSampler(proc.pid, interval_s=0.005).start()
    try:
        result = _finish(proc)
    finally:
        sampler.stop()

    assert result["method"] == "vmhwm"
    growth = result["peak_rss_bytes"] - result["start_rss_bytes"]
    assert abs(growth - size) <= 0.02 * size, growth / MIB

    assert sampler.sample_count > 0
    sampled_growth = sampler.peak_rss_bytes - result["idle_rss_bytes"]
    assert sampled_growth >= 0.9 * size, sampled_growth / MIB
    # The sampled peak is a lower bound; it cannot beat the exact figure by more
    # than a few pages of interpreter churn between the two readings.
    assert sampler.peak_rss_bytes <= result["peak_rss_bytes"] + 2 * MIB
    assert sampler.cpu_time_s > 0
    assert sampler.cpu_time_s <= sampler.wall_time_s + 0.02  # two clocks, in ticks


def test_vfork_trap_child_peak_is_its_own() -> None:
    # Raise this (parent) process's high-water mark to >= 1 GiB, then free it.
    big = _touch(1024 * MIB)
    del big
    assert measure.read_peak_bytes() >= 1024 * MIB

    proc = _spawn("trivial")
    result = _finish(proc)

    # The exact path (clear_refs + VmHWM) reports the child's own small peak:
    # it agrees with the child's lifetime VmHWM, which is per address space.
    assert abs(result["peak_rss_bytes"] - result["hwm_unreset_bytes"]) <= 5 * MIB
    assert result["peak_rss_bytes"] < 256 * MIB

    # ru_maxrss would have been wrong: CPython spawned the child with vfork, so
    # at exec the kernel folded the parent's (shared) old high-water mark into
    # the child's ru_maxrss. Both the parent's RUSAGE_CHILDREN and the child's
    # own RUSAGE_SELF report ~1 GiB for a child that never used 100 MiB.
    # (Checked on Linux 6.18 / CPython 3.11: both read ~1035 MiB.)
    if sys.platform.startswith("linux"):
        children_maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        assert children_maxrss >= 1000 * MIB
        assert result["ru_maxrss_self_bytes"] >= 1000 * MIB


@pytest.mark.skipif(measure._malloc_trim() is None, reason="needs glibc malloc_trim")
@pytest.mark.parametrize("copies", [1, 2, 13, 16])
def test_warm_iteration_shows_20_percent_growth_only_with_trim(copies: int) -> None:
    # Iteration 1 allocates 100 MiB in 16 KiB numpy chunks and frees them;
    # iteration 2 allocates 120 MiB. A survivor pins the heap top. With the repository
    # `copies` times on PYTHONPATH: where the child's survivor went depended on the holes
    # its imports left, so on sys.path (tests/_alloc_child.py): untrimmed, the second
    # iteration grew 38.4 MiB with 13 or 16 copies, 20.2 with one or two.
    env = {**_child_env(), "PYTHONPATH": os.pathsep.join([str(REPO_ROOT)] * copies)}
    trimmed = _finish(_spawn("warm", 100, 16, 1, env=env))
    first, second = trimmed["growth_bytes"]
    assert first >= 95 * MIB
    assert abs(second / first - 1.2) <= 0.03 * 1.2, second / first

    # Without the trim the freed heap stays resident and the warm second
    # iteration reuses it: the +20% is hidden (seen here: ratio 0.20).
    untrimmed = _finish(_spawn("warm", 100, 16, 0, env=env))
    first_u, second_u = untrimmed["growth_bytes"]
    assert abs(second_u / first_u - 0.2) <= 0.02, second_u / first_u  # the +20 MiB only


def test_in_process_reset_and_reads() -> None:
    big = _touch(64 * MIB)
    del big
    hwm_before = measure.read_peak_bytes()
    measure.trim_heap()
    measure.reset_peak()
    rss = measure.read_rss_bytes()
    assert measure.read_peak_bytes() < hwm_before
    assert measure.read_peak_bytes() >= rss - MIB
    assert 0 < measure.read_rss_anon_bytes() <= rss


def test_peak_window_value_only_after_block() -> None:
    meter = measure.PeakMeter()
    assert meter.last is None
    with meter.measure() as m:
        with pytest.raises(RuntimeError):
            _ = m.peak_rss_bytes
        buf = _touch(32 * MIB)
        del buf
    assert isinstance(meter.last, measure.PeakReading)
    assert m.reading == meter.last
    assert m.peak_rss_bytes == meter.last.peak_rss_bytes
    assert meter.last.growth_bytes >= 31 * MIB
    with pytest.raises(ValueError):
        measure.PeakMeter(method="guess")


def test_fallback_without_clear_refs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert measure.peak_method() == "vmhwm"
    monkeypatch.setattr(measure, "CLEAR_REFS_PATH", str(tmp_path / "no_clear_refs"))
    assert measure.peak_method() == "ru_maxrss"

    meter = measure.PeakMeter()
    assert meter.method == "ru_maxrss"
    with meter.measure() as m:
        pass
    assert m.method == "ru_maxrss"
    assert meter.last is not None and meter.last.method == "ru_maxrss"
    assert meter.last.peak_rss_bytes > 0
    assert meter.last.peak_rss_bytes >= meter.last.start_rss_bytes
    assert not (tmp_path / "no_clear_refs").exists()


# ---------------------------------------------------------------- sampler


def test_sampler_kills_child_over_limit() -> None:
    limit = 150 * MIB
    proc = _spawn("grow", 10, 600)
    sampler = measure.RssSampler(proc.pid, interval_s=0.005, limit_bytes=limit).start()
    try:
        out, _ = proc.communicate(timeout=SAFETY_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sampler.stop()
    assert sampler.limit_exceeded
    assert sampler.exceeded_rss_bytes is not None
    assert sampler.exceeded_rss_bytes > limit
    assert sampler.peak_rss_bytes == sampler.exceeded_rss_bytes
    assert proc.returncode == -signal.SIGKILL
    assert out == ""  # killed before it could report


def test_sampler_stops_quietly_on_zombie_and_missing_process() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    sampler = measure.RssSampler(proc.pid, interval_s=0.001).start()
    # Not reaped yet: the child turns zombie, and the sampler must notice alone.
    assert sampler.wait(SAFETY_TIMEOUT_S)
    assert sampler.vanished
    assert not sampler.limit_exceeded
    assert all(rss > 0 for _, rss in sampler.timeline)
    proc.wait()

    gone = measure.RssSampler(proc.pid).start()
    assert gone.wait(SAFETY_TIMEOUT_S)
    assert gone.vanished
    assert gone.sample_count == 0
    assert gone.peak_rss_bytes == 0
    gone.stop()  # stopping an ended sampler is harmless


def test_sampler_argument_validation() -> None:
    with pytest.raises(ValueError):
        measure.RssSampler(os.getpid(), interval_s=0)
    with pytest.raises(ValueError):
        measure.RssSampler(os.getpid(), limit_bytes=0)
    sampler = measure.RssSampler(os.getpid())
    with pytest.raises(RuntimeError):
        sampler.wait(0)
    with sampler:
        pass
    with pytest.raises(RuntimeError):
        sampler.start()


# ---------------------------------------------------------------- thinning


def test_thin_timeline_keeps_peak_and_endpoints() -> None:
    rng = random.Random(7)
    n = 10_000
    timeline = [(i * 0.005, rng.randrange(10 * MIB, 20 * MIB)) for i in range(n)]
    for peak_index in (1, 4321, n - 2):
        tl = list(timeline)
        tl[peak_index] = (tl[peak_index][0], 50 * MIB)
        for max_points in (3, 10, 2000):
            thin = measure.thin_timeline(tl, max_points=max_points)
            assert len(thin) <= max_points
            assert thin[0] == tl[0]
            assert thin[-1] == tl[-1]
            assert tl[peak_index] in thin
            times = [t for t, _ in thin]
            assert times == sorted(times)
            assert set(thin) <= set(tl)


def test_thin_timeline_short_and_invalid() -> None:
    tl = [(0.0, 1), (0.1, 5), (0.2, 2)]
    assert measure.thin_timeline(tl, max_points=3) == tl
    assert measure.thin_timeline([], max_points=5) == []
    with pytest.raises(ValueError):
        measure.thin_timeline(tl, max_points=2)


# ---------------------------------------------------------------- metadata


def test_pinned_thread_env() -> None:
    env = measure.pinned_thread_env(2)
    assert env == {
        "OPENBLAS_NUM_THREADS": "2",
        "OMP_NUM_THREADS": "2",
        "MKL_NUM_THREADS": "2",
        "VECLIB_MAXIMUM_THREADS": "2",
        "NUMEXPR_NUM_THREADS": "2",
    }
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError):
            measure.pinned_thread_env(bad)  # type: ignore[arg-type]


def test_environment_is_json_and_complete(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    env = measure.environment()
    assert json.loads(json.dumps(env)) == env
    assert env["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert env["thread_env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert env["cpu_count_logical"] >= 1
    if hasattr(os, "sched_getaffinity"):
        assert env["cpu_affinity"] == measure.cpu_list(sorted(os.sched_getaffinity(0)))
    assert env["memory_total_bytes"] > 0
    assert env["peak_method"] in ("vmhwm", "ru_maxrss")
    commit = env["git_commit"]
    assert commit is None or len(commit) == 40
    checkout = Path(ckptbench.__file__).resolve().parent.parent
    if (checkout / ".git").exists():  # run from its checkout: the commit is recorded
        git = ["git", "-C", str(checkout), "rev-parse", "HEAD"]
        head = subprocess.run(git, capture_output=True, text=True, check=True).stdout.strip()
        assert commit == head  # it was None: the root was taken one folder too shallow

    # Run from inside another repository: still ckptbench's own commit (or None when
    # ckptbench is installed), never that repository's.
    other = tmp_path / "other"
    other.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(other)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    theirs = subprocess.run(
        [*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    monkeypatch.chdir(other)
    env_there = measure.environment()
    assert env_there["git_commit"] == commit and env_there["git_commit"] != theirs
    assert env_there["ckptbench_version"]


def test_cpu_list_is_the_kernels_notation() -> None:
    assert measure.cpu_list([0, 1, 2, 3, 6]) == "0-3,6"
    assert measure.cpu_list([7, 5, 6, 6]) == "5-7"
    assert measure.cpu_list([4]) == "4"
    assert measure.cpu_list([0, 2, 4]) == "0,2,4"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_a_run_records_the_cpus_it_was_pinned_to() -> None:
    """A process pinned to one CPU (as ``taskset -c CPU`` starts it) records that CPU."""
    cpu = max(os.sched_getaffinity(0))
    code = (
        f"import os; os.sched_setaffinity(0, {{{cpu}}}); from ckptbench.measure import peaks; "
        "print(peaks.environment()['cpu_affinity'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(cpu)


def test_allocator_settings_are_recorded_and_reach_the_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # glibc's heap settings move torch's peaks by hundreds of MiB: a result must say them
    from ckptbench.measure.launch import child_env
    from ckptbench.results.schema import Case

    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    recorded = measure.environment()["malloc_env"]
    assert recorded["MALLOC_MMAP_THRESHOLD_"] == "65536"
    assert recorded["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=1"
    assert "MALLOC_ARENA_MAX" not in recorded
    worker = child_env(Case())
    assert measure.malloc_env(worker) == recorded  # the worker runs with what was recorded
    assert measure.malloc_env({"PATH": "/bin", "MALLOCX": "1"}) == {}


def test_numpy_environment_is_json() -> None:
    info = measure.numpy_environment()
    assert json.loads(json.dumps(info)) == info
    import numpy

    assert info["numpy_version"] == numpy.__version__
    assert info["blas"] is None or isinstance(info["blas"], dict)


def test_measure_module_stays_light() -> None:
    code = (
        "import sys, ckptbench.measure.peaks; "
        "print(sorted(m for m in ('numpy', 'pandas', 'rich', 'click') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_child_env(),
        check=True,
        timeout=SAFETY_TIMEOUT_S,
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["autograd", pytest.param("jax", marks=pytest.mark.jax)])
def test_each_mode_records_the_cpus_its_worker_ran_on(backend: str) -> None:
    """The run's CPUs are the parent's; a JAX worker with one thread pins itself to one of
    them, and its mode says so (the HTML report's provenance shows both)."""
    if backend == "jax":
        pytest.importorskip("jax")
    from ckptbench.analysis import compare
    from ckptbench.measure.runner import run_case
    from ckptbench.render.html import render_html
    from ckptbench.results.schema import Case, Mode

    case = Case(backend=backend, steps=6, snaps=2, hidden=3, batch=2, input=2, repeats=1, rounds=1)
    result = run_case(case, modes=(Mode.BASELINE,))
    (mode,) = result.modes
    allowed = result.environment["cpu_affinity"]
    if backend == "autograd" or not hasattr(os, "sched_setaffinity"):
        assert mode.cpu_affinity == allowed
        assert "as allowed" in render_html(compare([result]))
        return
    cpus = os.sched_getaffinity(0)
    assert mode.cpu_affinity == str(min(cpus))  # jax.pin_threads: the lowest allowed
    if len(cpus) > 1:
        assert mode.cpu_affinity != allowed and f">{min(cpus)}<" in render_html(compare([result]))
