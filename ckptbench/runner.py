"""Spawn one fresh worker per (case, mode), sample it like ``top``, enforce limits, save.

The runner never computes ratios (``analysis`` does) and never prints (``cli`` does); it
reports progress through a callback and saves the result file after every mode, atomically,
so a crash or a kill later in the run loses nothing already measured.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ckptbench
from ckptbench import measure
from ckptbench.analysis import summarize
from ckptbench.results import (
    MODES,
    Case,
    Iteration,
    Mode,
    ModeResult,
    RunResult,
    Status,
    save_result,
)
from ckptbench.revolve import Strategy, optimal_forward_steps

__all__ = ["GRAD_TOLERANCE", "Progress", "run_case", "run_mode", "worker_command"]

#: Checkpointed gradients must match plain autograd's to this max relative error.
GRAD_TOLERANCE = 1e-8
TIMELINE_POINTS = 2000

Progress = Callable[[str, Mode, ModeResult | None], None]  # (phase "start"/"done", mode, result)


def worker_command() -> list[str]:
    """``python -m ckptbench.worker``, or ``$CKPTBENCH_WORKER`` (a fake worker, for tests)."""
    override = os.environ.get("CKPTBENCH_WORKER")
    if override:
        return shlex.split(override)
    return [sys.executable, "-m", "ckptbench.worker"]


def _child_env(case: Case) -> dict[str, str]:
    env = dict(os.environ)
    env.update(measure.pinned_thread_env(case.threads))
    root = str(Path(ckptbench.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def run_mode(
    case: Case, mode: Mode, grad_path: str | None = None
) -> tuple[ModeResult, dict[str, Any] | None]:
    """Run one mode in a fresh worker process: (what it measured, the worker's numpy/BLAS
    description). Never raises for a failed measurement: the status says what happened."""
    job = json.dumps({"case": case.to_dict(), "mode": mode.value, "grad_path": grad_path})
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_env(case),
            text=True,
        )
    except OSError as err:
        return ModeResult(
            mode=mode, status=Status.CRASHED, error=f"cannot start worker: {err}"
        ), None
    sampler = measure.RssSampler(proc.pid, case.sample_interval_s, case.memory_limit_bytes)
    sampler.start()
    timed_out = False
    try:
        out, err_text = proc.communicate(job, timeout=case.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        out, err_text = proc.communicate()
    finally:
        sampler.stop()
    wall = time.perf_counter() - started
    common: dict[str, Any] = {
        "mode": mode,
        "sampled_peak_rss_bytes": sampler.peak_rss_bytes or None,
        "sample_count": sampler.sample_count,
        "sampler_cpu_time_s": sampler.cpu_time_s,
        "timeline": tuple(measure.thin_timeline(sampler.timeline, TIMELINE_POINTS)),
        "exit_code": proc.returncode,
        "wall_time_s": wall,
    }

    def failed(status: Status, error: str) -> tuple[ModeResult, None]:
        return ModeResult(status=status, error=error, stderr_tail=_tail(err_text), **common), None

    if sampler.limit_exceeded:
        return failed(
            Status.OUT_OF_MEMORY,
            f"RSS {_mib(sampler.exceeded_rss_bytes or 0)} exceeded the memory limit of "
            f"{_mib(case.memory_limit_bytes or 0)}; the worker was stopped",
        )
    if timed_out:
        return failed(
            Status.TIMEOUT, f"worker exceeded the timeout of {case.timeout_s:g} s and was killed"
        )
    report = _last_json_line(out)
    if report is None:
        return failed(
            Status.CRASHED, f"worker exited with status {proc.returncode} without a result"
        )
    if not report.get("ok"):
        return failed(Status.FAILED, str(report.get("error", "worker reported a failure")))
    try:
        result = ModeResult(
            status=Status.OK,
            iterations=tuple(Iteration(**it) for it in report["iterations"]),
            warmup=tuple(Iteration(**it) for it in report.get("warmup", ())),
            peak_method=report.get("peak_method", ""),
            baseline_rss_anon_bytes=report.get("baseline_rss_anon_bytes"),
            counters=dict(report.get("counters", {})),
            loss=report.get("loss"),
            **common,
        )
    except (KeyError, TypeError) as err:
        return failed(Status.CRASHED, f"worker result is malformed ({type(err).__name__}: {err})")
    if not result.iterations:
        return failed(Status.CRASHED, "worker reported no iterations")
    return result, report.get("numpy")


def _last_json_line(out: str) -> dict[str, Any] | None:
    for line in reversed(out.strip().splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _grad_error(normal_path: str, ckpt_path: str) -> float | None:
    import numpy as np

    try:
        a, b = np.load(ckpt_path), np.load(normal_path)
    except OSError:
        return None
    if a.shape != b.shape:
        return float("inf")
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def _verify(case: Case, result: ModeResult, grad_err: float | None) -> ModeResult:
    """Fail a checkpointed result whose gradient or (for revolve) step count is wrong."""
    result = replace(result, grad_max_rel_err=grad_err)
    if grad_err is not None and not grad_err <= GRAD_TOLERANCE:
        return replace(
            result,
            status=Status.FAILED,
            error=f"gradient differs from plain autograd: max rel err {grad_err:.3g} "
            f"> {GRAD_TOLERANCE:g}",
        )
    if case.strategy == Strategy.REVOLVE.value:
        want = optimal_forward_steps(case.steps, min(case.snaps, case.steps)) + case.steps
        got = result.counters.get("step_calls")
        if got is not None and got != want:
            return replace(
                result,
                status=Status.FAILED,
                error=f"step evaluations {got} != optimal {want} (t(l,s) + l)",
            )
    return result


def run_case(
    case: Case,
    *,
    out_path: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    modes: Sequence[Mode] = MODES,
) -> RunResult:
    """Measure ``case`` in each mode (fresh process each), saving after every mode."""
    env = measure.environment()
    env["sample_interval_s"] = case.sample_interval_s
    env["thread_env_child"] = measure.pinned_thread_env(case.threads)
    host = socket.gethostname()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    results: list[ModeResult] = []

    def snapshot() -> RunResult:
        return RunResult(
            case=case,
            modes=tuple(results),
            environment=env,
            summary=summarize(case, results),
            created=created,
            host=host,
            tool_version=ckptbench.__version__,
        )

    with tempfile.TemporaryDirectory(prefix="ckptbench-") as tmp:
        grads = {m: os.path.join(tmp, f"{m.value}.npy") for m in modes}
        for mode in modes:
            if progress:
                progress("start", mode, None)
            want_grad = mode in (Mode.NORMAL, Mode.CHECKPOINTED)
            result, numpy_env = run_mode(case, mode, grads[mode] if want_grad else None)
            if numpy_env and "numpy" not in env:
                env["numpy"] = numpy_env
            if mode is Mode.CHECKPOINTED and result.ok:
                err = None
                if Mode.NORMAL in modes and os.path.exists(grads[Mode.NORMAL]):
                    err = _grad_error(grads[Mode.NORMAL], grads[mode])
                result = _verify(case, result, err)
            results.append(result)
            if out_path is not None:
                save_result(snapshot(), out_path)
            if progress:
                progress("done", mode, result)
    return snapshot()
