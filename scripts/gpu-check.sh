#!/usr/bin/env bash
# Issue 22's GPU check: one script, under 8 minutes on one H100 or H200 (docs/gpu.md).
#
# On the device machine (its python3 holds torch and a CUDA jax; autograd and
# memory_profiler travel as wheels in .whl, see docs/gpu.md), from the repository root:
#   bash scripts/gpu-check.sh            # results under $OUT (or results/gpu-run)
# Settings (environment; TESTS, EXEC, SWEEP are on and PROBE, PROFILE, PIN off unless set,
# 0 is off): ROWS, the rows of scripts/gpu_executors.py to run, in order, each
# ROW[:SPAN[:FOLD[:REST]]] (default: all); TESTS_K, a pytest -k expression for the GPU
# tests; PROFILE=1 adds each JAX engine row's gradient call by call and a torch.profiler
# table of each torch row; COSTS, a costs file
# every optimal row plans from; TESTS=0, EXEC=0, SWEEP=0 skip a part; RESUME, the
# gpu-check.tgz an earlier run returned (in the working tree): the sweep measures only
# the cells it lacks or failed; CONFIG, another sweep config; PROBE=1 adds
# scripts/torch_backward_calls.py (what a reverse call costs torch on the device);
# RUN, the options of one `ckptbench run` (part 4, e.g. a pooled torch cell), run once
# for each --executor in EXECUTORS (e.g. "engine one-call") and each entry of PINS: 0 as
# started, 1 pinned to the CPUs next to the GPU (taskset -c
# with the GPU's local_cpulist, or GPU_CPUS where given; env.txt says which); PIN=1 pins parts 1-3 the same way;
# T_TESTS, T_EXEC, T_SWEEP, T_RUN: each part's limit in seconds (T_RUN: each run's).
set -u -o pipefail
OUT=${OUT:-results/gpu-run}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
# JAX's persistent compilation cache, shared by the executors script and every sweep
# worker: a window program compiled once (70-90 s for Revolve's on an H200) is loaded from
# disk afterwards (the counter compile_time_ns then records the load)
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/ckptbench-jax-cache}
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit 1
fi
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import jax, torch
print("jax", jax.__version__, jax.devices(), "torch", torch.__version__, torch.cuda.is_available())
PY
# where the host's cores are: the GPU's NUMA-local CPUs (sysfs wants the bus id's last 12
# characters, lower case), the CPUs this script may use, the load
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | head -1)
bus=$(printf '%s' "${bus: -12}" | tr 'A-F' 'a-f')
LOCAL=${GPU_CPUS:-$(cat "/sys/bus/pci/devices/$bus/local_cpulist" 2>/dev/null)}
{ echo "gpu_pci=${bus:-unknown} gpu_local_cpus=${LOCAL:-unknown} allowed_cpus=$(taskset -pc $$ 2>/dev/null | sed 's/.*: //') nproc=$(nproc)"
  uptime; } | tee -a "$OUT/env.txt"
pin() {  # pin 1 CMD...: run CMD on the GPU's local CPUs (as started where they are unknown)
  local on=$1; shift
  if [ "$on" = 1 ] && [ -n "$LOCAL" ]; then taskset -c "$LOCAL" "$@"; else "$@"; fi
}
# 1. what CI cannot check: no synchronisation in torch's executor, phase times left out,
#    no host read in the JAX engine (run 6 ran 20 of them in 90 s on an H200: 150 s now)
[ "${TESTS:-1}" != 0 ] && pin "${PIN:-0}" timeout "${T_TESTS:-150}" python3 -m pytest -q -p no:cacheprovider tests/test_gpu_paths.py \
  tests/test_jax_dispatch.py ${TESTS_K:+-k "$TESTS_K"} 2>&1 | tee "$OUT/tests.txt"
# 1b. what one backward call costs torch beyond its kernels (about 30 s on an H200)
[ "${PROBE:-0}" != 0 ] && pin "${PIN:-0}" timeout 120 python3 scripts/torch_backward_calls.py --device "${DEVICE:-cuda}" \
  2>&1 | tee "$OUT/probe.txt"
# 2. the done-when figures in one process (about 2-3 minutes): JSON lines
[ "${EXEC:-1}" != 0 ] && pin "${PIN:-0}" timeout "${T_EXEC:-230}" python3 scripts/gpu_executors.py --device "${DEVICE:-cuda}" ${ROWS:+--only "$ROWS"} \
  $([ "${PROFILE:-0}" != 0 ] && echo --profile) ${COSTS:+--costs "$COSTS"} 2>&1 | tee "$OUT/executors.txt"
# 3. the done-when cells through the CLI (fresh workers, device memory): what time is left
if [ "${SWEEP:-1}" != 0 ]; then
  again=()
  if [ -n "${RESUME:-}" ]; then  # an earlier run's cells: keep them, measure the rest
    tar xzf "$RESUME" -C "$OUT" && again=(--resume --retry-failed) || exit 1
  fi
  pin "${PIN:-0}" timeout "${T_SWEEP:-190}" python3 -m ckptbench sweep "${CONFIG:-configs/gpu-check.toml}" \
    --yes --out "$OUT/gpu-check" ${again[@]+"${again[@]}"} -q 2>&1 | tail -20 | tee "$OUT/sweep.txt"
  python3 -m ckptbench compare "$OUT/gpu-check" > "$OUT/compare.txt" 2>&1
  tar czf "$OUT/gpu-check.tgz" -C "$OUT" gpu-check 2>/dev/null && rm -rf "$OUT/gpu-check"
fi
# 4. one cell through the CLI (fresh workers): RUN's options once for each executor of
#    EXECUTORS (default: the case's own) and each entry of PINS
if [ -n "${RUN:-}" ]; then
  for e in ${EXECUTORS:-default}; do
    ex=()
    [ "$e" != default ] && ex=(--executor "$e")
    for p in ${PINS:-0}; do
      # shellcheck disable=SC2086  # RUN is a list of options
      pin "$p" timeout "${T_RUN:-190}" python3 -m ckptbench run $RUN ${ex[@]+"${ex[@]}"} \
        --out "$OUT/run-$e-pin$p.json" 2>&1 | tail -25 | tee "$OUT/run-$e-pin$p.txt"
    done
  done
fi
exit 0
