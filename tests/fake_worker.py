"""A fake ``measure.worker`` for CLI/runner tests: same protocol, canned numbers, no timing.

It reports on the job's ``channel_fd`` pipe like the real worker (ready, iteration, result
events). Behaviour is steered by environment variables so tests can inject faults:
FAKE_ITER_SLEEP=<mode>:<seconds> sleeps before each iteration (partial timeouts); each
variable may name several modes, comma-separated (FAKE_SLEEP=baseline:1,normal:2);
FAKE_SPOOF=<mode> prints a forged ok result on stdout first (must be ignored);
FAKE_CRASH=<mode> exits 3 with a stderr message; FAKE_FAIL=<mode> reports ok=false;
FAKE_SLEEP=<mode>:<seconds> sleeps (timeouts); FAKE_ALLOC=<mode>:<MiB> touches memory and
waits (memory limits); FAKE_GRAD_NOISE=<x> perturbs the checkpointed gradient;
FAKE_SCALE=<x> multiplies every reported peak overhead (regressions); FAKE_CPU_SHARE=<x>
reports CPU time = x * wall time (a busy machine). Side tasks: ``check`` passes unless
FAKE_PLUGIN_BAD=<message>; ``device`` reports no problem with the CPU, and with a GPU only
with FAKE_CUDA=1.
"""

import json
import os
import sys
import time

import numpy as np

MIB = 2**20


def main() -> int:
    job = json.loads(sys.stdin.read())
    case, mode = job["case"], job["mode"]
    fd = job.get("channel_fd")
    channel = os.fdopen(fd, "w") if isinstance(fd, int) else sys.stdout

    def emit(event):
        channel.write(json.dumps(event) + "\n")
        channel.flush()

    def flag(name):  # "<mode>:<arg>", several separated by commas, or "<mode>"
        for value in os.environ.get(name, "").split(","):
            m, sep, arg = value.partition(":")
            if m == mode:
                return arg if sep else "1"
        return None

    task = job.get("task")
    if task == "check":
        bad = os.environ.get("FAKE_PLUGIN_BAD")
        emit({"event": "result", "ok": not bad, "error": bad})
        return 0
    if task == "device":
        cuda = os.environ.get("FAKE_CUDA") == "1" or case.get("device") == "cpu"
        problem = None if cuda else "torch 0.fake (a CPU-only build) sees no CUDA device here"
        emit({"event": "result", "ok": True, "problem": problem})
        return 0
    if flag("FAKE_CRASH"):
        print("fake worker: simulated segfault", file=sys.stderr)
        return 3
    if flag("FAKE_SPOOF"):
        print(json.dumps({"event": "result", "ok": True, "iterations": []}), flush=True)
    if flag("FAKE_FAIL"):
        emit({"event": "result", "ok": False, "error": "RuntimeError: simulated failure"})
        return 1
    if (s := flag("FAKE_SLEEP")) is not None:
        time.sleep(float(s))
    if (a := flag("FAKE_ALLOC")) is not None:
        block = bytearray(int(float(a) * MIB))
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(2.0)
    steps, snaps = case["steps"], case["snaps"]
    scale = float(os.environ.get("FAKE_SCALE", "1"))
    share = float(os.environ.get("FAKE_CPU_SHARE", "1"))
    base = 50 * MIB
    over = {"baseline": 0, "normal": steps * 64 * 1024, "checkpointed": (snaps + 8) * 64 * 1024}
    per_iter = {"baseline": 0.010, "normal": 0.050, "checkpointed": 0.055}[mode]
    n = case["warmup"] + case["repeats"]
    emit({"event": "ready", "planned": n, "warmup": case["warmup"]})
    iters = [
        {
            "wall_time_s": per_iter * (1 + 0.01 * k),
            "cpu_time_s": per_iter * (1 + 0.01 * k) * share,
            "peak_rss_bytes": base + int(over[mode] * scale),
            "start_rss_bytes": base,
        }
        for k in range(n)
    ]
    iter_sleep = flag("FAKE_ITER_SLEEP")
    for k, record in enumerate(iters):
        if iter_sleep is not None:
            time.sleep(float(iter_sleep))
        emit({"event": "iteration", "warmup": k < case["warmup"], "index": k, "record": record})
    from ckptbench.schedules import optimal_forward_steps

    t = optimal_forward_steps(steps, min(snaps, steps))
    counters = {"step_calls": steps}
    if mode == "checkpointed":
        counters = {"step_calls": t + steps, "steps_advanced": t, "steps_taped": steps}
    if job.get("grad_path"):
        g = np.linspace(1.0, 2.0, 50)
        if mode == "checkpointed":
            g = g * (1 + float(os.environ.get("FAKE_GRAD_NOISE", "0")))
        np.save(job["grad_path"], g)
    emit(
        {
            "event": "result",
            "ok": True,
            "mode": mode,
            "peak_method": "vmhwm",
            "baseline_rss_anon_bytes": base // 2,
            "counters": counters,
            "loss": 0.5,
            "numpy": {"numpy_version": np.__version__},
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
