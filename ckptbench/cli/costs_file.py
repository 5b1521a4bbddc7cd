"""The ``--costs`` file of ``run`` and ``plan``: per-step costs for the planner (the format
of ``schedules.optimal.Costs``, docs/planner.md), read as result files are, and checked
against the case it plans for."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ckptbench.cli.options import InputError
from ckptbench.results.schema import Case

__all__ = ["COSTS_FILE_MAX_BYTES", "CostsWarning", "costs_note", "read_costs", "shown_notes"]

#: The largest costs file read (per-step costs of 100 000 steps are about 10 MB of JSON).
COSTS_FILE_MAX_BYTES = 64 * 2**20


class CostsWarning(str):
    """:func:`costs_note`'s line among a command's notes: printed as a warning, and under
    ``-q`` too (the stored bytes then reported follow the file, not the run)."""


def shown_notes(notes: Sequence[str], quiet: bool) -> list[tuple[str, str]]:
    """(kind, text) of each of a command's notes to print: "note", or "warning" for a
    :class:`CostsWarning` or a ``measure.tasks.PluginWarning`` (a plug-in recorded in
    another dtype than asked), the only ones ``quiet`` keeps."""
    from ckptbench.measure.tasks import PluginWarning

    warns = (CostsWarning, PluginWarning)
    warned = [("warning" if isinstance(n, warns) else "note", n) for n in notes]
    return [(kind, n) for kind, n in warned if kind == "warning" or not quiet]


def read_costs(path: Path, steps: int) -> dict:
    """A costs file (docs/planner.md) as a ``planner.Costs`` document; one line if bad. Read
    as result files are (``results.files.read_json_limited``: a regular file of at most
    64 MiB, UTF-8, nested a few levels, no repeated key, no integer of thousands of digits)."""
    from ckptbench.results.files import read_json_limited
    from ckptbench.results.inputs import said_path, unreadable_text
    from ckptbench.results.kinds import MANIFEST, kind_of
    from ckptbench.schedules.optimal import Costs

    try:
        doc = read_json_limited(path, COSTS_FILE_MAX_BYTES, "costs file")
    except OSError as err:
        raise InputError(f"--costs {said_path(path)}: {unreadable_text(err, path)}") from None
    except ValueError as err:
        raise InputError(f"--costs {said_path(path)}: {err}") from None
    if (kind := kind_of(doc)) is not None:  # it said "unknown cost field 'case'"
        what = "sweep manifest" if kind == MANIFEST else "result"
        raise InputError(f"--costs {said_path(path)}: is a ckptbench {what}, not a costs file "
                         "(plan --save-costs FILE writes one)")  # fmt: skip
    try:
        costs = Costs.from_dict(doc)
    except ValueError as err:
        raise InputError(f"--costs {said_path(path)}: {err}") from None
    if costs.steps is not None and costs.steps != steps:
        raise InputError(
            f"--costs {said_path(path)}: has costs for {costs.steps} steps, not {steps}"
        )
    return costs.as_dict()


def costs_note(
    path: Path, doc: dict, case: Case, states: Sequence[int] | None = None
) -> str | None:
    """What to say when a costs file's states are not ``case``'s: the plan then keeps states
    that are not there, and the executor counts the file's bytes. A built-in's state sizes
    are known from its sizes and dtype; a plug-in's are ``states``, the bytes its check
    measured in a disposable worker (``measure.tasks.checked_plugin``; ckptbench never
    imports a plug-in itself). None when they match or cannot be known. A warning
    (:class:`CostsWarning`), not a refusal: costs are also a what-if ('plan as if ...')."""
    from ckptbench.results.schema import DTYPE_BYTES
    from ckptbench.schedules.optimal import Costs
    from ckptbench.workloads import Sizes, registry

    costs = Costs.from_dict(doc)
    entry = registry.builtin(case.model)
    if entry is not None:
        elements = entry.state_elements(Sizes(**case.sizes()), case.steps)
        if elements is None:
            return None
        per = elements if isinstance(elements, list) else [elements] * case.steps
        want = [e * DTYPE_BYTES[case.dtype] for e in per]
        how = f"at these sizes in {case.dtype}"
    elif states is not None and len(states) == case.steps:
        want, how = list(states), "at these sizes, as its check measured them"
    else:
        return None
    got = list(costs.per_step(case.steps)[2])
    if got == want:
        return None
    k = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
    return CostsWarning(
        f"--costs {path}: step {k}'s state is {got[k]} B there, but {want[k]} B in --model "
        f"{case.model} {how} (costs of another model, sizes or dtype?): the plan, its "
        "prediction and the stored bytes reported follow the file"
    )
