"""The gradient check of a run: a checkpointed gradient against the plain one of its round,
within the dtype's tolerance, with the step count its strategy plans; and every mode's loss
(normal's gradient too) finite.

The runner (``ckptbench.measure.runner``) calls :func:`checked` on each mode's result as it
arrives and :func:`check_earlier` once normal's gradient exists, for a checkpointed mode
that ran first in its round (rounds rotate the order). Each gradient file is read once per
mode (:class:`GradFiles`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ckptbench.results.schema import DTYPE_EPSILON, Case, Mode, ModeResult, Status
from ckptbench.schedules import get_strategy

__all__ = [
    "EPSILON",
    "GRAD_EPS_PER_STEP",
    "GRAD_TOLERANCE",
    "GRAD_TOLERANCE_CAP",
    "GradFiles",
    "check_earlier",
    "checked",
    "grad_error",
    "grad_tolerance",
    "verify",
]

#: Machine epsilon of each dtype a case records (``results.schema.DTYPE_EPSILON``).
EPSILON: dict[str, float] = DTYPE_EPSILON
#: A checkpointed gradient may differ from the plain one by this many epsilons per step of
#: the chain (max |difference| / max |plain gradient|): recomputation runs the same
#: operations, but a compiler may fuse, and so round, them differently in a loop and in
#: its unrolled or scanned twin, and such differences add up along the chain.
GRAD_EPS_PER_STEP = 64.0
#: ... and never more than this (bfloat16's 8 bits leave a check of gross errors only).
GRAD_TOLERANCE_CAP = 0.5
#: The float64 tolerance of a 1000-step chain (what ``--dtype float64`` runs check against).
GRAD_TOLERANCE = GRAD_EPS_PER_STEP * EPSILON["float64"] * 1000


def grad_tolerance(dtype: str, steps: int) -> float:
    """The largest max relative gradient error a checkpointed result may have: the dtype's
    epsilon x ``GRAD_EPS_PER_STEP`` x the chain's steps, capped at ``GRAD_TOLERANCE_CAP``."""
    eps = EPSILON.get(dtype or "float64", EPSILON["float64"])
    return min(GRAD_TOLERANCE_CAP, GRAD_EPS_PER_STEP * eps * max(1, int(steps)))


class GradFiles:
    """The gradient files one mode's checks read, each once (None where it cannot be read):
    normal's is read for its own check and a checkpointed result's that ran first."""

    def __init__(self) -> None:
        self.held: dict[str, Any] = {}

    def load(self, path: str) -> Any:
        import numpy as np

        if path not in self.held:
            try:
                self.held[path] = np.load(path)
            except OSError:
                self.held[path] = None
        return self.held[path]


def grad_error(
    normal_path: str, ckpt_path: str, files: GradFiles | None = None
) -> float | str | None:
    """Max relative error of the checkpointed gradient, or why there is none to compare
    (a string: a gradient with non-finite entries); ``None`` when a file is missing."""
    import numpy as np

    files = files or GradFiles()
    a, b = files.load(ckpt_path), files.load(normal_path)
    if a is None or b is None:
        return None
    if a.shape != b.shape:
        return float("inf")
    bad_a, bad_b = int(a.size - np.isfinite(a).sum()), int(b.size - np.isfinite(b).sum())
    if bad_a or bad_b:
        which = []
        if bad_a:
            which.append(f"the checkpointed gradient has {bad_a} of {a.size}")
        if bad_b:
            which.append(f"the plain gradient has {bad_b} of {b.size}")
        return " and ".join(which) + " entries not finite (inf or nan)"
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    diff = float(np.max(np.abs(a - b))) if b.size else 0.0
    return diff / scale if scale > 0 else diff


def _dtype(case: Case) -> str:
    return getattr(case, "dtype", "float64") or "float64"


def _loss_not_finite(case: Case, result: ModeResult) -> ModeResult | None:
    """``result`` failed when its loss is not finite (in any mode: the model's computation,
    not checkpointing, made it so), else None."""
    if result.loss is None or math.isfinite(result.loss):
        return None
    wider = "a wider --dtype or " if _dtype(case) != "float64" else ""  # none is wider
    return replace(
        result,
        status=Status.FAILED,
        error=f"the loss is not finite ({result.loss}) in {_dtype(case)}: the computation "
        f"overflowed or met an invalid value, which no checkpointing changes; try {wider}"
        "smaller inputs",
    )


def _plain_verified(
    case: Case, result: ModeResult, grad_path: str | None, files: GradFiles | None = None
) -> ModeResult:
    """Fail a baseline or normal result whose loss, or plain gradient (``grad_path``), is
    not finite: a plug-in whose NaN appears only after the check's first evaluation is
    then failed where it appears, not only in the checkpointed mode it cannot match."""
    failed = _loss_not_finite(case, result)
    if failed is not None or not grad_path:
        return failed or result
    import numpy as np

    grad = (files or GradFiles()).load(grad_path)
    if grad is None:
        return result
    bad = int(grad.size - np.count_nonzero(np.isfinite(grad)))
    if not bad:
        return result
    return replace(
        result,
        status=Status.FAILED,
        error=f"the plain gradient is not finite: {bad} of {grad.size} entries inf or nan in "
        f"{_dtype(case)}: the computation overflowed or met an invalid value, which no "
        "checkpointing changes",
    )


def verify(case: Case, result: ModeResult, grad_err: float | str | None) -> ModeResult:
    """Fail a checkpointed result whose loss or gradient is not finite, whose gradient is
    wrong (beyond the dtype's tolerance) or whose step count is wrong (the count a
    strategy plans: its closed form, a replay of its stream, or the recorded plan's)."""
    dtype = _dtype(case)
    if (failed := _loss_not_finite(case, result)) is not None:
        return failed
    if isinstance(grad_err, str):
        return replace(
            result,
            status=Status.FAILED,
            error=f"gradient not finite: {grad_err} in {dtype}; nothing to compare",
        )
    result = replace(result, grad_max_rel_err=grad_err)
    tol = grad_tolerance(dtype, case.steps)
    if grad_err is not None and not grad_err <= tol:
        return replace(
            result,
            status=Status.FAILED,
            error=f"gradient differs from the plain gradient: max rel err {grad_err:.3g} "
            f"> {tol:.3g} (the {dtype} tolerance of {case.steps} steps)",
        )
    counts = get_strategy(case.strategy).step_counts(case.steps, case.snaps, result.plan)
    got = result.counters.get("step_calls")
    if counts is not None and got is not None and got != sum(counts):
        return replace(
            result,
            status=Status.FAILED,
            error=f"step evaluations {got} != planned {sum(counts)} "
            f"({counts[0]} advances + {counts[1]} taped)",
        )
    return result


def checked(
    case: Case,
    round_index: int,
    mode: Mode,
    result: ModeResult,
    modes: Sequence[Mode],
    grads: dict[Mode, str],
    files: GradFiles | None = None,
) -> ModeResult:
    """Verify a checkpointed result against this round's normal gradient, once both exist;
    fail any other whose loss (normal: or gradient) is not finite."""
    if not result.ok:
        return result
    if mode is not Mode.CHECKPOINTED:
        return _plain_verified(case, result, grads[mode] if mode is Mode.NORMAL else None, files)
    err = None
    if Mode.NORMAL in modes and os.path.exists(grads[Mode.NORMAL]):
        err = grad_error(grads[Mode.NORMAL], grads[mode], files)
    return verify(case, result, err)


def check_earlier(
    case: Case,
    results: list[ModeResult],
    round_index: int,
    grads: dict[Mode, str],
    files: GradFiles | None = None,
) -> None:
    """Once normal's gradient of round ``round_index`` exists, verify the round's
    checkpointed result in ``results`` (replaced there) if it ran first (rounds rotate the
    order) and is still unchecked."""
    if not os.path.exists(grads[Mode.NORMAL]):
        return
    for i, r in enumerate(results):
        mine = r.round == round_index and r.mode is Mode.CHECKPOINTED
        if mine and r.ok and r.grad_max_rel_err is None:
            err = grad_error(grads[Mode.NORMAL], grads[Mode.CHECKPOINTED], files)
            results[i] = verify(case, r, err)
