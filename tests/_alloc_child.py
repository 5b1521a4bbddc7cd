"""Child process for tests/test_measure.py: allocate memory, measure it, print one JSON line.

Usage: python tests/_alloc_child.py MODE [ARGS...]

  hold MIB HOLD_S           touch MIB MiB inside PeakMeter, keep it HOLD_S seconds
  trivial                   measure an empty region; also report unreset peaks
  warm MIB CHUNK_KIB TRIM   two iterations, MIB then 1.2*MIB in CHUNK_KIB numpy chunks
  grow STEP_MIB CAP_MIB     grow by STEP_MIB every 10 ms up to CAP_MIB, then sleep
"""

from __future__ import annotations

import json
import sys
import time

from ckptbench.measure import peaks as measure

MIB = 2**20


def touched(nbytes: int) -> bytearray:
    """Return a bytearray whose every page has been written."""
    return bytearray(b"\x01") * nbytes


def hold(mib: float, hold_s: float) -> dict[str, object]:
    idle = measure.read_rss_bytes()
    meter = measure.PeakMeter()
    with meter.measure() as m:
        buf = touched(int(mib * MIB))
        time.sleep(hold_s)
        del buf
    return {"idle_rss_bytes": idle, **vars(meter.last), "growth_bytes": m.growth_bytes}


def trivial() -> dict[str, object]:
    # Read before anything is reset: the true lifetime peak of this process.
    hwm_unreset = measure.read_peak_bytes()
    ru_self = measure.read_ru_maxrss_bytes()
    meter = measure.PeakMeter()
    with meter.measure():
        pass
    return {
        "hwm_unreset_bytes": hwm_unreset,
        "ru_maxrss_self_bytes": ru_self,
        **vars(meter.last),
    }


def warm(mib: float, chunk_kib: int, trim: bool) -> dict[str, object]:
    import numpy as np

    meter = measure.PeakMeter(trim=trim)
    chunk = chunk_kib * 1024 // 8
    survivors = []
    growth = []
    for factor in (1.0, 1.2):
        n_chunks = int(factor * mib * MIB) // (chunk * 8)
        with meter.measure():
            arrays = [None] * n_chunks  # sized once: no buffer of it freed among the chunks
            for i in range(n_chunks):
                arrays[i] = np.ones(chunk)
            # A long-lived object per iteration, like a cached result, allocated last and as
            # large as a chunk, so it sits above the freed chunks and pins the heap top: the
            # chunks took every free block that size below the top. A small one (512
            # doubles) went into whichever hole the imports had left, which depends on
            # sys.path: with some PYTHONPATHs (ckptbench's root 13 times, or twice under a
            # 4-letter link) it pinned the top partway, and the untrimmed second iteration
            # grew 38.4 MiB instead of 20.2; a hole below every chunk pins nothing.
            survivors.append(np.ones(chunk))
            del arrays
        growth.append(meter.last.growth_bytes)
    return {"growth_bytes": growth, "method": meter.method}


def grow(step_mib: float, cap_mib: float) -> dict[str, object]:
    held = []
    while len(held) * step_mib < cap_mib:
        held.append(touched(int(step_mib * MIB)))
        time.sleep(0.01)
    time.sleep(60)
    return {"held_mib": len(held) * step_mib}


def main(argv: list[str]) -> None:
    mode, args = argv[0], argv[1:]
    if mode == "hold":
        out = hold(float(args[0]), float(args[1]))
    elif mode == "trivial":
        out = trivial()
    elif mode == "warm":
        out = warm(float(args[0]), int(args[1]), args[2] == "1")
    elif mode == "grow":
        out = grow(float(args[0]), float(args[1]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
