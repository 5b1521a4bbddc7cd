"""A result document checked as it is read: what ``compare``, ``check``, ``read_results``
and a resumed sweep rely on, checked once before any of it is constructed, so a damaged or
foreign file is one line naming the file and the field, never a traceback.

Every field of :class:`~ckptbench.results.schema.RunResult` is checked by its annotation
(:func:`ckptbench.results.files.fields_problem`: fields added there are checked too), then
what the readers act on beyond the types: a mode listed twice, a mode marked ok without
iterations, an iteration that took no time (under the clock's tick), the host, and the
environment entries the gate reads. Pure: no I/O;
:func:`ckptbench.results.store.validate_result_document` raises the problem as a
``StoreError`` (as ``manifestcheck`` does for a manifest).
"""

from __future__ import annotations

import collections
from typing import Any

from ckptbench.results.files import fields_problem, short_json
from ckptbench.results.kinds import MANIFEST_KIND
from ckptbench.results.modes import FINISHED_WHY
from ckptbench.results.schema import Mode, RunResult, Status, version_problem

__all__ = ["CLOCK_TICK_S", "result_problem"]

#: The clock's tick (``time.perf_counter`` counts nanoseconds): no measured iteration is
#: shorter. A time of 1e-300 s made a slowdown of 1e297 and an OverflowError in its interval.
CLOCK_TICK_S = 1e-9


def result_problem(data: Any, source: str) -> str | None:
    """What makes ``data`` no result document this ckptbench can read, in one line naming
    ``source`` and the field, or None: the schema version, every field of
    :class:`~ckptbench.results.schema.RunResult` by its type, at least one mode, no mode twice
    (in one round), and no mode marked ok without measured iterations."""
    if not isinstance(data, dict):
        got = {list: "an array", str: "a string", bool: "true/false", type(None): "null"}
        kind = got.get(type(data), "a number")
        return f"{source}: not a ckptbench result (a JSON object; this is {kind})"
    if data.get("kind") == MANIFEST_KIND:
        return f"{source}: is a sweep manifest, not a result; pass its folder to read its cells"
    if "schema_version" not in data and not {"case", "modes"} & set(data):
        fields = ", ".join(sorted(map(str, data))[:3]) or "none"
        return (
            f"{source}: not a ckptbench result (no schema_version, case or modes; its fields: "
            f"{short_json(fields)})"
        )
    if (wrong := version_problem(data, source)) is not None:
        return wrong
    # the stored summary is written for CI scripts and never read back (results.summary)
    problem = fields_problem({k: v for k, v in data.items() if k != "summary"}, RunResult, "")
    problem = problem or _read_fields_problem(data)
    if problem is None:
        modes = data["modes"]
        seen = [(m["mode"], m.get("round", 0)) for m in modes]  # rounds may repeat a mode
        if not modes:
            problem = "modes is empty (no mode was measured)"
        elif len(set(seen)) < len(seen):
            twice = sorted(x for x, n in collections.Counter(seen).items() if n > 1)
            named = ", ".join(f"{m} in round {r + 1}" for m, r in twice[:3])
            more = f" and {len(twice) - 3} more" if len(twice) > 3 else ""
            problem = f"modes lists a mode twice ({named}{more})"
        else:
            for i, m in enumerate(modes):
                if m["status"] == Status.OK.value and not m.get("iterations"):
                    problem = f"mode {m['mode']} has status ok but no measured iterations"
                    break
                its = m.get("iterations", ())
                if (extra := _past_planned(data["case"], m)) is not None:
                    problem = f"modes[{i}].{extra}"
                    break
                zero = [j for j, it in enumerate(its) if it["wall_time_s"] < CLOCK_TICK_S]
                if zero:
                    took = its[zero[0]]["wall_time_s"]
                    problem = (
                        f"modes[{i}].iterations[{zero[0]}].wall_time_s is "
                        f"{'0' if not took else f'{took:.3g} s, below the clock tick of 1 ns'}"
                        " (a measured iteration takes time)"
                    )
                    break
    return None if problem is None else f"{source}: malformed result: {problem}"


def _past_planned(case: Any, mode: dict[str, Any]) -> str | None:
    """Iterations (or warm-up ones) past what the case plans: a worker runs ``repeats``
    after ``warmup``, never more, and a round of 20 000 iterations where 1 was planned (or
    where 10 000 is the most, ``schema.MAX_ROUNDS``) was read as measured."""
    for field, planned in (("iterations", "repeats"), ("warmup", "warmup")):
        most = case.get(planned) if isinstance(case, dict) else None
        got = len(mode.get(field) or ())
        if isinstance(most, int) and not isinstance(most, bool) and got > most:
            return f"{field} holds {got:,} iterations where case.{planned} plans {most:,}"
    return None


def _read_fields_problem(data: dict[str, Any]) -> str | None:
    """What ckptbench reads beyond the typed fields: the host (printed in tables, JUnit and
    markdown: one line of printable text) and the environment entries the gate and the
    report act on (``run --expect-oom``'s modes, the round a stop signal cut, whether the
    run finished)."""
    host = data.get("host", "")
    if not host.isprintable():
        return f"host must be printable text on one line, got {short_json(host)}"
    env = data.get("environment") or {}
    oom = env.get("expect_oom")
    names = {m.value for m in Mode}
    if oom is not None and not (isinstance(oom, list) and all(m in names for m in oom)):
        return f"environment.expect_oom must be a list of mode names, got {short_json(oom)}"
    stop = env.get("interrupted")
    if stop is not None:
        cut = stop.get("round") if isinstance(stop, dict) else None
        if not isinstance(stop, dict) or not (cut is None or _is_round(cut)):
            return (
                "environment.interrupted must be an object whose round is a whole number "
                f">= 1, got {short_json(stop)}"
            )
    end = env.get("finished", False)
    if end is not False and not (
        isinstance(end, dict) and _is_round(end.get("rounds")) and end.get("why") in FINISHED_WHY
    ):
        return (
            "environment.finished must be false (the run did not finish) or an object with "
            f"rounds (a whole number >= 1) and why (one of {', '.join(FINISHED_WHY)}), got "
            f"{short_json(end)}"
        )
    return None


def _is_round(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value < 2**31
