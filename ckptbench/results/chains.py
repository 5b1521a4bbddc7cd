"""The executor a built-in layer chain runs on (docs/layers.md).

A chain's state changes shape from layer to layer; a backend whose spec lists
``chain_executors`` runs our schedules on a chain only with those (JAX: the engine-driven
executor; its compiled executor keeps every snapshot in one buffer of one shape. torch: the
engine binding; its one-call executor runs recurrences only). A case
of a built-in chain without ``--executor`` gets the first of them, recorded in the case,
so its result says what ran; one with an executor that cannot hold a chain is a
:class:`CaseError` (one line, exit 2 on the command line). A plug-in's chain is only known
once it is loaded: ``run``'s plug-in check (in a disposable worker) says so and the same
rule applies; elsewhere (a sweep's cells) the backend refuses it in its worker.

A framework's own checkpointing is written for one kind of model: ``torch.utils.checkpoint``
around a recurrence's segments, ``checkpoint_sequential`` over a chain's layers. A peer
given a built-in (or a loaded plug-in) of the other kind is a :class:`CaseError` here too,
before anything is measured, not a failed checkpointed mode after the baseline and the
plain gradient have run. So is a built-in given fewer steps than it is built with
(``transformer-stack``: an embedding and a head, two layers at least).
"""

from __future__ import annotations

from dataclasses import replace

from ckptbench.backends.registry import spec as backend_spec
from ckptbench.results.schema import Case, CaseError
from ckptbench.schedules import get_strategy, model_kind_refusal

__all__ = ["chain_executor"]


def chain_executor(case: Case, chain: bool | None = None) -> Case:
    """``case`` with the executor a layer chain needs on its backend (unchanged for a
    recurrence, a peer, or a backend whose every executor holds chains); a
    :class:`CaseError` where the strategy cannot checkpoint that kind of model. ``chain``:
    whether the model is a chain; None: a built-in the registry marks as one (a plug-in,
    not yet loaded: unknown, so neither rule applies)."""
    known = chain is not None
    if chain is None:
        # the workloads package imports autograd: loaded only when a case is checked, never
        # by the worker or at the command line's start
        from ckptbench.workloads.registry import builtin

        entry = builtin(case.model)
        known = entry is not None
        chain = known and entry.chain
        if known and case.steps < entry.min_steps:
            what = "layers" if chain else "steps"
            raise CaseError(
                f"--model {case.model} needs at least {entry.min_steps} {what} (--steps), "
                f"got {case.steps}"
            )
    runs = backend_spec(case.backend)
    refusal = model_kind_refusal(case.strategy, runs, case.model, chain) if known else None
    if refusal is not None:
        raise CaseError(refusal)
    holds = backend_spec(case.backend).chain_executors
    if not chain or not holds or not get_strategy(case.strategy).ours:
        return case
    if case.executor is None:
        return case if case.executor_used in holds else replace(case, executor=holds[0])
    if case.executor not in holds:
        raise CaseError(
            f"--model {case.model} is a layer chain: on {case.backend} our schedules run "
            f"a chain with --executor {' or '.join(holds)}, not {case.executor}"
        )
    return case
